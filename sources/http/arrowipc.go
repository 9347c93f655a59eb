package httpsrc

import (
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// decodeArrowIPC reads an Arrow IPC stream: its schema as it comes
// (nested types included), its batches validated in full and re-sliced
// to at most lim.BatchRows rows.
func decodeArrowIPC(body *limitedBody, lim Limits, mem memory.Allocator) (*Decoded, error) {
	alloc := newTrackedAllocator(mem, lim.decodedBytesMax())
	d, err := readArrowIPC(body, lim, alloc)
	if err == nil {
		return d, nil
	}
	// Everything readArrowIPC made is released; what arrow-go dropped
	// on its way out of a panic is not, until now.
	alloc.freeAll()
	if alloc.wentOver() {
		return nil, tooLargef("decoded, the stream would take more than %d bytes of memory (%d× the body limit)",
			lim.decodedBytesMax(), decodedRatio)
	}
	return nil, err
}

// readArrowIPC decodes the stream with alloc; on error it has released
// everything it made.
func readArrowIPC(body *limitedBody, lim Limits, alloc *trackedAllocator) (d *Decoded, err error) {
	msgs := &bodyMessages{body: body, lim: lim, mem: alloc}
	defer msgs.Release()
	defer func() {
		// arrow-go's reader turns its own panics into errors; this is
		// for anything else arrow-go does with the data it accepted.
		if p := recover(); p != nil {
			d.Release()
			d, err = nil, &InputError{Reason: shorten(fmt.Sprintf("malformed Arrow IPC stream: %v", p))}
		}
	}()
	rd, err := ipc.NewReaderFromMessageReader(msgs, ipc.WithAllocator(alloc))
	if err != nil {
		return nil, streamError(msgs, err)
	}
	defer rd.Release()
	if err := checkArrowSchema(rd.Schema(), lim); err != nil {
		return nil, err
	}
	d = &Decoded{Schema: rd.Schema()}
	for rd.Next() {
		if err := d.addArrow(rd.RecordBatch(), lim); err != nil {
			d.Release()
			return nil, err
		}
	}
	err = rd.Err()
	if err == nil {
		err = msgs.finish()
	}
	if err != nil {
		d.Release()
		return nil, streamError(msgs, err)
	}
	if d.Rows == 0 {
		return nil, &InputError{Reason: "no rows"}
	}
	return d, nil
}

// streamError reports what went wrong reading the stream: the message
// reader's own error if it had one (arrow-go rewords what it is given),
// else arrow-go's. A malformed stream is an *InputError; the body's own
// read error, ErrTooLarge among them, is returned as it is.
func streamError(msgs *bodyMessages, err error) error {
	if msgs.err != nil {
		err = msgs.err
	}
	var bad *badStream
	switch {
	case msgs.err == nil && msgs.count == 0 && msgs.body.n == 0:
		return &InputError{Reason: "no rows"} // an empty body
	case errors.As(err, &bad):
		return &InputError{Reason: shorten(bad.msg)}
	case msgs.err != nil:
		return err
	}
	return &InputError{Reason: shorten("malformed Arrow IPC stream: " + err.Error())}
}

// checkArrowSchema checks a stream's schema: 1..lim.Fields fields, each
// named as a JSON or CSV field must be (nameProblem), no two alike.
// Nested fields' names are the stream's business.
func checkArrowSchema(s *arrow.Schema, lim Limits) error {
	switch n := s.NumFields(); {
	case n == 0:
		return &InputError{Reason: "the stream's schema has no fields"}
	case n > lim.Fields:
		return inputErrorf(0, "", "the stream's schema has %d fields; at most %d", n, lim.Fields)
	}
	seen := make(map[string]int, s.NumFields())
	for i, f := range s.Fields() {
		if p := nameProblem(f.Name); p != "" {
			return inputErrorf(0, "", "schema field %d: %s", i+1, p)
		}
		if j, dup := seen[f.Name]; dup {
			return inputErrorf(0, "", "schema fields %d and %d are both named %s", j+1, i+1, quote(f.Name))
		}
		seen[f.Name] = i
	}
	return nil
}

// addArrow validates a batch the stream held and adds it to d, in
// slices of at most lim.BatchRows rows; a batch of no rows adds nothing.
func (d *Decoded) addArrow(rec arrow.RecordBatch, lim Limits) error {
	n := rec.NumRows()
	if n > int64(lim.Rows)-d.Rows {
		return inputErrorf(0, "", "more than %d rows in the body", lim.Rows)
	}
	for i, col := range rec.Columns() {
		if err := validateColumn(col); err != nil {
			return inputErrorf(0, "", "column %s: %s", quote(rec.ColumnName(i)), shorten(err.Error()))
		}
	}
	for lo := int64(0); lo < n; lo += int64(lim.BatchRows) {
		d.Batches = append(d.Batches, rec.NewSlice(lo, min(lo+int64(lim.BatchRows), n)))
	}
	d.Rows += n
	return nil
}
