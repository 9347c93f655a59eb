package messages

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// Values of Decoder.Format: how a message's value becomes a row.
const (
	FormatJSON  = "json"  // a JSON object per value; columns inferred as the HTTP source infers them
	FormatText  = "text"  // one ColValue column of UTF-8 text
	FormatBytes = "bytes" // one ColValue column of bytes
)

// ColValue is the column of a value kept whole (FormatText, FormatBytes).
const ColValue = "value"

// ErrSplit says that fewer of the values may decode where all of them
// together do not: they are more than the limits allow together (rows,
// distinct fields, bytes), or a value other than the first cannot be a
// row. Take the first half: the values before a bad one are rows, and a
// bad value is named (a *ValueError) only once it comes first, so the
// error is never blamed on a value for what the others did.
var ErrSplit = errors.New("messages: the values decode to too much; take fewer")

// valueError is the error of value i of n: a *ValueError when it is the
// only one or the first, else ErrSplit (its cause may be the values
// together: a limit of the whole body).
func valueError(i, n int, format string, args ...any) error {
	if i > 0 && n > 1 {
		return ErrSplit
	}
	return &ValueError{i, fmt.Sprintf(format, args...)}
}

// ValueError is a message whose value cannot be a row.
type ValueError struct {
	Index  int // in the values given to Decode
	Reason string
}

func (e *ValueError) Error() string { return fmt.Sprintf("message %d: %s", e.Index, e.Reason) }

// Decoder decodes values in one Format. Zero Limits fields are errors:
// the caller sets them (httpsrc.DefaultLimits).
type Decoder struct {
	Format string
	Limits httpsrc.Limits
	Mem    memory.Allocator
	// Meta are the metadata columns, after the value's; AppendMeta
	// appends message i's value of each to the builders, one per field
	// of Meta, in order.
	Meta       []arrow.Field
	AppendMeta func(i int, builders []array.Builder)
}

// Decode returns the rows of values, one per value, in batches of at
// most Limits.BatchRows rows, all of one schema. Errors: a *ValueError;
// ErrSplit (more than one value); another for a broken invariant.
func (d *Decoder) Decode(values [][]byte) (*arrow.Schema, []arrow.RecordBatch, error) {
	if d.Format == FormatJSON {
		return d.decodeJSON(values)
	}
	return d.decodeRaw(values)
}

// decodeJSON decodes the values as JSON lines: an empty value (a
// tombstone) is a row of the metadata columns alone, and a value spread
// over several lines is compacted onto one.
func (d *Decoder) decodeJSON(values [][]byte) (*arrow.Schema, []arrow.RecordBatch, error) {
	var text bytes.Buffer
	size := 0
	for _, v := range values {
		size += len(v) + 3 // "{}\n" for a tombstone
	}
	text.Grow(size)
	for i, v := range values {
		switch {
		case len(v) == 0:
			text.WriteString("{}")
		case bytes.IndexByte(v, '\n') < 0:
			text.Write(v) // one line already; the decoder checks it
		default:
			if err := json.Compact(&text, v); err != nil {
				return nil, nil, valueError(i, len(values), "value is not JSON: %v", err)
			}
		}
		text.WriteByte('\n')
	}
	dec, err := httpsrc.Decode(httpsrc.JSONLines, &text, d.Limits, d.Mem)
	if err != nil {
		var ie *httpsrc.InputError
		switch {
		case errors.As(err, &ie) && ie.Line >= 1 && ie.Line <= len(values):
			return nil, nil, valueError(ie.Line-1, len(values), "%s", ie.Error())
		case errors.Is(err, httpsrc.ErrTooLarge) && len(values) > 1:
			return nil, nil, ErrSplit
		case errors.Is(err, httpsrc.ErrTooLarge):
			return nil, nil, &ValueError{0, fmt.Sprintf("value decodes to more than the limits allow: %v", err)}
		}
		return nil, nil, fmt.Errorf("messages: decode %d values: %w", len(values), err)
	}
	if dec.Rows != int64(len(values)) {
		dec.Release()
		return nil, nil, fmt.Errorf("messages: invariant broken: %d values decoded to %d rows", len(values), dec.Rows)
	}
	for _, f := range dec.Schema.Fields() {
		if d.isMeta(f.Name) {
			dec.Release()
			if len(values) > 1 {
				return nil, nil, ErrSplit // which value has it? One at a time will say
			}
			return nil, nil, &ValueError{0, fmt.Sprintf("the value has a field %q, which is a column the source adds", f.Name)}
		}
	}
	schema := arrow.NewSchema(append(append([]arrow.Field{}, dec.Schema.Fields()...), d.Meta...), nil)
	out := make([]arrow.RecordBatch, 0, len(dec.Batches))
	at := 0
	for _, b := range dec.Batches {
		n := int(b.NumRows())
		out = append(out, d.withMeta(schema, b.Columns(), at, n))
		at += n
	}
	dec.Release()
	return schema, out, nil
}

