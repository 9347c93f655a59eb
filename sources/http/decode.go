package httpsrc

import (
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Decoded is a body's rows as Arrow record batches. It owns one
// reference to each batch; Release drops them.
type Decoded struct {
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch // every batch has Schema; together Rows rows
	Rows    int64
}

// Release releases the batches. It may be called more than once, and on
// a nil *Decoded.
func (d *Decoded) Release() {
	if d == nil {
		return
	}
	for _, b := range d.Batches {
		b.Release()
	}
	d.Batches = nil
}

// Decode reads body to its end — never more than lim.BodyBytes+1 bytes of
// it — and returns its rows as Arrow batches of at most lim.BatchRows
// rows each, allocated from mem.
//
// Errors: an *InputError for bad input; one wrapping ErrTooLarge for a
// body over lim.BodyBytes (whatever else is wrong with it) or one that
// would decode to too much memory; one wrapping ErrUnsupportedType for a
// Format that is none of the constants; an invalid lim, or the body's
// own read error, as they are. On error nothing allocated from mem is
// held.
func Decode(f Format, body io.Reader, lim Limits, mem memory.Allocator) (*Decoded, error) {
	if err := lim.check(); err != nil {
		return nil, err
	}
	b := newLimitedBody(body, lim.BodyBytes)
	var (
		d   *Decoded
		err error
	)
	switch f {
	case JSONLines:
		d, err = decodeJSONLines(b, lim, mem)
	case CSV:
		d, err = decodeCSV(b, lim, mem)
	case ArrowIPC:
		d, err = decodeArrowIPC(b, lim, mem)
	default:
		return nil, fmt.Errorf("%w: %v", ErrUnsupportedType, f)
	}
	if b.over {
		// What went wrong near the limit may be the cut itself (a JSON
		// line cut in two): too large is the answer that is sure.
		d.Release()
		return nil, tooLargef("the body is longer than %d bytes", lim.BodyBytes)
	}
	if err != nil {
		d.Release()
		return nil, err
	}
	if err := checkDecoded(d, lim); err != nil {
		d.Release()
		return nil, err
	}
	return d, nil
}

// checkDecoded checks what every decoder promises: at least one and at
// most lim.Rows rows, in batches of 1..lim.BatchRows rows, each of the
// schema, adding up to Rows. A failure is a bug in this package.
func checkDecoded(d *Decoded, lim Limits) error {
	var rows int64
	for i, b := range d.Batches {
		if n := b.NumRows(); n < 1 || n > int64(lim.BatchRows) {
			return fmt.Errorf("httpsrc: internal: batch %d has %d rows; want 1..%d", i, n, lim.BatchRows)
		}
		if !b.Schema().Equal(d.Schema) {
			return fmt.Errorf("httpsrc: internal: batch %d has schema %v; want %v", i, b.Schema(), d.Schema)
		}
		rows += b.NumRows()
	}
	if rows != d.Rows || rows < 1 || rows > int64(lim.Rows) {
		return fmt.Errorf("httpsrc: internal: %d rows in the batches, Rows says %d (limit %d)", rows, d.Rows, lim.Rows)
	}
	return nil
}
