package httpsrc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"pgregory.net/rapid"
)

// A JSON lines body decodes to the values encoding/json reads from it:
// strings as json.Unmarshal unescapes them (or, in a timestamp column,
// their instant), numbers as strconv parses them, objects and arrays as
// json.Compact writes them, whatever the spacing and escapes.
func TestJSONDecodesLikeEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var lines []string
		for range rapid.IntRange(1, 5).Draw(t, "lines") {
			lines = append(lines, drawRow(t))
		}
		body := strings.Join(lines, "\n")
		d, err := Decode(JSONLines, strings.NewReader(body), DefaultLimits(), memory.NewGoAllocator())
		if err != nil {
			if strings.Contains(err.Error(), "no fields") {
				return
			}
			t.Fatalf("%q: %v", body, err)
		}
		defer d.Release()
		for i, f := range d.Schema.Fields() {
			want := referenceColumn(t, lines, f.Name, f.Type)
			if got := columnValues(d, i); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%q: field %q (%v)\ngot  %q\nwant %q", body, f.Name, f.Type, got, want)
			}
		}
	})
}

// rowKinds are the fields a drawn row may have, each with its values.
var rowKinds = []string{"s", "t", "i", "x", "b", "o", "n"}

// drawRow draws a line: an object of some of rowKinds's fields, in any
// order, keys escaped or not, values as the field's kind says.
func drawRow(t *rapid.T) string {
	keys := rapid.SliceOfNDistinct(rapid.SampledFrom(rowKinds), 0, len(rowKinds), func(k string) string { return k }).Draw(t, "keys")
	var members []string
	for _, k := range keys {
		key := `"` + k + `"`
		if rapid.Bool().Draw(t, "escape key") {
			key = fmt.Sprintf(`"\u%04x"`, k[0])
		}
		members = append(members, key+sp(t)+":"+sp(t)+drawKind(t, k))
	}
	row := sp(t) + "{" + sp(t) + strings.Join(members, sp(t)+","+sp(t)) + sp(t) + "}" + sp(t)
	return strings.ReplaceAll(row, "\n", " ") // a line break would end the line: spaces only
}

// drawKind draws a value of field k, or null.
func drawKind(t *rapid.T, k string) string {
	if rapid.IntRange(0, 5).Draw(t, "null") == 0 {
		return "null"
	}
	switch k {
	case "s":
		return drawString(t)
	case "t":
		ts := drawTimestamp(t)
		if rapid.Bool().Draw(t, "escape timestamp") {
			ts = strings.Replace(ts, "T", `\u0054`, 1)
		}
		return strconv.Quote(ts)
	case "i":
		return fmt.Sprint(rapid.Int64().Draw(t, "int"))
	case "x":
		if rapid.Bool().Draw(t, "x int") {
			return fmt.Sprint(rapid.Int64Range(-1<<53, 1<<53).Draw(t, "x int"))
		}
		if rapid.Bool().Draw(t, "x decimal") { // no exponent; an integer below 2^53 if it has no fraction
			return strconv.FormatFloat(rapid.Float64Range(-1e15, 1e15).Draw(t, "x"), 'f', -1, 64)
		}
		return strconv.FormatFloat(rapid.Float64Range(-1e300, 1e300).Draw(t, "x"), 'e', -1, 64)
	case "b":
		return rapid.SampledFrom([]string{"true", "false"}).Draw(t, "bool")
	case "o":
		if rapid.Bool().Draw(t, "object") {
			return drawObject(t, 1)
		}
		return "[" + sp(t) + drawValue(t, 1) + sp(t) + "]"
	}
	return "null"
}

// referenceColumn is field name of every line as encoding/json reads
// it, converted to the column's type.
func referenceColumn(t *rapid.T, lines []string, name string, typ arrow.DataType) []any {
	var out []any
	for _, line := range lines {
		var row map[string]json.RawMessage
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		raw, ok := row[name]
		if !ok || string(raw) == "null" {
			out = append(out, nil)
			continue
		}
		out = append(out, referenceValue(t, raw, typ))
	}
	return out
}

// referenceValue is raw, a non-null JSON value, as a value of typ.
func referenceValue(t *rapid.T, raw []byte, typ arrow.DataType) any {
	switch typ.ID() {
	case arrow.INT64:
		v, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return v
	case arrow.FLOAT64:
		if i, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return math.Float64bits(float64(i)) // an integer, converted: -0 is 0
		}
		v, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return math.Float64bits(v)
	case arrow.BOOL:
		return string(raw) == "true"
	}
	if raw[0] == '{' || raw[0] == '[' {
		var c bytes.Buffer
		if err := json.Compact(&c, raw); err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return c.String()
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	if typ.ID() == arrow.TIMESTAMP {
		us, ok := parseTimestampBefore(s)
		if !ok {
			t.Fatalf("%q in a timestamp column", s)
		}
		return us
	}
	return s
}

// columnValues is column i of every batch: nil for null, else int64,
// float64 bits, bool, string or µs.
func columnValues(d *Decoded, i int) []any {
	var out []any
	for _, b := range d.Batches {
		col := b.Column(i)
		for r := range col.Len() {
			out = append(out, cell(col, r))
		}
	}
	return out
}

func cell(col arrow.Array, r int) any {
	if col.IsNull(r) {
		return nil
	}
	switch c := col.(type) {
	case *array.Int64:
		return c.Value(r)
	case *array.Float64:
		return math.Float64bits(c.Value(r))
	case *array.Boolean:
		return c.Value(r)
	case *array.String:
		return c.Value(r)
	case *array.Timestamp:
		return int64(c.Value(r))
	}
	panic(fmt.Sprintf("column of type %v", col.DataType()))
}
