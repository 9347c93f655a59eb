package httpsrc

import "strconv"

// JSON numbers to int64 and float64, exactly as strconv parses them,
// without strconv's work for the short numbers most bodies hold.

// parseInt parses a JSON integer literal (-?digits, no leading zero),
// and reports false if it does not fit in an int64.
func parseInt(raw []byte) (int64, bool) {
	digits := raw
	if raw[0] == '-' {
		digits = raw[1:]
	}
	if len(digits) > 18 { // 10^18 < 2^63: up to 18 digits fit
		v, err := strconv.ParseInt(string(raw), 10, 64)
		return v, err == nil
	}
	var v int64
	for _, c := range digits {
		v = v*10 + int64(c-'0')
	}
	if raw[0] == '-' {
		v = -v
	}
	return v, true
}

// pow10 holds the powers of ten a float64 holds exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// parseFloat parses a JSON number with a fraction or an exponent, and
// reports false if it is beyond float64's range. A plain decimal of at
// most 15 digits is an integer below 2^53 over a power of ten, both
// exact, and IEEE division rounds their quotient correctly: the float64
// strconv.ParseFloat returns (its own exact fast path). Anything else is
// left to strconv.
func parseFloat(raw []byte) (float64, bool) {
	if v, ok := shortDecimal(raw); ok {
		return v, true
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	return v, err == nil
}

// shortDecimal parses -?digits.digits of at most 15 digits in all;
// false for anything else.
func shortDecimal(raw []byte) (float64, bool) {
	digits := raw
	if raw[0] == '-' {
		digits = raw[1:]
	}
	if len(digits) > 16 { // 15 digits and the point
		return 0, false
	}
	var m int64
	frac := -1 // digits after the point; -1 until the point
	for _, c := range digits {
		switch {
		case isDigit(c):
			m = m*10 + int64(c-'0')
			if frac >= 0 {
				frac++
			}
		case c == '.' && frac < 0:
			frac = 0
		default: // an exponent
			return 0, false
		}
	}
	if frac < 0 {
		return 0, false
	}
	v := float64(m) / pow10[frac]
	if raw[0] == '-' {
		v = -v
	}
	return v, true
}
