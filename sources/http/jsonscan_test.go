package httpsrc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"pgregory.net/rapid"
)

// The scanner accepts exactly what utf8.Valid and json.Valid accept
// together, tells objects from other values, and splits an object into
// exactly the members json.Decoder reads — whatever the values, escapes,
// spacing, bad bytes, cuts and mutations.
func TestScanLineMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		checkScan(t, drawLine(t))
	})
}

// Valid lines on their own: the generator above mostly mutates them, so
// most of its lines take the reject path; here each draw is accepted,
// and its members checked.
func TestScanLineSplitsValidObjects(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		text := []byte(drawObject(t, 0))
		if v := new(lineScanner).scanLine(text); v != lineObject {
			t.Fatalf("%q: verdict %v; want an object", text, v)
		}
		checkScan(t, text)
	})
}

// Cases a generator reaches only by luck, each against encoding/json.
func TestScanLineEdges(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, text := range []string{
		``, ` `, `{`, `}`, `{}`, ` { } `, `{"a":1}`, `{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{"a":1 "b":2}`,
		`{"a":1}{}`, `{"a":1} x`, `[1]`, `"s"`, `0`, `-0`, `true`, `nul`, `nulll`, `{"a":truex}`,
		`{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":1E-5}`, `{"a":+1}`, `{"a":1.5e3.2}`,
		`{"a":"\u12"}`, `{"a":"\u12G4"}`, `{"a":"\x"}`, `{"a":"\ud800"}`, `{"a":"\udc00\ud800"}`, `{"a":"\"}`,
		"{\"a\":\"\x7f\"}", "{\"a\":\"\x1f\"}", "{\"a\":\"\t\"}", "{\"a\":\"\xed\xa0\x80\"}", "{\"a\":\"\xf4\x90\x80\x80\"}",
		"{\"a\":\"\xc0\xaf\"}", "{\"a\":\"\xe2\x80\xa8\"}", "{\"a\":\"\xf0\x9f\x98\x80\"}", "{\"a\":\"\xf0\x9f\x98\"}",
		"{\"\xff\":1}", "{\"a\":1}\xff", "\xef\xbb\xbf{}", "{\"a\":1}\v", "{\"a\":\v1}", "{\"a\":[1,]}", "{\"a\":{\"b\"}}",
		`{"a":{"b":1,}}`, `{"a":[1 2]}`, `{"a":{1:2}}`, `{"a":[}`, `{"a":{]}`, `{"a":[[]]]}`,
		`{"a":` + deep(maxNestingDepth-1) + `}`, `{"a":` + deep(maxNestingDepth) + `}`,
		deep(maxNestingDepth), deep(maxNestingDepth + 1),
	} {
		checkScan(t, []byte(text))
	}
}

// appendCompact writes what json.Compact writes for every valid value.
func TestAppendCompactMatchesEncodingJSON(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		raw := []byte(drawValue(t, 0))
		var want bytes.Buffer
		if err := json.Compact(&want, raw); err != nil {
			t.Fatalf("drew invalid JSON %q: %v", raw, err)
		}
		if got := appendCompact([]byte("x"), raw); string(got) != "x"+want.String() {
			t.Fatalf("%q: compact %q; want %q", raw, got[1:], want.String())
		}
	})
}

// tb is what checkScan needs of a *testing.T or *rapid.T.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

// checkScan checks the scanner's verdict on text against encoding/json,
// and an object's members and their flags against json.Decoder's.
func checkScan(t tb, text []byte) {
	t.Helper()
	var s lineScanner
	verdict := s.scanLine(text)
	valid := utf8.Valid(text) && json.Valid(text)
	want := lineInvalid
	switch {
	case valid && bytes.TrimLeft(text, " \t\r\n")[0] == '{':
		want = lineObject
	case valid:
		want = lineNotObject
	}
	if verdict != want {
		t.Fatalf("%q: verdict %v; want %v (utf8.Valid && json.Valid: %v)", text, verdict, want, valid)
	}
	if verdict != lineObject {
		return
	}
	members := decoderMembers(t, text)
	if len(s.members) != len(members) {
		t.Fatalf("%q: %d members; the decoder reads %d", text, len(s.members), len(members))
	}
	for k, m := range s.members {
		if got := memberOf(t, text, m); got != members[k] {
			t.Fatalf("%q: member %d\nscan    %q\ndecoder %q", text, k, got, members[k])
		}
		checkFlags(t, m.raw(text), m.flags)
	}
}

// decoderMembers is what json.Decoder reads of an object: each key's
// text and value, as "key=raw".
func decoderMembers(t tb, text []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(text))
	if _, err := dec.Token(); err != nil {
		t.Fatalf("%q: %v", text, err)
	}
	var out []string
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		out = append(out, key.(string)+"="+string(raw))
	}
	return out
}