// decodeRaw makes each value a row of one ColValue column: text (valid
// UTF-8) or bytes; an empty value (a tombstone) is null.
func (d *Decoder) decodeRaw(values [][]byte) (*arrow.Schema, []arrow.RecordBatch, error) {
	var typ arrow.BinaryDataType = arrow.BinaryTypes.Binary
	if d.Format == FormatText {
		typ = arrow.BinaryTypes.String
	}
	schema := arrow.NewSchema(append([]arrow.Field{{Name: ColValue, Type: typ, Nullable: true}}, d.Meta...), nil)
	var out []arrow.RecordBatch
	for at := 0; at < len(values); at += d.Limits.BatchRows {
		n := min(d.Limits.BatchRows, len(values)-at)
		vb := array.NewBinaryBuilder(d.Mem, typ)
		for i, v := range values[at : at+n] {
			switch {
			case v == nil:
				vb.AppendNull()
			case d.Format == FormatText && !utf8.Valid(v):
				vb.Release()
				ReleaseAll(out)
				return nil, nil, valueError(at+i, len(values), "value is not UTF-8 text (format: text); use format: bytes")
			default:
				vb.Append(v)
			}
		}
		col := vb.NewArray()
		vb.Release()
		out = append(out, d.withMeta(schema, []arrow.Array{col}, at, n))
		col.Release()
	}
	return schema, out, nil
}

// withMeta is a batch of schema: cols (borrowed), then the metadata
// columns of messages at..at+n.
func (d *Decoder) withMeta(schema *arrow.Schema, cols []arrow.Array, at, n int) arrow.RecordBatch {
	builders := make([]array.Builder, len(d.Meta))
	for i, f := range d.Meta {
		builders[i] = array.NewBuilder(d.Mem, f.Type)
	}
	for i := at; i < at+n; i++ {
		d.AppendMeta(i, builders)
	}
	all := append([]arrow.Array{}, cols...)
	for _, b := range builders {
		all = append(all, b.NewArray())
		b.Release()
	}
	rec := array.NewRecordBatch(schema, all, int64(n))
	for _, a := range all[len(cols):] {
		a.Release()
	}
	return rec
}

func (d *Decoder) isMeta(name string) bool {
	for _, f := range d.Meta {
		if f.Name == name {
			return true
		}
	}
	return false
}

// ReleaseAll releases batches.
func ReleaseAll(bs []arrow.RecordBatch) {
	for _, b := range bs {
		b.Release()
	}
}

// Limits is l with its zero fields defaulted: httpsrc.DefaultLimits',
// except BodyBytes, which defaults to bodyBytes (a unit's values plus
// room for a line's framing).
func Limits(l httpsrc.Limits, bodyBytes int64) httpsrc.Limits {
	d := httpsrc.DefaultLimits()
	if l.LineBytes == 0 {
		l.LineBytes = d.LineBytes
	}
	if l.Rows == 0 {
		l.Rows = d.Rows
	}
	if l.Fields == 0 {
		l.Fields = d.Fields
	}
	if l.BatchRows == 0 {
		l.BatchRows = d.BatchRows
	}
	if l.BodyBytes == 0 {
		l.BodyBytes = bodyBytes
	}
	return l
}

// CheckLimits repeats httpsrc's own check of l, and that a body holds
// minBody bytes, so that a bad limit is a configuration error rather
// than every unit's decode error.
func CheckLimits(l httpsrc.Limits, minBody int64) error {
	if l.BodyBytes < max(minBody, 1) || l.BodyBytes > math.MaxInt32 || l.LineBytes < 1 || l.Rows < 1 || l.Rows > math.MaxInt32 ||
		l.Fields < 1 || l.BatchRows < 1 {
		return fmt.Errorf("limits %+v: every one at least 1, body bytes %d to %d, rows at most %d", l, max(minBody, 1), math.MaxInt32, math.MaxInt32)
	}
	return nil
}
