package httpsrc

import (
	"reflect"
	"strings"
	"testing"
)

func TestCSVInfersPerColumn(t *testing.T) {
	body := strings.Join([]string{
		"id,price,ok,at,name,mixed,empty,nan,hex,bigmix,spaced,stamp_text",
		"1,2,true,2024-01-02T03:04:05Z,x,1,,NaN,0x1p-2,9007199254740993,1,2024-01-02T03:04:05Z",
		"-2,2.5,FALSE,2024-01-02T05:04:05.5+02:00,,true,,1.5,1,0.5, 2,x",
		",1e3,,,\"a, \"\"quoted\"\"\nvalue\",2.5,,Inf,2,,3,",
	}, "\n") + "\n"
	d := mustDecode(t, CSV, body, DefaultLimits())
	want := []string{"id:int64", "price:float64", "ok:bool", "at:timestamp[us, tz=UTC]", "name:utf8", "mixed:utf8",
		"empty:utf8", "nan:utf8", "hex:utf8", "bigmix:utf8", "spaced:utf8", "stamp_text:utf8"}
	if got := fieldTypes(d.Schema); !reflect.DeepEqual(got, want) {
		t.Fatalf("schema %v; want %v (header order)", got, want)
	}
	for name, want := range map[string][]any{
		"id":     {int64(1), int64(-2), nil},
		"price":  {2.0, 2.5, 1000.0},
		"ok":     {true, false, nil},
		"at":     {ts("2024-01-02T03:04:05Z"), ts("2024-01-02T03:04:05.5Z"), nil},
		"name":   {"x", nil, "a, \"quoted\"\nvalue"},
		"mixed":  {"1", "true", "2.5"},
		"empty":  {nil, nil, nil},
		"nan":    {"NaN", "1.5", "Inf"},
		"hex":    {"0x1p-2", "1", "2"},
		"bigmix": {"9007199254740993", "0.5", nil}, // no integer is rounded to a float
		"spaced": {"1", " 2", "3"},                 // cells are not trimmed
	} {
		if got := values(t, d, name); !reflect.DeepEqual(got, want) {
			t.Errorf("column %q: %q; want %q", name, got, want)
		}
	}
}

func TestCSVBoolSpellings(t *testing.T) {
	d := mustDecode(t, CSV, "b,c\ntrue,yes\nTRUE,no\nTrue,1\nfalse,0\nFALSE,t\nFalse,f\n", DefaultLimits())
	if got, want := fieldTypes(d.Schema), []string{"b:bool", "c:utf8"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("schema %v; want %v", got, want)
	}
	if got, want := values(t, d, "b"), []any{true, true, true, false, false, false}; !reflect.DeepEqual(got, want) {
		t.Errorf("b: %v; want %v", got, want)
	}
	mustDecode(t, CSV, "b\ntRUE\n", DefaultLimits()) // utf8, not an error
}

func TestCSVLayout(t *testing.T) {
	// A BOM, CRLF, a blank line, no final line break, a quoted line break.
	body := "\xEF\xBB\xBFa,b\r\n1,\"x\r\ny\"\r\n\r\n2,z"
	d := mustDecode(t, CSV, body, DefaultLimits())
	if got, want := fieldTypes(d.Schema), []string{"a:int64", "b:utf8"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("schema %v; want %v", got, want)
	}
	if got, want := values(t, d, "b"), []any{"x\ny", "z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("b: %q; want %q", got, want)
	}
}

func TestCSVBatches(t *testing.T) {
	lim := DefaultLimits()
	lim.BatchRows = 2
	d := mustDecode(t, CSV, "a,b\n1,\n,x\n3,\n,y\n5,\n", lim)
	if len(d.Batches) != 3 || d.Rows != 5 {
		t.Fatalf("%d batches, %d rows; want 3, 5", len(d.Batches), d.Rows)
	}
	if got, want := values(t, d, "a"), []any{int64(1), nil, int64(3), nil, int64(5)}; !reflect.DeepEqual(got, want) {
		t.Errorf("a: %v; want %v", got, want)
	}
	if got, want := values(t, d, "b"), []any{nil, "x", nil, "y", nil}; !reflect.DeepEqual(got, want) {
		t.Errorf("b: %v; want %v", got, want)
	}
}

func TestCSVInputErrors(t *testing.T) {
	lim := DefaultLimits()
	lim.LineBytes, lim.Fields, lim.Rows = 20, 3, 3
	for _, tc := range []struct {
		name, body   string
		line         int
		column, says string
	}{
		{"empty body", "", 0, "", "no rows"},
		{"header only", "a,b\n", 0, "", "no rows"},
		{"duplicate header", "a,b,a\n1,2,3\n", 1, "a", "header columns 1 and 3 have the same name"},
		{"empty header name", "a,,b\n1,2,3\n", 1, "", "header column 2: a field name is empty"},
		{"header too wide", "a,b,c,d\n", 1, "", "the header has 4 columns; at most 3"},
		{"header not UTF-8", "a,\xff\n", 1, "", "is not valid UTF-8"},
		{"ragged short", "a,b\n1,2\n3\n", 3, "", "1 fields where the header has 2"},
		{"ragged long", "a,b\n1,2\n\n3,4,5\n", 4, "", "3 fields where the header has 2"},
		{"bare quote", "a,b\n1,x\"y\n", 2, "", "bare \" in non-quoted-field (byte 4 of the line)"},
		{"unterminated quote", "a,b\n1,\"x\n", 2, "", "extraneous or missing \" in quoted-field"},
		{"long line", "a,b\n1,2\n" + strings.Repeat("x", 21) + ",1\n", 3, "", "line 3 is longer than 20 bytes"},
		{"long multi-line record", "a,b\n1,\"" + strings.Repeat("x", 10) + "\n" + strings.Repeat("y", 10) + "\"\n", 2, "", "the record is longer than 20 bytes"},
		{"cell not UTF-8", "a,b\n1,2\n3,\"\xfe\"\n", 3, "b", `"\xfe" is not valid UTF-8`},
		{"too many rows", "a\n1\n2\n3\n4\n", 5, "", "more than 3 rows in the body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(t, CSV, tc.body, lim)
			wantInputError(t, err, tc.line, tc.column, tc.says)
		})
	}
}

func TestCSVMaxLineLengthIsExact(t *testing.T) {
	lim := DefaultLimits()
	lim.LineBytes = 5
	for _, brk := range []string{"\n", "\r\n"} {
		mustDecode(t, CSV, "abcde"+brk+"12345"+brk+"1234", lim)
	}
	_, err := decode(t, CSV, "abcde\n123456\n", lim)
	wantInputError(t, err, 2, "", "line 2 is longer than 5 bytes")
	_, err = decode(t, CSV, "abcde\n12345\r\r\n", lim)
	wantInputError(t, err, 2, "", "line 2 is longer than 5 bytes")
}

// A number spelled with a leading zero keeps its column text: "02134"
// is a zip code, and parsing it would drop the zero.
func TestCSVLeadingZeroStaysText(t *testing.T) {
	d := mustDecode(t, CSV, "zip,n,f\n02134,0,0.5\n10001,-0,-01.5\n", DefaultLimits())
	if got, want := fieldTypes(d.Schema), []string{"zip:utf8", "n:int64", "f:utf8"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("schema %v; want %v", got, want)
	}
	if got := values(t, d, "zip"); !reflect.DeepEqual(got, []any{"02134", "10001"}) {
		t.Fatalf("zip %v", got)
	}
}
