package httpsrc

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// jsonDecoder reads a JSON lines body: one object per non-empty line.
// Inference needs the whole body, so values are kept per field (in Go
// memory, a small multiple of the body) until the last line is read.
type jsonDecoder struct {
	lim    Limits
	fields map[string]*jsonField
	rows   int32
	lines  []int32 // the line of each row
	scan   lineScanner
	// recent[k] is the field of member k of the last line that had one:
	// a line mostly lists the fields of the line before it, in its
	// order, and a name compared with one field's costs less than a
	// lookup in fields.
	recent []*jsonField
	spare  []column // emptied columns of earlier bodies (jsonreuse.go)
}

func decodeJSONLines(body io.Reader, lim Limits, mem memory.Allocator) (*Decoded, error) {
	lr := newLineReader(body, lim.LineBytes)
	defer lr.release()
	d := newJSONDecoder(lim)
	defer d.recycle()
	for {
		text, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if text = trimSpace(text); len(text) > 0 {
			if err := d.object(lr.line, text); err != nil {
				return nil, err
			}
		}
	}
	switch {
	case d.rows == 0:
		return nil, &InputError{Reason: "no rows"}
	case len(d.fields) == 0: // a table of no columns fits no sink
		return nil, &InputError{Reason: "no fields: every object is empty"}
	}
	return buildDecoded(d.columns(), int(d.rows), d.lim, mem)
}

// trimSpace returns text without the ASCII space (" \t\r\n\v\f") at
// either end: what a line may hold besides its object. A blank line
// trims to nothing, and is skipped.
func trimSpace(text []byte) []byte {
	for len(text) > 0 && isASCIISpace(text[0]) {
		text = text[1:]
	}
	for len(text) > 0 && isASCIISpace(text[len(text)-1]) {
		text = text[:len(text)-1]
	}
	return text
}

func isASCIISpace(c byte) bool { return c == ' ' || '\t' <= c && c <= '\r' }

// object adds the row on line, text.
func (d *jsonDecoder) object(line int, text []byte) error {
	if int(d.rows) == d.lim.Rows {
		return inputErrorf(line, "", "more than %d rows in the body", d.lim.Rows)
	}
	if d.scan.scanLine(text) != lineObject {
		return d.checkedObject(line, text)
	}
	for k := range d.scan.members {
		if err := d.member(line, text, k, &d.scan.members[k]); err != nil {
			return err
		}
	}
	d.endRow(line)
	return nil
}

// endRow counts the row just added, from line.
func (d *jsonDecoder) endRow(line int) {
	d.rows++
	push(&d.lines, int32(line))
}

// checkedObject adds the row on line, text, which the scanner did not
// accept as an object, through json.Decoder: it finds what is wrong
// with the line, and words it.
func (d *jsonDecoder) checkedObject(line int, text []byte) error {
	// JSON text is UTF-8 (RFC 8259); encoding/json would silently turn
	// invalid bytes into U+FFFD, changing the data.
	if !utf8.Valid(text) {
		return inputErrorf(line, "", "not valid UTF-8")
	}
	// Not valid JSON, or not an object: the decoder says what is wrong.
	dec := json.NewDecoder(bytes.NewReader(text))
	tok, err := dec.Token()
	if err != nil {
		return syntaxError(line, err)
	}
	if tok != json.Delim('{') {
		return inputErrorf(line, "", "%s, not a JSON object", describeToken(tok))
	}
	if err := d.members(dec, line); err != nil {
		return err
	}
	if err := endOfLine(dec, line); err != nil {
		return err
	}
	d.endRow(line)
	return nil
}

// members adds the object's members, dec just past its '{', and reads
// its '}'.
func (d *jsonDecoder) members(dec *json.Decoder, line int) error {
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return syntaxError(line, err)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return syntaxError(line, err)
		}
		key, ok := tok.(string) // Token checks that a key is a string
		if !ok {
			return inputErrorf(line, "", "invalid JSON: a key that is not a string")
		}
		if err := d.value(line, d.rows, key, raw); err != nil {
			return err
		}
	}
	// More is false at the '}', or at an error Token reports.
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return syntaxError(line, err)
	}
	return nil
}

// endOfLine checks that nothing but space follows the object.
func endOfLine(dec *json.Decoder, line int) error {
	switch tok, err := dec.Token(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return inputErrorf(line, "", "text after the object: %v", err)
	default:
		return inputErrorf(line, "", "%s after the object", describeToken(tok))
	}
}

