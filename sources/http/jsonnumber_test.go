package httpsrc

import (
	"math"
	"math/big"
	"strconv"
	"testing"

	"pgregory.net/rapid"
)

// parseInt and parseFloat give what strconv gives for every JSON
// number, bit for bit (-0 included), and refuse what it refuses.
func TestParseNumbersMatchStrconv(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		checkNumber(t, drawNumber(t))
	})
}

func TestParseNumbersEdges(t *testing.T) {
	for _, s := range []string{
		"0", "-0", "-0.0", "0.0", "999999999999999999", "-999999999999999999", "9223372036854775807",
		"-9223372036854775808", "9223372036854775808", "-9223372036854775809", "123456789012345.6",
		"1234567890123456.7", "0.000000000000001", "0.1", "0.3", "9007199254740993.0", "1e400", "-1e400", "1e-400",
		"999999999999999.9", "99999999999999.99",
	} {
		checkNumber(t, s)
	}
}

// checkNumber checks the parse of s, a JSON number, against strconv.
func checkNumber(t tb, s string) {
	t.Helper()
	var sc lineScanner
	if end, ok := sc.value([]byte(s), 0, 1); !ok || end != len(s) {
		t.Fatalf("%q: not a JSON number", s)
	}
	if sc.flags&valFloat == 0 {
		got, ok := parseInt([]byte(s))
		want, err := strconv.ParseInt(s, 10, 64)
		if ok != (err == nil) || got != want && ok {
			t.Fatalf("%q: parseInt %d, %v; strconv %d, %v", s, got, ok, want, err)
		}
		return
	}
	got, ok := parseFloat([]byte(s))
	want, err := strconv.ParseFloat(s, 64)
	if ok != (err == nil) || ok && math.Float64bits(got) != math.Float64bits(want) {
		t.Fatalf("%q: parseFloat %v, %v; strconv %v, %v", s, got, ok, want, err)
	}
}

// drawNumber draws a JSON number: integer part, fraction and exponent
// each of any length, up to past what an int64 or a float64 holds; one
// time in four, an integer at the edge of int64 or of 18 digits, or a
// decimal of 14 to 18 digits, at the edge of the exact fast path.
func drawNumber(t *rapid.T) string {
	switch rapid.IntRange(0, 7).Draw(t, "number kind") {
	case 0:
		edge := rapid.SampledFrom([]string{"9223372036854775807", "-9223372036854775808", "999999999999999999", "-999999999999999999"}).Draw(t, "edge")
		v, _ := new(big.Int).SetString(edge, 10)
		return v.Add(v, big.NewInt(rapid.Int64Range(-3, 3).Draw(t, "off"))).String()
	case 1:
		n := rapid.IntRange(13, 17).Draw(t, "digit count")
		digits := rapid.StringOfN(rapid.RuneFrom([]rune("123456789")), 1, 1, -1).Draw(t, "lead") +
			rapid.StringOfN(rapid.RuneFrom([]rune("0123456789")), n, n, -1).Draw(t, "digits")
		point := rapid.IntRange(1, len(digits)-1).Draw(t, "point")
		return rapid.SampledFrom([]string{"", "-"}).Draw(t, "sign") + digits[:point] + "." + digits[point:]
	}
	s := rapid.SampledFrom([]string{"", "-"}).Draw(t, "sign")
	s += rapid.StringMatching(`0|[1-9][0-9]{0,19}`).Draw(t, "int")
	if rapid.Bool().Draw(t, "has fraction") {
		s += "." + rapid.StringMatching(`[0-9]{1,18}`).Draw(t, "fraction")
	}
	if rapid.IntRange(0, 3).Draw(t, "has exponent") == 0 {
		s += rapid.StringMatching(`[eE][+-]?[0-9]{1,3}`).Draw(t, "exponent")
	}
	return s
}
