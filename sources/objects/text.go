package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/skipprd/skipprd/engine"
	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// textObject ingests one JSON-lines or CSV object, chunk by chunk, from
// its acked position.
type textObject struct {
	s      *Source
	ingest IngestFunc
	obj    Object
	key    string // offset key
	format format
	r      *recordReader
	// CSV: the header record, prepended to every chunk's body so that
	// each decodes alone; where it is in the object.
	header     []byte
	headerAt   int64
	headerLine int
	// budget is a body's text bytes, header aside; halved when a body
	// decodes to more Arrow memory than the limits allow. max bounds one
	// record: the full budget.
	budget, max int
	buf         []byte // body buffer, reused
}

// ingestText ingests obj from byte start to its end. It returns nil when
// the last chunk is acked, errNoRows when what is left holds no rows.
func (s *Source) ingestText(ctx context.Context, ingest IngestFunc, obj Object, key string, f format, start int64) error {
	t := &textObject{s: s, ingest: ingest, obj: obj, key: key, format: f}
	defer t.close()
	if err := t.open(ctx, start); err != nil {
		return t.readError(ctx, err)
	}
	for {
		ch, err := nextChunk(t.r, t.header, t.budget, s.cfg.Limits.Rows, t.buf)
		if err != nil {
			return t.readError(ctx, err)
		}
		t.buf = ch.body
		if ch.rows == 0 {
			return t.noRows(ch)
		}
		err = t.send(ctx, ch)
		if errors.Is(err, errSmaller) {
			if err := t.reopen(ctx, ch); err != nil {
				return t.readError(ctx, err)
			}
			continue
		}
		if err != nil || ch.end == obj.Size {
			return err
		}
	}
}

// errSmaller: a chunk decoded too large; it is read again, smaller.
var errSmaller = errors.New("objects source: chunk too large to decode; halving")

// open starts reading at start: for CSV, after reading the header from
// the object's first bytes.
func (t *textObject) open(ctx context.Context, start int64) error {
	t.budget = int(t.s.cfg.ChunkBytes)
	t.max = t.budget
	firstLine := 0
	if start == 0 {
		firstLine = 1
	}
	if t.format != csvText {
		r, err := openRecords(ctx, t.s.store, t.obj, readerAt{off: start, firstLine: firstLine}, false, t.max)
		t.r = r
		return err
	}
	r, err := openRecords(ctx, t.s.store, t.obj, readerAt{off: 0, firstLine: 1}, true, t.max)
	if err != nil {
		return err
	}
	t.r = r
	if err := t.readHeader(); err != nil {
		return err
	}
	if start <= t.r.pos {
		return nil // the records follow the header
	}
	t.r.Close()
	t.r, err = openRecords(ctx, t.s.store, t.obj, readerAt{off: start}, true, t.max)
	return err
}

// readHeader reads the CSV header: the first record that is not blank
// (encoding/csv skips blank lines before it too). An object with no
// record after it has no rows: errNoRows.
func (t *textObject) readHeader() error {
	for {
		rec, err := t.r.peek()
		if err == io.EOF {
			return errNoRows
		}
		if err != nil {
			return err
		}
		t.r.take()
		if rec.blank {
			continue
		}
		if !bytes.HasSuffix(rec.text, []byte{'\n'}) {
			return errNoRows // the header ends the object
		}
		t.header = bytes.Clone(rec.text)
		t.headerAt, t.headerLine = rec.at, rec.line
		// The body limit holds the header and the budget.
		t.budget = min(t.budget, int(t.s.cfg.Limits.BodyBytes)-len(t.header))
		if t.budget < 1 {
			return &contentError{line: rec.line, offset: rec.at, reason: fmt.Sprintf(
				"the CSV header of %d bytes leaves no room for rows in the body limit of %d bytes", len(t.header), t.s.cfg.Limits.BodyBytes)}
		}
		t.max, t.r.max = t.budget, t.budget
		return nil
	}
}

// reopen reads again from ch's start, with half the budget.
func (t *textObject) reopen(ctx context.Context, ch chunk) error {
	t.budget = max(1, (len(ch.body)-ch.header)/2)
	at := readerAt{off: ch.start, firstLine: t.r.absLine(ch.startLine)}
	t.r.Close()
	var err error
	t.r, err = openRecords(ctx, t.s.store, t.obj, at, t.format == csvText, t.max)
	return err
}

func (t *textObject) close() {
	if t.r != nil {
		t.r.Close()
	}
}

// send decodes ch and submits it as one unit.
func (t *textObject) send(ctx context.Context, ch chunk) error {
	d, err := httpsrc.Decode(t.format.text(), bytes.NewReader(ch.body), t.s.cfg.Limits, t.s.cfg.Allocator)
	if errors.Is(err, httpsrc.ErrTooLarge) && ch.rows > 1 {
		t.s.cfg.Logger.Info("objects source: chunk decodes too large; reading it in halves", "source", t.s.cfg.Name,
			"object", t.obj.Key, "offset", ch.start, "bytes", len(ch.body)-ch.header, "rows", ch.rows)
		return errSmaller
	}
	if err != nil {
		return t.decodeError(ctx, ch, err)
	}
	defer d.Release()
	err = t.s.submit(ctx, t.ingest, t.obj.Key, t.s.unit(t.key, d.Schema, d.Batches, uint64(ch.end)), d.Rows)
	if errors.Is(err, engine.ErrInvalidUnit) {
		return t.chunkError(ctx, ch, fmt.Sprintf("the host refuses the unit of the text up to byte offset %d: %v", ch.end, err), err)
	}
	return err
}

// noRows ends an object whose rest holds no rows.
func (t *textObject) noRows(ch chunk) error {
	if ch.end != t.obj.Size {
		return invariantf("object %q: a chunk of no rows ends at %d, before the end %d", t.obj.Key, ch.end, t.obj.Size)
	}
	return errNoRows
}
