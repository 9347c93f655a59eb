package httpsrc

import (
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

func TestJSONInfersEveryType(t *testing.T) {
	d := mustDecode(t, JSONLines, strings.Join([]string{
		`{"i": 1, "f": 1.5, "b": true, "s": "x", "t": "2024-01-02T03:04:05Z", "o": {"k": [1, 2]}, "a": [1, {"z": null}], "n": null}`,
		`{"i": -9223372036854775808, "f": -2e3, "b": false, "s": "", "t": "2024-01-02T05:04:05.123456789+02:00", "o": {}, "a": [], "n": null}`,
		`{}`,
	}, "\n"), DefaultLimits())
	want := []string{"a:utf8", "b:bool", "f:float64", "i:int64", "n:utf8", "o:utf8", "s:utf8", "t:timestamp[us, tz=UTC]"}
	if got := fieldTypes(d.Schema); !reflect.DeepEqual(got, want) {
		t.Fatalf("schema %v; want %v", got, want)
	}
	for _, f := range d.Schema.Fields() {
		if !f.Nullable {
			t.Errorf("field %q is not nullable", f.Name)
		}
	}
	for name, want := range map[string][]any{
		"i": {int64(1), int64(math.MinInt64), nil},
		"f": {1.5, -2000.0, nil},
		"b": {true, false, nil},
		"s": {"x", "", nil},
		// Converted to UTC; nanoseconds truncated to µs.
		"t": {ts("2024-01-02T03:04:05Z"), ts("2024-01-02T03:04:05.123456Z"), nil},
		// Compact JSON text: whitespace dropped, key order kept.
		"o": {`{"k":[1,2]}`, `{}`, nil},
		"a": {`[1,{"z":null}]`, `[]`, nil},
		"n": {nil, nil, nil},
	} {
		if got := values(t, d, name); !reflect.DeepEqual(got, want) {
			t.Errorf("field %q: %v; want %v", name, got, want)
		}
	}
	if d.Rows != 3 {
		t.Errorf("Rows %d; want 3", d.Rows)
	}
}

func TestJSONWidensIntsToFloats(t *testing.T) {
	d := mustDecode(t, JSONLines, `{"v": 1}
{"v": 9007199254740992}
{"v": 2.5}
{"v": -9007199254740992}
{"v": 1e2}
{"v": 3}
`, DefaultLimits())
	want := []any{1.0, 9007199254740992.0, 2.5, -9007199254740992.0, 100.0, 3.0}
	if got := values(t, d, "v"); !reflect.DeepEqual(got, want) {
		t.Errorf("v: %v; want %v", got, want)
	}
}

func TestJSONNumbers(t *testing.T) {
	d := mustDecode(t, JSONLines, `{"neg0": -0, "exp": 1E3, "max": 9223372036854775807}`, DefaultLimits())
	for name, want := range map[string]any{
		"neg0": int64(0),
		"exp":  1000.0,
		"max":  int64(math.MaxInt64),
	} {
		if got := values(t, d, name); !reflect.DeepEqual(got, []any{want}) {
			t.Errorf("%s: %v; want %v", name, got, want)
		}
	}
}

// An integer past int64 is refused, not rounded into a float64.
func TestJSONIntegerPastInt64(t *testing.T) {
	_, err := Decode(JSONLines, strings.NewReader(`{"id": 1}`+"\n"+`{"id": 18446744073709551615}`), DefaultLimits(), memory.NewGoAllocator())
	var in *InputError
	if !errors.As(err, &in) || in.Line != 2 || in.Column != "id" || !strings.Contains(in.Reason, "64 bits") {
		t.Fatalf("err %v; want line 2, field id, 64 bits", err)
	}
}

func TestJSONTimestampDetection(t *testing.T) {
	d := mustDecode(t, JSONLines, `{"t": "2024-01-02T03:04:05Z", "u": "2024-01-02T03:04:05Z", "v": "1999-12-31T23:59:59.999999-01:00"}
{"t": null, "u": "2024-01-02 03:04:05Z"}
{"t": "1969-12-31T23:59:59.9999999Z", "u": "2024-01-02T03:04:05Z"}
`, DefaultLimits())
	want := []string{"t:timestamp[us, tz=UTC]", "u:utf8", "v:timestamp[us, tz=UTC]"}
	if got := fieldTypes(d.Schema); !reflect.DeepEqual(got, want) {
		t.Fatalf("schema %v; want %v", got, want)
	}
	// Before the epoch, sub-µs digits are truncated toward the past.
	if got, want := values(t, d, "t"), []any{ts("2024-01-02T03:04:05Z"), nil, ts("1969-12-31T23:59:59.999999Z")}; !reflect.DeepEqual(got, want) {
		t.Errorf("t: %v; want %v", got, want)
	}
	if got, want := values(t, d, "v"), []any{ts("2000-01-01T00:59:59.999999Z"), nil, nil}; !reflect.DeepEqual(got, want) {
		t.Errorf("v: %v; want %v", got, want)
	}
	// One non-timestamp string makes the field text, its values as sent.
	if got, want := values(t, d, "u"), []any{"2024-01-02T03:04:05Z", "2024-01-02 03:04:05Z", "2024-01-02T03:04:05Z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("u: %v; want %v", got, want)
	}
}

func TestJSONStrings(t *testing.T) {
	d := mustDecode(t, JSONLines, `{"s": "a\"b\\c\u00e9\ud83d\ude00\n"}
{"s": "plain é"}
`, DefaultLimits())
	if got, want := values(t, d, "s"), []any{"a\"b\\cé😀\n", "plain é"}; !reflect.DeepEqual(got, want) {
		t.Errorf("s: %q; want %q", got, want)
	}
}

func TestJSONObjectsAndArraysShareAField(t *testing.T) {
	d := mustDecode(t, JSONLines, "{\"x\": {\"a\": 1}}\n{\"x\": [1]}\n", DefaultLimits())
	if got, want := values(t, d, "x"), []any{`{"a":1}`, `[1]`}; !reflect.DeepEqual(got, want) {
		t.Errorf("x: %v; want %v", got, want)
	}
}

func TestJSONFieldsSortedAndKeyOrderFree(t *testing.T) {
	a := mustDecode(t, JSONLines, `{"zeta": 1, "Alpha": "x", "beta": true, "_u": 1.5, "é": null}`, DefaultLimits())
	b := mustDecode(t, JSONLines, `{"é": null, "beta": false, "_u": 2.5}
{"Alpha": "y", "zeta": 7}`, DefaultLimits())
	want := []string{"Alpha:utf8", "_u:float64", "beta:bool", "zeta:int64", "é:utf8"} // byte order
	if got := fieldTypes(a.Schema); !reflect.DeepEqual(got, want) {
		t.Errorf("schema %v; want %v", got, want)
	}
	if fa, fb := segment.FingerprintOf(a.Schema), segment.FingerprintOf(b.Schema); fa != fb {
		t.Errorf("fingerprints %016x and %016x differ for one set of fields", uint64(fa), uint64(fb))
	}
}

func TestJSONLinesLayout(t *testing.T) {
	// CRLF, blank and space-only lines, a BOM, no final line break.
	body := "\xEF\xBB\xBF{\"a\": 1}\r\n\r\n   \t\n  {\"a\": 2}  \n{\"a\": 3}"
	d := mustDecode(t, JSONLines, body, DefaultLimits())
	if got, want := values(t, d, "a"), []any{int64(1), int64(2), int64(3)}; !reflect.DeepEqual(got, want) {
		t.Errorf("a: %v; want %v", got, want)
	}
}

func TestJSONSparseFieldsAcrossBatches(t *testing.T) {
	var lines []string
	var wantA, wantB []any
	for i := range 10 {
		switch {
		case i%3 == 0:
			lines = append(lines, `{"a": `+strconv.Itoa(i)+`}`)
			wantA, wantB = append(wantA, int64(i)), append(wantB, nil)
		case i%3 == 1:
			lines = append(lines, `{"b": "`+strconv.Itoa(i)+`"}`)
			wantA, wantB = append(wantA, nil), append(wantB, strconv.Itoa(i))
		default:
			lines = append(lines, `{}`)
			wantA, wantB = append(wantA, nil), append(wantB, nil)
		}
	}
	lim := DefaultLimits()
	lim.BatchRows = 3
	d := mustDecode(t, JSONLines, strings.Join(lines, "\n"), lim)
	var sizes []int64
	for _, b := range d.Batches {
		sizes = append(sizes, b.NumRows())
	}
	if !reflect.DeepEqual(sizes, []int64{3, 3, 3, 1}) {
		t.Errorf("batch sizes %v; want [3 3 3 1]", sizes)
	}
	if got := values(t, d, "a"); !reflect.DeepEqual(got, wantA) {
		t.Errorf("a: %v; want %v", got, wantA)
	}
	if got := values(t, d, "b"); !reflect.DeepEqual(got, wantB) {
		t.Errorf("b: %v; want %v", got, wantB)
	}
}

func TestJSONErrorText(t *testing.T) {
	body := strings.Repeat("{\"price\": 1.5}\n", 6) + `{"price": "1.5"}`
	_, err := decode(t, JSONLines, body, DefaultLimits())
	if got, want := err.Error(), `line 7, field "price": a string where earlier lines had numbers`; got != want {
		t.Errorf("error %q; want %q", got, want)
	}
}

func TestJSONInputErrors(t *testing.T) {
	lim := DefaultLimits()
	lim.LineBytes, lim.Fields, lim.Rows = 40, 3, 4
	for _, tc := range []struct {
		name, body   string
		line         int
		column, says string
	}{
		{"array", "{}\n[1, 2]", 2, "", "an array, not a JSON object"},
		{"number", "5", 1, "", "a number, not a JSON object"},
		{"string", `"x"`, 1, "", "a string, not a JSON object"},
		{"null", "null", 1, "", "null, not a JSON object"},
		{"boolean", "true", 1, "", "a boolean, not a JSON object"},
		{"invalid", `{"a": }`, 1, "", "invalid JSON: invalid character '}' looking for beginning of value"},
		{"bad key", `{a: 1}`, 1, "", "invalid JSON"},
		{"unterminated", `{"a": 1`, 1, "", "the line ends inside the object"},
		{"unterminated string", `{"a": "x`, 1, "", "invalid JSON"},
		{"trailing comma", `{"a": 1,}`, 1, "", "invalid JSON"},
		{"trailing text", "{}\n\n{\"a\": 1} x", 3, "", "text after the object"},
		{"two objects", `{"a": 1}{"b": 2}`, 1, "", "an object after the object"},
		{"trailing number", `{"a": 1} 2`, 1, "", "a number after the object"},
		{"duplicate key", "{\"a\": 1}\n{\"b\": 1, \"a\": 2, \"b\": null}", 2, "b", "the field appears twice in the object"},
		{"long line", "{}\n{\"a\": \"" + strings.Repeat("x", 40) + "\"}", 2, "", "line 2 is longer than 40 bytes"},
		{"long line without break", strings.Repeat(" ", 100), 1, "", "line 1 is longer than 40 bytes"},
		{"empty body", "", 0, "", "no rows"},
		{"blank body", "\n \r\n\t\n", 0, "", "no rows"},
		{"only empty objects", "{}\n\n{ }", 0, "", "no fields: every object is empty"},
		{"empty name", `{"": 1}`, 1, "", "a field name is empty"},
		{"too many fields", "{\"a\": 1, \"b\": 1}\n{\"c\": 1, \"a\": 2, \"d\": 1}", 2, "d", "more than 3 distinct fields in the body"},
		{"too many rows", "{}\n{}\n\n{}\n{}\n{}", 6, "", "more than 4 rows in the body"},
		{"not UTF-8", "{\"a\": \"\xff\"}", 1, "", "not valid UTF-8"},
		{"string after numbers", "{\"p\": 1}\n{\"p\": null}\n{\"p\": \"1\"}", 3, "p", "a string where earlier lines had numbers"},
		{"number after strings", "{\"p\": \"x\"}\n{\"p\": 2}", 2, "p", "a number where earlier lines had strings"},
		{"bool after numbers", "{\"p\": 1}\n{\"p\": true}", 2, "p", "a boolean where earlier lines had numbers"},
		{"number after bools", "{\"p\": false}\n{\"p\": 0}", 2, "p", "a number where earlier lines had booleans"},
		{"object after strings", "{\"p\": \"{}\"}\n{\"p\": {}}", 2, "p", "an object or array where earlier lines had strings"},
		{"string after arrays", "{\"p\": []}\n{\"p\": \"[]\"}", 2, "p", "a string where earlier lines had objects or arrays"},
		{"timestamp after numbers", "{\"p\": 1}\n{\"p\": \"2024-01-02T03:04:05Z\"}", 2, "p", "a string where earlier lines had numbers"},
		{"float out of range", "{\"p\": 1}\n{\"p\": 1e400}", 2, "p", "number 1e400 is out of the range of a float64"},
		{"inexact int, float later", "{\"p\": 9007199254740993}\n{\"p\": 1}\n{\"p\": 0.5}", 1, "p",
			"integer 9007199254740993 has no exact float64; the field is float64 because line 3 has 0.5"},
		{"inexact int, float earlier", "{\"p\": 0.5}\n{\"p\": -9007199254740993}", 2, "p",
			"integer -9007199254740993 has no exact float64; the field is float64 because line 1 has 0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decode(t, JSONLines, tc.body, lim)
			wantInputError(t, err, tc.line, tc.column, tc.says)
		})
	}
}

func TestJSONFieldNameLength(t *testing.T) {
	ok := strings.Repeat("n", nameBytesMax)
	d := mustDecode(t, JSONLines, `{"`+ok+`": 1}`, DefaultLimits())
	if d.Schema.Field(0).Name != ok {
		t.Errorf("name %q", d.Schema.Field(0).Name)
	}
	_, err := decode(t, JSONLines, "{}\n{\""+ok+"x\": 1}", DefaultLimits())
	wantInputError(t, err, 2, "", "is 257 bytes long; at most 256")
}

func TestJSONMaxLineLengthIsExact(t *testing.T) {
	lim := DefaultLimits()
	line := `{"a": "` + strings.Repeat("x", 10) + `"}` // 19 bytes
	lim.LineBytes = len(line)
	for _, brk := range []string{"\n", "\r\n"} {
		mustDecode(t, JSONLines, line+brk+line+brk+line, lim)
	}
	lim.LineBytes--
	_, err := decode(t, JSONLines, line+"\r\n", lim)
	wantInputError(t, err, 1, "", "line 1 is longer than 18 bytes")
}
