package objects

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// utf8BOM is what some tools write before UTF-8 text. httpsrc drops it at
// the start of a body; the reader drops it at the start of an object, so
// that a chunk never carries it into the middle of a body.
const utf8BOM = "\xEF\xBB\xBF"

// jsonSpace is what a blank JSON line holds: httpsrc skips such lines.
const jsonSpace = " \t\r\n\v\f"

// recordReader reads a text object record by record: a JSON line, or a
// CSV record — lines up to one that ends with every quote closed, since
// a quoted value may hold line breaks. Cutting chunks only between
// records keeps every record whole in one body.
//
// A quote count is enough to tell a CSV record's end: in a valid file a
// '"' either opens or closes a quoted value or is one of an escaped
// pair. A file that breaks that rule makes encoding/csv fail on the
// first chunk whose count goes wrong, which holds the bad quote, so a
// wrong cut is never silent.
type recordReader struct {
	src       io.ReadCloser
	br        *bufio.Reader
	csv       bool
	max       int   // most bytes in one record, line breaks included
	origin    int64 // object offset the reader started at
	pos       int64 // object offset of the next record
	line      int   // line of the next record, relative: 1 at the reader's start
	firstLine int   // the object's line at the reader's start; 0: unknown
	rec       record
	held      bool // rec was peeked and not taken
	buf       []byte
}

// record is one record as read; text is valid until the next read.
type record struct {
	text  []byte // line breaks included
	at    int64  // object offset
	line  int    // relative line of its first line
	blank bool   // the decoder skips it: no row
}

// readerAt describes where a record reader starts: off in the object,
// which is the object's line firstLine (0: unknown).
type readerAt struct {
	off       int64
	firstLine int
}

// openRecords opens obj for reading from at. max bounds a record.
func openRecords(ctx context.Context, store Store, obj Object, at readerAt, csv bool, max int) (*recordReader, error) {
	src, err := store.Open(ctx, obj.Key, at.off)
	if err != nil {
		return nil, &storeError{err}
	}
	r := &recordReader{
		src:       src,
		br:        bufio.NewReaderSize(&exactReader{r: src, n: obj.Size - at.off, key: obj.Key}, 64<<10),
		csv:       csv,
		max:       max,
		origin:    at.off,
		pos:       at.off,
		line:      1,
		firstLine: at.firstLine,
	}
	if at.off == 0 {
		if head, _ := r.br.Peek(len(utf8BOM)); string(head) == utf8BOM {
			_, _ = r.br.Discard(len(utf8BOM)) // buffered: Discard cannot fail
			r.pos = int64(len(utf8BOM))
		}
	}
	return r, nil
}

func (r *recordReader) Close() error { return r.src.Close() }

// absLine returns the object's line of relative line rel, 0 if unknown.
func (r *recordReader) absLine(rel int) int {
	if r.firstLine == 0 {
		return 0
	}
	return r.firstLine + rel - 1
}

// peek returns the next record, io.EOF after the last; it stays next
// until take.
func (r *recordReader) peek() (record, error) {
	if r.held {
		return r.rec, nil
	}
	if err := r.read(); err != nil {
		return record{}, err
	}
	r.held = true
	return r.rec, nil
}

// take consumes the record peek returned.
func (r *recordReader) take() {
	if !r.held {
		panic("objects: take without peek") // a bug in this package
	}
	r.held = false
	r.pos += int64(len(r.rec.text))
	r.line += bytes.Count(r.rec.text, []byte{'\n'})
}

// read reads the next record into r.rec.
func (r *recordReader) read() error {
	r.buf = r.buf[:0]
	quoted := false
	for {
		piece, err := r.br.ReadSlice('\n')
		if len(r.buf)+len(piece) > r.max {
			return r.tooLong()
		}
		r.buf = append(r.buf, piece...)
		if r.csv && bytes.Count(piece, []byte{'"'})%2 == 1 {
			quoted = !quoted
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(r.buf) == 0:
			return io.EOF
		case err == io.EOF && quoted:
			return &contentError{line: r.line, offset: r.pos, reason: "a quoted value of this record is still open at the end of the object"}
		case err != nil && err != io.EOF:
			return err // a *storeError: exactReader wraps every read error
		case err == nil && quoted:
			continue // the line break is inside a quoted value
		}
		r.rec = record{text: r.buf, at: r.pos, line: r.line, blank: r.blank(r.buf)}
		return nil
	}
}

// blank reports whether the decoder skips a record: for JSON lines, one
// of only spaces; for CSV, an empty line (encoding/csv's rule).
func (r *recordReader) blank(text []byte) bool {
	if !r.csv {
		return len(bytes.Trim(text, jsonSpace)) == 0
	}
	text = bytes.TrimSuffix(text, []byte{'\n'})
	return len(bytes.TrimSuffix(text, []byte{'\r'})) == 0
}

func (r *recordReader) tooLong() error {
	what := "the line is"
	if r.csv {
		what = "the record starting on this line is (an unclosed quote?)"
	}
	return &contentError{line: r.line, offset: r.pos, reason: fmt.Sprintf(
		"%s longer than %d bytes, the most one unit may decode (chunk bytes, less a CSV header)", what, r.max)}
}

// exactReader reads an object's listed size, no more: what an object
// holds beyond it was not listed (an object is immutable; if it did
// grow, the next listing says so). An object shorter than listed, or any
// read error, is a *storeError: the store, not the data, failed.
type exactReader struct {
	r   io.Reader
	n   int64 // bytes left
	key string
	err error // sticky: bufio's Peek drops an error it saw
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	if e.n <= 0 {
		e.err = io.EOF
		return 0, e.err
	}
	if int64(len(p)) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= int64(n)
	switch {
	case err == io.EOF && e.n > 0:
		err = &storeError{fmt.Errorf("object %q ended %d bytes before its listed size", e.key, e.n)}
	case err == io.EOF:
		err = nil // the next Read says EOF
	case err != nil:
		err = &storeError{fmt.Errorf("read object %q: %w", e.key, err)}
	}
	e.err = err
	return n, err
}
