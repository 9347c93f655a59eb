package httpsrc

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// parseTimestampBefore is parseTimestamp as it was before its fast path:
// the reference the fast path must agree with, value for value.
func parseTimestampBefore(s string) (int64, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[7] != '-' {
		return 0, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, false
	}
	return t.UTC().UnixMicro(), true
}

// checkTimestamp checks parseTimestamp, of s and of its bytes, against
// the reference.
func checkTimestamp(t tb, s string) {
	t.Helper()
	want, wantOK := parseTimestampBefore(s)
	got, gotOK := parseTimestamp(s)
	gotBytes, gotBytesOK := parseTimestamp([]byte(s))
	if got != want || gotOK != wantOK || gotBytes != want || gotBytesOK != wantOK {
		t.Fatalf("%q: %d, %v (bytes: %d, %v); time.Parse gives %d, %v", s, got, gotOK, gotBytes, gotBytesOK, want, wantOK)
	}
}

func TestParseTimestampMatchesTimeParse(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		checkTimestamp(t, drawTimestamp(t))
	})
}

func TestParseTimestampEdges(t *testing.T) {
	for _, s := range []string{
		"0000-01-01T00:00:00Z", "0000-02-29T00:00:00Z", "0000-03-01T00:00:00Z", "9999-12-31T23:59:59.999999999Z",
		"1969-12-31T23:59:59.9999999Z", "1970-01-01T00:00:00Z", "1900-02-29T00:00:00Z", "2000-02-29T00:00:00Z",
		"2024-02-30T00:00:00Z", "2024-04-31T00:00:00Z", "2024-01-02T24:00:00Z", "2024-01-02T23:60:00Z",
		"2024-01-02T23:59:60Z", "2024-01-02T03:04:05+23:59", "2024-01-02T03:04:05-24:00", "2024-01-02T03:04:05+01:60",
		"2024-01-02T03:04:05.Z", "2024-01-02T03:04:05,5Z", "2024-01-02t03:04:05Z", "2024-01-02T03:04:05z",
		"2024-01-02T3:04:05Z", "2024-01-02T03:04:05+0100", "2024-01-02T03:04:05.123456789123Z", "0001-01-01T00:00:00-23:59",
	} {
		checkTimestamp(t, s)
	}
}

// Every month and day, in and out of range, of years leap and not.
func TestParseTimestampCalendar(t *testing.T) {
	for _, year := range []int{0, 1, 4, 100, 400, 1600, 1900, 1969, 1970, 2000, 2023, 2024, 2100, 9999} {
		for month := range 14 {
			for day := range 33 {
				checkTimestamp(t, fmt.Sprintf("%04d-%02d-%02dT12:34:56.789Z", year, month, day))
			}
		}
	}
}

// drawTimestamp draws RFC 3339-ish text: every part in and out of range,
// optional fractions of any length, zones valid and not, the odd byte
// replaced.
func drawTimestamp(t *rapid.T) string {
	two := func(name string, hi int) string { return fmt.Sprintf("%02d", rapid.IntRange(0, hi).Draw(t, name)) }
	year := rapid.SampledFrom([]int{0, 1, 1600, 1900, 1969, 1970, 2000, 2024, 2100, 9999}).Draw(t, "year")
	if rapid.Bool().Draw(t, "any year") {
		year = rapid.IntRange(0, 9999).Draw(t, "year")
	}
	month, day := two("month", 13), two("day", 32)
	if rapid.Bool().Draw(t, "month end") { // where the calendar has its edges
		month = rapid.SampledFrom([]string{"00", "01", "02", "04", "12", "13"}).Draw(t, "month")
		day = rapid.SampledFrom([]string{"00", "01", "28", "29", "30", "31", "32"}).Draw(t, "day")
	}
	s := fmt.Sprintf("%04d-%s-%sT%s:%s:%s", year, month, day, two("hour", 24), two("minute", 60), two("second", 61))
	if rapid.Bool().Draw(t, "fraction") {
		s += "." + rapid.StringMatching(`[0-9]{0,12}`).Draw(t, "digits")
	}
	switch rapid.IntRange(0, 3).Draw(t, "zone") {
	case 0:
		s += "Z"
	case 1, 2:
		s += rapid.SampledFrom([]string{"+", "-"}).Draw(t, "sign") + two("zh", 25) + ":" + two("zm", 60)
	default:
		s += rapid.SampledFrom([]string{"", "z", "+0100", "+01", "Z ", "+01:00:00", "UTC"}).Draw(t, "odd zone")
	}
	if b := []byte(s); rapid.IntRange(0, 3).Draw(t, "mutate") == 0 {
		b[rapid.IntRange(0, len(b)-1).Draw(t, "at")] = rapid.SampledFrom([]byte("0159:-+.TtZ ,x")).Draw(t, "byte")
		s = string(b)
	}
	return s
}
