package sim

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/skipprd/skipprd/engine"
)

// requestText is a unit's valid request: its Content-Type and body, the
// encoding it went in and the unit's shape (shape.go).
type requestText struct {
	ctype    string
	bytes    []byte
	encoding string // EncodingArrow, EncodingJSON, EncodingCSV or csvAsJSON
	shape    unitShape
}

// csvAsJSON is the encoding of a unit due as CSV whose payloads could
// all read as numbers (or booleans): CSV inference would make that
// column numeric and lose the text, so the client sends JSON lines.
const csvAsJSON = "csv-as-json"

// encodingOf is how unit uid is sent (SourceSpec.Encoding): "" alternates
// Arrow (even sequence numbers) and JSON lines, EncodingMixed3 rotates
// Arrow, JSON lines and CSV.
func encodingOf(spec SourceSpec, uid UID) string {
	switch spec.Encoding {
	case EncodingArrow, EncodingJSON, EncodingCSV:
		return spec.Encoding
	case EncodingMixed3:
		return [...]string{EncodingArrow, EncodingJSON, EncodingCSV}[uid.seq()%3]
	}
	if uid.seq()%2 == 0 {
		return EncodingArrow
	}
	return EncodingJSON
}

// requestBody encodes a unit as its request's body: an Arrow IPC stream
// in the unit's schema, JSON lines (the source infers the schema: its
// fields sorted by name, the row number as int64 — another schema
// fingerprint, as a client that sends JSON gets) or CSV with a header
// (inferred alike: integers int64, halves float64, text utf8).
func requestBody(spec SourceSpec, uid UID, in engine.Unit) (requestText, error) {
	t := requestText{encoding: encodingOf(spec, uid), shape: shapeOf(spec, uid)}
	var err error
	switch t.encoding {
	case EncodingArrow:
		t.ctype = arrowStream
		t.bytes, err = ipcBody(in)
		return t, err
	case EncodingCSV:
		if keepsText(in) {
			t.ctype = textCSV
			t.bytes, err = csvBody(in)
			return t, err
		}
		t.encoding = csvAsJSON
	}
	t.ctype = jsonLines
	t.bytes, err = jsonBody(in)
	return t, err
}

// jsonBody is a unit as JSON lines, fields in the unit schema's order
// (the source sorts them). A null tag is null on rows 1, 5, 9, … and
// absent from the others: the source reads both as null.
func jsonBody(in engine.Unit) ([]byte, error) {
	var buf bytes.Buffer
	for _, b := range in.Batches {
		cols, err := UnitColumns(b)
		if err != nil {
			return nil, err
		}
		for i := range cols.Len() {
			payload, err := jsonString(cols.Payload(i))
			if err != nil {
				return nil, err
			}
			b := buf.AvailableBuffer()
			b = strconv.AppendInt(append(b, `{"uid":`...), cols.UID(i), 10)
			b = strconv.AppendInt(append(b, `,"row":`...), int64(cols.Row(i)), 10)
			buf.Write(append(append(b, `,"payload":`...), payload...))
			switch tag, ok := cols.optional(i, fieldTag); {
			case ok:
				buf.WriteString(`,"tag":` + tag)
			case cols.tags != nil && i%4 == 1:
				buf.WriteString(`,"tag":null`)
			}
			if zip, ok := cols.optional(i, fieldZip); ok {
				buf.WriteString(`,"zip":"` + zip + `"`)
			}
			if score, ok := cols.optional(i, fieldScore); ok {
				buf.WriteString(`,"score":` + score)
			}
			buf.WriteString("}\n")
		}
	}
	return buf.Bytes(), nil
}

// csvBody is a unit as CSV: a header naming the unit schema's columns
// and the unit's optional ones, a record per row; a null is an empty
// cell. Cells need no quoting: numbers, and payloads of letters and
// digits.
func csvBody(in engine.Unit) ([]byte, error) {
	var buf bytes.Buffer
	for k, b := range in.Batches {
		cols, err := UnitColumns(b)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			buf.WriteString("uid,row,payload")
			for _, name := range cols.optionalNames() {
				buf.WriteString("," + name)
			}
			buf.WriteByte('\n')
		}
		for i := range cols.Len() {
			b := strconv.AppendInt(buf.AvailableBuffer(), cols.UID(i), 10)
			b = strconv.AppendInt(append(b, ','), int64(cols.Row(i)), 10)
			buf.Write(append(append(b, ','), cols.Payload(i)...))
			for _, name := range cols.optionalNames() {
				v, _ := cols.optional(i, name)
				buf.WriteString("," + v)
			}
			buf.WriteByte('\n')
		}
	}
	return buf.Bytes(), nil
}

// jsonString is s as a JSON string: quoted as it is when it holds only
// letters and digits (every pool payload), else as encoding/json spells it.
func jsonString(s string) ([]byte, error) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			return json.Marshal(s)
		}
	}
	return []byte(`"` + s + `"`), nil
}

// optionalNames are the optional fields cols has, in the order a CSV
// header lists them.
func (c Cols) optionalNames() []string {
	var out []string
	if c.tags != nil {
		out = append(out, fieldTag)
	}
	if c.zips != nil {
		out = append(out, fieldZip)
	}
	if c.scoreInts != nil || c.scoreFloats != nil {
		out = append(out, fieldScore)
	}
	return out
}

// optional is row i's value of an optional field as text (JSON and CSV
// spell numbers alike; a zip is JSON's string unquoted), and whether it
// is there and not null.
func (c Cols) optional(i int, name string) (string, bool) {
	switch {
	case name == fieldTag && c.tags != nil && c.tags.IsValid(i):
		return strconv.FormatInt(c.tags.Value(i), 10), true
	case name == fieldZip && c.zips != nil && c.zips.IsValid(i):
		return c.zips.Value(i), true // digits: no quoting or escaping
	case name == fieldScore && c.scoreInts != nil && c.scoreInts.IsValid(i):
		return strconv.FormatInt(c.scoreInts.Value(i), 10), true
	case name == fieldScore && c.scoreFloats != nil && c.scoreFloats.IsValid(i):
		return strconv.FormatFloat(c.scoreFloats.Value(i), 'f', -1, 64), true
	}
	return "", false
}

// keepsText reports whether the source's CSV inference keeps the unit's
// payload column utf8: it does if one payload parses as no number,
// boolean or timestamp (sources/http csvinfer.go). Conservative: a cell
// with a byte no number has and no ':' (every RFC 3339 timestamp has
// one) that is not a boolean word is such a cell.
func keepsText(in engine.Unit) bool {
	for _, b := range in.Batches {
		cols, err := UnitColumns(b)
		if err != nil {
			return false
		}
		for i := range cols.Len() {
			if textCell(cols.Payload(i)) {
				return true
			}
		}
	}
	return false
}

func textCell(s string) bool {
	switch s {
	case "true", "TRUE", "True", "false", "FALSE", "False":
		return false
	}
	return !strings.Contains(s, ":") && strings.ContainsFunc(s, func(r rune) bool { return !strings.ContainsRune("0123456789.eE+-", r) })
}

// ipcBody encodes a unit's batches as an Arrow IPC stream.
func ipcBody(in engine.Unit) ([]byte, error) {
	var buf bytes.Buffer
	wr := ipc.NewWriter(&buf, ipc.WithSchema(in.Schema))
	for _, b := range in.Batches {
		if err := wr.Write(b); err != nil {
			return nil, err
		}
	}
	if err := wr.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
