package httpsrc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// scanObject splits a valid object into exactly the members json.Decoder
// reads from it — the same key literals and raw values, in order —
// whatever the values, escapes and whitespace.
func TestScanObjectMatchesTheDecoder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := []byte(drawObject(t, 0))
		if !json.Valid(text) {
			t.Fatalf("drew invalid JSON: %s", text)
		}
		var got []string
		isObject, err := scanObject(text, func(key, raw []byte) error {
			got = append(got, string(key)+"="+string(raw))
			return nil
		})
		if !isObject || err != nil {
			t.Fatalf("%s: object %v, %v", text, isObject, err)
		}
		want := decoderMembers(t, text)
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s:\nscan    %q\ndecoder %q", text, got, want)
		}
	})
}

// Valid JSON that is not an object is reported as such.
func TestScanObjectNotAnObject(t *testing.T) {
	for _, text := range []string{`[1,2]`, `"s"`, `3`, ` null `} {
		if isObject, _ := scanObject([]byte(text), func(_, _ []byte) error { return nil }); isObject {
			t.Errorf("%s taken for an object", text)
		}
	}
}

// decoderMembers is what json.Decoder reads: each key's literal (its
// token re-quoted as written is not available, so the literal is found
// by the raw offset) and value.
func decoderMembers(t *rapid.T, text []byte) []string {
	dec := json.NewDecoder(bytes.NewReader(text))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	var out []string
	for dec.More() {
		before := dec.InputOffset()
		if _, err := dec.Token(); err != nil {
			t.Fatal(err)
		}
		lit := bytes.TrimLeft(text[before:dec.InputOffset()], " \t\r\n,")
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, string(lit)+"="+string(raw))
	}
	return out
}

var spaces = []string{"", " ", "\t", "  ", "\r\n"}

func sp(t *rapid.T) string { return rapid.SampledFrom(spaces).Draw(t, "space") }

// drawObject draws a JSON object text with arbitrary spacing.
func drawObject(t *rapid.T, depth int) string {
	n := rapid.IntRange(0, 4).Draw(t, "members")
	var b strings.Builder
	b.WriteString(sp(t) + "{" + sp(t))
	for i := range n {
		if i > 0 {
			b.WriteString(sp(t) + "," + sp(t))
		}
		b.WriteString(drawString(t) + sp(t) + ":" + sp(t) + drawValue(t, depth))
	}
	b.WriteString(sp(t) + "}" + sp(t))
	return b.String()
}

func drawValue(t *rapid.T, depth int) string {
	kind := rapid.IntRange(0, 6).Draw(t, "kind")
	if depth >= 3 {
		kind %= 4
	}
	switch kind {
	case 0:
		return drawString(t)
	case 1:
		return fmt.Sprint(rapid.Float64().Draw(t, "num"))
	case 2:
		return fmt.Sprint(rapid.Int64().Draw(t, "int"))
	case 3:
		return rapid.SampledFrom([]string{"true", "false", "null", "-0", "1e-7", "0.5E+3"}).Draw(t, "lit")
	case 4:
		return drawObject(t, depth+1)
	default:
		n := rapid.IntRange(0, 3).Draw(t, "elems")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = sp(t) + drawValue(t, depth+1) + sp(t)
		}
		return "[" + strings.Join(parts, ",") + "]"
	}
}

// drawString draws a string literal with escapes, quotes, braces and
// brackets inside.
func drawString(t *rapid.T) string {
	s := rapid.StringOfN(rapid.SampledFrom([]rune{'a', 'z', '"', '\\', '{', '}', '[', ']', ',', ':', 'é', '\n', '\u2028'}), 0, 8, -1).Draw(t, "s")
	lit, _ := json.Marshal(s)
	if rapid.Bool().Draw(t, "u-escape") {
		lit = bytes.ReplaceAll(lit, []byte("a"), []byte(`\u0061`))
	}
	return string(lit)
}
