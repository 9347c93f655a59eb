package httpsrc

import "time"

// parseTimestamp parses an RFC 3339 timestamp into µs since the Unix
// epoch, UTC; finer digits are truncated (toward the past). It accepts
// what time.Parse(time.RFC3339Nano, s) accepts, and gives its instant.
// (Bytes or a string: a JSON value is parsed where it lies.)
func parseTimestamp[T []byte | string](s T) (int64, bool) {
	// Cheap refusal first: most strings are not timestamps, and
	// time.Parse builds an error for each.
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	if us, ok := rfc3339Micros(s); ok {
		return us, true
	}
	t, err := time.Parse(time.RFC3339Nano, string(s))
	if err != nil {
		return 0, false
	}
	return t.UTC().UnixMicro(), true
}

// rfc3339Micros is time.Parse's own fast path for RFC 3339 (package
// time's parseRFC3339), check for check, returning µs since the epoch
// instead of building a time.Time (and, for an offset, a zone): a
// timestamp column is parsed once per value, and time.Parse was a tenth
// of the time of a JSON body. Where it reports false, time.Parse falls
// back to its general parser, and so does parseTimestamp.
func rfc3339Micros[T []byte | string](s T) (int64, bool) {
	if len(s) < len("2006-01-02T15:04:05") || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return 0, false
	}
	year, ok1 := decimal(s[0:4], 0, 9999)
	month, ok2 := decimal(s[5:7], 1, 12)
	if !ok1 || !ok2 {
		return 0, false
	}
	day, ok1 := decimal(s[8:10], 1, daysIn(month, year))
	hour, ok2 := decimal(s[11:13], 0, 23)
	minute, ok3 := decimal(s[14:16], 0, 59)
	sec, ok4 := decimal(s[17:19], 0, 59)
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return 0, false
	}
	micro, rest := fraction(s[19:])
	offset, ok := zoneOffset(rest)
	if !ok {
		return 0, false
	}
	secs := daysSinceEpoch(year, month, day)*86400 + int64(hour*3600+minute*60+sec-offset)
	return secs*1_000_000 + int64(micro), true
}

// decimal parses s, all digits, as a number in [lo, hi].
func decimal[T []byte | string](s T, lo, hi int) (int, bool) {
	x := 0
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return 0, false
		}
		x = x*10 + int(s[i]-'0')
	}
	return x, lo <= x && x <= hi
}

// fraction parses an optional fraction of a second at the start of s
// (a '.' and at least one digit), and returns it in µs, truncated, and
// what follows it.
func fraction[T []byte | string](s T) (micro int, rest T) {
	if len(s) < 2 || s[0] != '.' || !isDigit(s[1]) {
		return 0, s
	}
	n := 1
	for ; n < len(s) && isDigit(s[n]); n++ {
		if n <= 6 {
			micro = micro*10 + int(s[n]-'0')
		}
	}
	for k := n; k <= 6; k++ { // fewer than 6 digits: scale up
		micro *= 10
	}
	return micro, s[n:]
}

// zoneOffset parses "Z" or "±hh:mm" (hh ≤ 23, mm ≤ 59), the whole of
// s, into seconds east of UTC.
func zoneOffset[T []byte | string](s T) (int, bool) {
	if len(s) == 1 && s[0] == 'Z' {
		return 0, true
	}
	if len(s) != len("-07:00") || (s[0] != '+' && s[0] != '-') || s[3] != ':' {
		return 0, false
	}
	hh, ok1 := decimal(s[1:3], 0, 23)
	mm, ok2 := decimal(s[4:6], 0, 59)
	if !ok1 || !ok2 {
		return 0, false
	}
	if s[0] == '-' {
		return -(hh*60 + mm) * 60, true
	}
	return (hh*60 + mm) * 60, true
}

// daysIn returns the number of days in month of year (proleptic
// Gregorian).
func daysIn(month, year int) int {
	if month == 2 {
		if year%4 == 0 && (year%100 != 0 || year%400 == 0) {
			return 29
		}
		return 28
	}
	return 30 + (month+month/8)%2 // 31 in Jan, Mar, May, Jul, Aug, Oct, Dec
}

// daysSinceEpoch returns the days from 1970-01-01 to the date (proleptic
// Gregorian, year 0..9999): Howard Hinnant's days_from_civil.
func daysSinceEpoch(year, month, day int) int64 {
	if month <= 2 {
		year-- // a year from March: the leap day is its last
	}
	era := year / 400 // year ≥ -1: floor division needs no care but at -1
	if year < 0 {
		era = -1
	}
	yearOfEra := year - era*400
	dayOfYear := (153*((month+9)%12)+2)/5 + day - 1
	dayOfEra := yearOfEra*365 + yearOfEra/4 - yearOfEra/100 + dayOfYear
	return int64(era*146097 + dayOfEra - 719468)
}