// syntaxError describes err, from decoding line; nil or io.EOF is a line
// that ends inside its object.
func syntaxError(line int, err error) error {
	if err == nil || err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return inputErrorf(line, "", "invalid JSON: the line ends inside the object")
	}
	return inputErrorf(line, "", "invalid JSON: %v", err)
}

// describeToken names the kind of a JSON token that is not an object.
func describeToken(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim: // '[' or '{': a closing one is a syntax error
		if tok == '[' {
			return "an array"
		}
		return "an object"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// member adds m, member k of the object on line, text, as the scanner
// found it.
func (d *jsonDecoder) member(line int, text []byte, k int, m *jsonMember) error {
	f, err := d.memberField(line, k, m.key(text), m.keyEsc)
	if err != nil {
		return err
	}
	return d.add(f, line, d.rows, m.raw(text), m.flags)
}

// memberField returns the field of key (a literal, escaped if esc), the
// key of member k of the object on line. A known name is found without
// building a string of it.
func (d *jsonDecoder) memberField(line, k int, key []byte, esc bool) (*jsonField, error) {
	if esc {
		name, err := keyText(key)
		if err != nil {
			return nil, syntaxError(line, err)
		}
		return d.field(line, name)
	}
	name := key[1 : len(key)-1]
	if k < len(d.recent) {
		if f := d.recent[k]; f != nil && f.name == string(name) {
			return f, nil
		}
	}
	f := d.fields[string(name)] // string(name) in a lookup is not allocated
	if f == nil {
		var err error
		if f, err = d.field(line, string(name)); err != nil {
			return nil, err
		}
	}
	d.remember(k, f)
	return f, nil
}

// remember makes f the field of member k in recent.
func (d *jsonDecoder) remember(k int, f *jsonField) {
	for len(d.recent) <= k {
		d.recent = append(d.recent, nil)
	}
	d.recent[k] = f
}

// keyText is the text of a key literal, unescaped by encoding/json.
func keyText(lit []byte) (string, error) {
	var s string
	err := json.Unmarshal(lit, &s)
	return s, err
}

// value adds the value raw, as json.Decoder read it, of field name, in
// row on line.
func (d *jsonDecoder) value(line int, row int32, name string, raw []byte) error {
	f, err := d.field(line, name)
	if err != nil {
		return err
	}
	var s lineScanner // what the scanner would have noted of raw
	if _, ok := s.value(raw, 0, 1); !ok {
		return inputErrorf(line, name, "invalid JSON value %s", clip(string(raw)))
	}
	return d.add(f, line, row, raw, s.flags)
}

// add adds raw, with what the scanner noted of it, to field f, in row on
// line.
func (d *jsonDecoder) add(f *jsonField, line int, row int32, raw []byte, flags valueFlags) error {
	if f.lastRow == row {
		return inputErrorf(line, f.name, "the field appears twice in the object")
	}
	f.lastRow = row
	switch raw[0] {
	case 'n':
		return nil
	case 't', 'f':
		return f.addBool(line, row, raw[0] == 't')
	case '"':
		s := raw[1 : len(raw)-1] // no escapes: the text is as written
		if flags&valEscaped != 0 {
			var err error
			if s, err = unquote(raw); err != nil {
				return syntaxError(line, err)
			}
		}
		return f.addString(line, row, s)
	case '{', '[':
		return f.addNested(line, row, raw, flags&valSpaced != 0)
	}
	return f.addNumber(line, row, raw, flags&valFloat != 0, d.lineOf)
}

// field returns the field name, new if the body had no such field yet.
func (d *jsonDecoder) field(line int, name string) (*jsonField, error) {
	if f := d.fields[name]; f != nil {
		return f, nil
	}
	if p := nameProblem(name); p != "" {
		return nil, inputErrorf(line, "", "%s", p)
	}
	if len(d.fields) == d.lim.Fields {
		return nil, inputErrorf(line, name, "more than %d distinct fields in the body", d.lim.Fields)
	}
	f := d.newField(name)
	d.fields[name] = f
	return f, nil
}

func (d *jsonDecoder) lineOf(row int32) int { return int(d.lines[row]) }

// unquote returns the text of a JSON string literal with escapes,
// unescaped by encoding/json.
func unquote(raw []byte) ([]byte, error) {
	var s string
	err := json.Unmarshal(raw, &s)
	return []byte(s), err
}

// columns returns the fields, settled, sorted by name (byte order): the
// same set of fields gives the same schema whatever order lines list them.
func (d *jsonDecoder) columns() []*column {
	names := slices.Sorted(maps.Keys(d.fields))
	cols := make([]*column, len(names))
	for i, name := range names {
		cols[i] = d.fields[name].finish()
	}
	return cols
}
