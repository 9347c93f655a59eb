package httpsrc

import (
	"reflect"
	"strings"
	"testing"
)

// A pooled decoder keeps nothing of the bodies it decoded, failed or
// not: the same body decodes the same after others that had the same
// field names with other types, more fields, or an error half-way.
func TestJSONDecoderReuseKeepsNothing(t *testing.T) {
	first := "{\"a\": 1, \"t\": \"2024-01-02T03:04:05Z\", \"s\": \"x\"}\n{\"a\": 2, \"t\": null, \"s\": \"yz\"}"
	others := []string{
		"{\"a\": \"text\", \"t\": 1.5, \"s\": [1, 2], \"z\": true}\n{\"b\": 2}",
		"{\"a\": 1, \"s\": \"partial\"}\n{\"a\": \"a conflict\"}",
		"{\"t\": \"not a time\", \"a\": 9007199254740993}\n{\"a\": 0.5}",
		strings.Repeat("{\"a\": 1, \"t\": \"2024-01-02T03:04:05Z\", \"s\": \"xyz\"}\n", 3000),
	}
	want := decodedValues(t, first)
	for _, other := range others {
		_, _ = decode(t, JSONLines, other, DefaultLimits())
		if got := decodedValues(t, first); !reflect.DeepEqual(got, want) {
			t.Fatalf("after %.40q: %v; want %v", other, got, want)
		}
	}
}

// decodedValues returns body's schema and every column's values.
func decodedValues(t *testing.T, body string) []any {
	d := mustDecode(t, JSONLines, body, DefaultLimits())
	out := []any{fieldTypes(d.Schema)}
	for _, f := range d.Schema.Fields() {
		out = append(out, values(t, d, f.Name))
	}
	return out
}