// memberOf is m as "key=raw", its key as the decoder takes it: as
// written if the scanner saw no escape.
func memberOf(t tb, text []byte, m jsonMember) string {
	t.Helper()
	key := m.key(text)
	name := string(key[1 : len(key)-1])
	if m.keyEsc {
		var err error
		if name, err = keyText(key); err != nil {
			t.Fatalf("key %q: %v", key, err)
		}
	}
	return name + "=" + string(m.raw(text))
}

// checkFlags checks what the scanner noted of a member's value, raw.
func checkFlags(t tb, raw []byte, flags valueFlags) {
	t.Helper()
	switch raw[0] {
	case '"':
		if esc := bytes.IndexByte(raw, '\\') >= 0; esc != (flags&valEscaped != 0) {
			t.Fatalf("%q: escaped %v; flags %b", raw, esc, flags)
		}
	case '{', '[':
		var c bytes.Buffer
		_ = json.Compact(&c, raw)
		if spaced := c.Len() != len(raw); spaced != (flags&valSpaced != 0) {
			t.Fatalf("%q: spaced %v; flags %b", raw, spaced, flags)
		}
	case 't', 'f', 'n':
	default:
		if float := bytes.ContainsAny(raw, ".eE"); float != (flags&valFloat != 0) {
			t.Fatalf("%q: float %v; flags %b", raw, float, flags)
		}
	}
}

// drawLine draws a JSON-ish line: a valid object or other value, with
// or without a near miss in it (jsonGen), then as drawn, cut short, or
// with a few bytes replaced, inserted or dropped.
func drawLine(t *rapid.T) []byte {
	var g jsonGen
	if rapid.Bool().Draw(t, "near miss") {
		g.miss = drawNearMiss(t)
	}
	var text []byte
	if rapid.IntRange(0, 9).Draw(t, "top") == 0 {
		text = []byte(g.value(t, 0))
	} else {
		text = []byte(g.object(t, 0))
	}
	for range rapid.IntRange(0, 3).Draw(t, "mutations") {
		text = mutate(t, text)
	}
	return text
}

// Every near miss, one at a time, in valid objects of every shape: each
// line is valid but for the one miss (if the draw put it in), so the
// scanner must find that very defect.
func TestScanLineNearMisses(t *testing.T) {
	for _, m := range nearMisses() {
		t.Run(fmt.Sprintf("%q", m.text), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				miss := m
				checkScan(t, []byte(jsonGen{miss: &miss}.object(t, 0)))
			})
		})
	}
}

// badBytes are bytes a mutation puts in: JSON's punctuation, escapes'
// letters, space, control and non-ASCII bytes that start, continue or
// spoil UTF-8.
var badBytes = []byte("\"\\{}[],: \t\r\n0-1.eEu+/bfnrtaxF\x00\x1f\x7f\x80\xbf\xc0\xc3\xe2\xed\xf0\xf4\xf5\xff")

// mutate cuts text short, or replaces, inserts or drops one byte.
func mutate(t *rapid.T, text []byte) []byte {
	if len(text) == 0 {
		return []byte{rapid.SampledFrom(badBytes).Draw(t, "byte")}
	}
	i := rapid.IntRange(0, len(text)-1).Draw(t, "at")
	out := bytes.Clone(text)
	switch rapid.IntRange(0, 3).Draw(t, "how") {
	case 0:
		return out[:i]
	case 1:
		out[i] = rapid.SampledFrom(badBytes).Draw(t, "byte")
		return out
	case 2:
		return append(out[:i], append([]byte{rapid.SampledFrom(badBytes).Draw(t, "byte")}, text[i:]...)...)
	}
	return append(out[:i], text[i+1:]...)
}

var spaces = []string{"", "", " ", "\t", "  ", "\r\n"}

func sp(t *rapid.T) string { return rapid.SampledFrom(spaces).Draw(t, "space") }

// jsonGen draws JSON texts; with miss set, it puts that near miss in
// once, at a random place of its kind.
type jsonGen struct{ miss *nearMiss }

// nearMiss is a piece of text JSON or UTF-8 does not allow, but close to
// what they do: a value, or a piece of a string.
type nearMiss struct {
	text     string
	inString bool
	done     bool // put in already
}

// putMiss reports whether to put the near miss in now, in a string or
// as a value: one place in three of its kind, until it is in.
func (g jsonGen) putMiss(t *rapid.T, inString bool) bool {
	if g.miss == nil || g.miss.done || g.miss.inString != inString || rapid.IntRange(0, 2).Draw(t, "miss here") != 0 {
		return false
	}
	g.miss.done = true
	return true
}

