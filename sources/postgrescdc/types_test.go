package postgrescdc

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// decodeOne turns one text value of a column of type typOID into Arrow
// and returns it as a Go value (nil for NULL).
func decodeOne(t *testing.T, typOID uint32, text []byte) (any, error) {
	t.Helper()
	k := kindOf(typOID)
	b := array.NewBuilder(memory.DefaultAllocator, k.arrowType())
	defer b.Release()
	if err := appendText(b, k, text); err != nil {
		return nil, err
	}
	a := b.NewArray()
	defer a.Release()
	if a.IsNull(0) {
		return nil, nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(0), nil
	case *array.Int16:
		return a.Value(0), nil
	case *array.Int32:
		return a.Value(0), nil
	case *array.Int64:
		return a.Value(0), nil
	case *array.Float32:
		return a.Value(0), nil
	case *array.Float64:
		return a.Value(0), nil
	case *array.Binary:
		return string(a.Value(0)), nil
	case *array.String:
		return a.Value(0), nil
	case *array.Date32:
		return int64(a.Value(0)), nil
	case *array.Timestamp:
		return int64(a.Value(0)), nil
	}
	t.Fatalf("array %T", a)
	return nil, nil
}

func micros(y int, m time.Month, d, h, mi, s, us int, zone int) int64 {
	return time.Date(y, m, d, h, mi, s, us*1000, time.FixedZone("", zone)).UnixMicro()
}

func days(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// Postgres text forms (as the session settings print them) and the
// Arrow values they become; Go's time package is the oracle for dates
// (its year 0 is 1 BC, as Postgres's proleptic calendar has it).
func TestAppendText(t *testing.T) {
	for _, c := range []struct {
		typ  uint32
		text string
		want any
	}{
		{oidBool, "t", true},
		{oidBool, "f", false},
		{oidInt2, "-32768", int16(-32768)},
		{oidInt4, "2147483647", int32(math.MaxInt32)},
		{oidInt8, "-9223372036854775808", int64(math.MinInt64)},
		{oidFloat4, "1.5", float32(1.5)},
		{oidFloat4, "-Infinity", float32(math.Inf(-1))},
		{oidFloat8, "1e+300", 1e300},
		{oidFloat8, "0.1", 0.1},
		{oidBytea, `\x00ff10`, "\x00\xff\x10"},
		{oidBytea, `\x`, ""},
		{25, "tab\there ü", "tab\there ü"},
		{1700, "12345678901234567890.123456789", "12345678901234567890.123456789"},
		{3802, `{"a": [1, null]}`, `{"a": [1, null]}`},
		{2950, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{oidDate, "2024-02-29", days(2024, 2, 29)},
		{oidDate, "1970-01-01", int64(0)},
		{oidDate, "0044-03-15 BC", days(-43, 3, 15)},
		{oidDate, "5874897-12-31", days(5874897, 12, 31)},
		{oidTimestamp, "2024-02-29 23:59:59.123456", micros(2024, 2, 29, 23, 59, 59, 123456, 0)},
		{oidTimestamp, "2020-01-01 00:00:00.5", micros(2020, 1, 1, 0, 0, 0, 500000, 0)},
		{oidTimestamp, "0044-03-15 12:00:00 BC", micros(-43, 3, 15, 12, 0, 0, 0, 0)},
		{oidTimestampTZ, "2024-05-06 07:08:09+00", micros(2024, 5, 6, 7, 8, 9, 0, 0)},
		{oidTimestampTZ, "2024-05-06 07:08:09.25+05:30", micros(2024, 5, 6, 7, 8, 9, 250000, 5*3600+30*60)},
		{oidTimestampTZ, "1900-01-01 00:00:00-00:09:21", micros(1900, 1, 1, 0, 0, 0, 0, -(9*60 + 21))},
		{oidTimestampTZ, "0044-03-15 12:00:00.5+00 BC", micros(-43, 3, 15, 12, 0, 0, 500000, 0)},
	} {
		t.Run(fmt.Sprintf("%d %s", c.typ, c.text), func(t *testing.T) {
			got, err := decodeOne(t, c.typ, []byte(c.text))
			if err != nil || got != c.want {
				t.Fatalf("got %#v, %v; want %#v", got, err, c.want)
			}
		})
	}
	if got, err := decodeOne(t, oidInt4, nil); got != nil || err != nil {
		t.Fatalf("NULL became %v, %v", got, err)
	}
}

func TestAppendTextRefuses(t *testing.T) {
	for _, c := range []struct {
		typ  uint32
		text string
		err  error
	}{
		{oidBool, "true", errBadText},
		{oidInt2, "32768", errBadText},
		{oidInt4, "1.0", errBadText},
		{oidFloat8, "", errBadText},
		{oidBytea, `\x0`, errBadText},
		{oidBytea, `abc`, errBadText},
		{oidDate, "infinity", errNotRepresentable},
		{oidDate, "-infinity", errNotRepresentable},
		{oidTimestampTZ, "infinity", errNotRepresentable},
		{oidTimestamp, "294276-12-31 23:59:59.999999", errNotRepresentable},
		{oidDate, "2024-13-01", errBadDateTime},
		{oidDate, "24-01-01", errBadDateTime},
		{oidDate, "2024-01-01 AD", errBadDateTime},
		{oidTimestamp, "2024-01-01", errBadDateTime},
		{oidTimestamp, "2024-01-01 10:00:00.1234567", errBadDateTime},
		{oidTimestampTZ, "2024-01-01 10:00:00", errBadDateTime},
	} {
		t.Run(fmt.Sprintf("%d %s", c.typ, c.text), func(t *testing.T) {
			got, err := decodeOne(t, c.typ, []byte(c.text))
			if !errors.Is(err, c.err) {
				t.Fatalf("got %#v, %v; want %v", got, err, c.err)
			}
		})
	}
	if _, err := decodeOne(t, 25, []byte{0xff, 0xfe}); err == nil {
		t.Fatal("text that is not UTF-8 was taken")
	}
}

// Any date Postgres prints, AD or BC, is the day Go's calendar says.
func TestParseDateMatchesGo(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		y := rapid.IntRange(-4712, 200000).Draw(t, "year") // astronomical
		m := time.Month(rapid.IntRange(1, 12).Draw(t, "month"))
		d := rapid.IntRange(1, time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()).Draw(t, "day")
		text := fmt.Sprintf("%04d-%02d-%02d", y, m, d)
		if y < 1 {
			text = fmt.Sprintf("%04d-%02d-%02d BC", 1-y, m, d)
		}
		got, err := parseDate([]byte(text))
		if want := days(y, m, d); err != nil || int64(got) != want {
			t.Fatalf("%s: %d, %v; want %d", text, got, err, want)
		}
	})
}

