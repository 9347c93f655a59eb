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
	lim     Limits
	fields  map[string]*jsonField
	rows    int32
	lines   []int32      // the line of each row
	compact bytes.Buffer // a nested value's compact text; reused
}

func decodeJSONLines(body io.Reader, lim Limits, mem memory.Allocator) (*Decoded, error) {
	lr := newLineReader(body, lim.LineBytes)
	d := &jsonDecoder{lim: lim, fields: map[string]*jsonField{}}
	for {
		text, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if text = bytes.Trim(text, asciiSpace); len(text) > 0 {
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

// asciiSpace is what a line may hold besides its object: a blank line is
// skipped.
const asciiSpace = " \t\r\n\v\f"

// object adds the row on line, text.
func (d *jsonDecoder) object(line int, text []byte) error {
	if int(d.rows) == d.lim.Rows {
		return inputErrorf(line, "", "more than %d rows in the body", d.lim.Rows)
	}
	// JSON text is UTF-8 (RFC 8259); encoding/json would silently turn
	// invalid bytes into U+FFFD, changing the data.
	if !utf8.Valid(text) {
		return inputErrorf(line, "", "not valid UTF-8")
	}
	if json.Valid(text) {
		isObject, err := scanObject(text, func(key, raw []byte) error { return d.member(line, key, raw) })
		if isObject {
			if err != nil {
				return err
			}
			d.rows++
			d.lines = append(d.lines, int32(line))
			return nil
		}
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
	d.rows++
	d.lines = append(d.lines, int32(line))
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

// member adds a member found by scanObject: key is its literal. A
// known field is found without building its name.
func (d *jsonDecoder) member(line int, key, raw []byte) error {
	if f := d.fields[string(key[1:len(key)-1])]; f != nil && !hasEscape(key) {
		return d.add(f, line, d.rows, raw)
	}
	name, err := keyText(key)
	if err != nil {
		return syntaxError(line, err)
	}
	return d.value(line, d.rows, name, raw)
}

func hasEscape(lit []byte) bool { return bytes.IndexByte(lit, '\\') >= 0 }

// value adds the value raw of field name, in row on line.
func (d *jsonDecoder) value(line int, row int32, name string, raw []byte) error {
	f, err := d.field(line, name)
	if err != nil {
		return err
	}
	return d.add(f, line, row, raw)
}

// add adds raw to field f, in row on line.
func (d *jsonDecoder) add(f *jsonField, line int, row int32, raw []byte) error {
	name := f.name
	if f.lastRow == row {
		return inputErrorf(line, name, "the field appears twice in the object")
	}
	f.lastRow = row
	switch raw[0] {
	case 'n':
		return nil
	case 't', 'f':
		return f.addBool(line, row, raw[0] == 't')
	case '"':
		s, err := unquote(raw)
		if err != nil {
			return syntaxError(line, err)
		}
		return f.addString(line, row, s)
	case '{', '[':
		d.compact.Reset()
		if err := json.Compact(&d.compact, raw); err != nil {
			return syntaxError(line, err)
		}
		return f.addNested(line, row, d.compact.Bytes())
	}
	return f.addNumber(line, row, raw, d.lineOf)
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
	f := &jsonField{column: column{name: name}, lastRow: -1}
	d.fields[name] = f
	return f, nil
}

func (d *jsonDecoder) lineOf(row int32) int { return int(d.lines[row]) }

// unquote returns the text of a JSON string literal.
func unquote(raw []byte) ([]byte, error) {
	if bytes.IndexByte(raw, '\\') < 0 && len(raw) >= 2 {
		return raw[1 : len(raw)-1], nil // no escapes: the text is as written
	}
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