// nearMisses returns every near miss, none put in.
func nearMisses() []nearMiss {
	var out []nearMiss
	for _, p := range badStringPieces {
		out = append(out, nearMiss{text: p, inString: true})
	}
	for _, v := range nearMissValues {
		out = append(out, nearMiss{text: v})
	}
	return out
}

// drawNearMiss draws one of nearMisses.
func drawNearMiss(t *rapid.T) *nearMiss {
	m := rapid.SampledFrom(nearMisses()).Draw(t, "miss")
	return &m
}

// drawObject draws a valid JSON object text with arbitrary spacing.
func drawObject(t *rapid.T, depth int) string { return jsonGen{}.object(t, depth) }

// drawValue draws any valid JSON value, nested at most a few levels.
func drawValue(t *rapid.T, depth int) string { return jsonGen{}.value(t, depth) }

// drawString draws a valid string literal.
func drawString(t *rapid.T) string { return jsonGen{}.str(t) }

func (g jsonGen) object(t *rapid.T, depth int) string {
	n := rapid.IntRange(0, 4).Draw(t, "members")
	var b strings.Builder
	b.WriteString(sp(t) + "{" + sp(t))
	for i := range n {
		if i > 0 {
			b.WriteString(sp(t) + "," + sp(t))
		}
		b.WriteString(g.str(t) + sp(t) + ":" + sp(t) + g.value(t, depth))
	}
	b.WriteString(sp(t) + "}" + sp(t))
	return b.String()
}

func (g jsonGen) value(t *rapid.T, depth int) string {
	if g.putMiss(t, false) {
		return g.miss.text
	}
	kind := rapid.IntRange(0, 6).Draw(t, "kind")
	if depth >= 3 {
		kind %= 4
	}
	switch kind {
	case 0:
		return g.str(t)
	case 1:
		return fmt.Sprint(rapid.Float64().Draw(t, "num"))
	case 2:
		return drawNumber(t)
	case 3:
		return rapid.SampledFrom([]string{"true", "false", "null"}).Draw(t, "lit")
	case 4:
		return g.object(t, depth+1)
	default:
		n := rapid.IntRange(0, 3).Draw(t, "elems")
		parts := make([]string, n)
		for i := range parts {
			parts[i] = sp(t) + g.value(t, depth+1) + sp(t)
		}
		return "[" + sp(t) + strings.Join(parts, ",") + "]"
	}
}

// str draws a string literal of stringPieces, and perhaps the near
// miss.
func (g jsonGen) str(t *rapid.T) string {
	parts := rapid.SliceOfN(rapid.SampledFrom(stringPieces), 0, 6).Draw(t, "pieces")
	if g.putMiss(t, true) {
		at := rapid.IntRange(0, len(parts)).Draw(t, "miss at")
		parts = append(parts[:at], append([]string{g.miss.text}, parts[at:]...)...)
	}
	return `"` + strings.Join(parts, "") + `"`
}

// stringPieces are what a drawn string literal is made of: plain and
// non-ASCII text, JSON's punctuation, every escape, and \u escapes of
// surrogates, paired, lone and reversed.
var stringPieces = []string{
	"a", "z", " ", "{", "}", "[", "]", ",", ":", "é", "\u2028", "😀", "\x7f", "\ufffd",
	`\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0061`, `\u00E9`, `\u0000`, `\u001f`,
	`\ud83d\ude00`, `\uD800`, `\udfff`, `\ude00\ud83d`, `\uffff`,
}

// badStringPieces are near misses inside a string: control bytes, bytes
// that are not UTF-8 (a cut sequence, an overlong one, a surrogate, past
// U+10FFFF), and escapes JSON does not have.
var badStringPieces = []string{
	"\x00", "\x1f", "\t", "\n", "\xff", "\x80", "\xc3", "\xe2\x80", "\xf0\x9f\x98", "\xc0\xaf", "\xe0\x80\xaf",
	"\xed\xa0\x80", "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", `\x41`, `\'`, `\a`, `\U0061`, `\u12`, `\u12G4`, `\u{61}`, `\`,
}

// nearMissValues are values JSON does not have, each close to one it
// has.
var nearMissValues = []string{
	"01", "00", "-01", "-", "--1", "+1", "1.", ".5", "-.5", "1.e5", "1e", "1e+", "1E-", "1ee5", "1.5.3", "0x10", "1_000",
	"NaN", "Infinity", "tru", "truex", "True", "nul", "nulll", "NULL", "fals", "falsey",
	"[1,]", "[,1]", "[1 2]", "{,}", `{"a"}`, `{"a":}`, `{"a" 1}`, "{1:2}", `{"a":1,}`, "[", "]", "{", "}", "'s'", `"s`,
}