// Rows become one batch of the shape's schema, with their CDC rows; a
// value that does not decode names the table and column.
func TestBuildBatch(t *testing.T) {
	name := tableName{"public", "t"}
	sh, err := newShape(name, []column{{"id", oidInt4}, {"at", oidTimestampTZ}, {"v", 25}}, []string{"id"})
	if err != nil {
		t.Fatal(err)
	}
	rows := []row{
		{cdc: segment.CDCRow{Kind: segment.Insert, Identity: []byte("a"), Order: 5}, values: [][]byte{[]byte("1"), []byte("2024-01-01 00:00:00+00"), nil}},
		{cdc: segment.CDCRow{Kind: segment.Delete, Identity: []byte("b"), Order: 6}, values: [][]byte{[]byte("2"), nil, nil}},
	}
	b, cdc, err := buildBatch(memory.DefaultAllocator, name, sh, rows)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if b.NumRows() != 2 || len(cdc) != 2 || cdc[1].Kind != segment.Delete || !b.Schema().Equal(sh.schema) {
		t.Fatalf("batch of %d rows, %d CDC rows %v, schema %v", b.NumRows(), len(cdc), cdc, b.Schema())
	}
	if ts := b.Column(1).(*array.Timestamp); ts.IsNull(0) || ts.Value(0) != arrow.Timestamp(micros(2024, 1, 1, 0, 0, 0, 0, 0)) || !ts.IsNull(1) {
		t.Fatalf("timestamps %v", ts)
	}
	rows[0].values[1] = []byte("infinity")
	_, _, err = buildBatch(memory.DefaultAllocator, name, sh, rows)
	if !errors.Is(err, ErrStream) || !strings.Contains(err.Error(), `public.t column "at"`) {
		t.Fatalf("error %v; want ErrStream naming the column", err)
	}
}
