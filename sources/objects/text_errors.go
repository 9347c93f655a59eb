package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// Errors of a text object name the object's own line and byte offset:
// httpsrc numbers lines from the start of the body it decoded — a chunk,
// after a CSV header — so its lines are translated here.

// readError turns a fault of the object's bytes, found while reading
// it, into an *ObjectError; other errors pass as they are.
func (t *textObject) readError(ctx context.Context, err error) error {
	var ce *contentError
	if !errors.As(err, &ce) {
		return err
	}
	return t.objectError(t.line(ctx, ce.line), ce.offset, "", ce.reason, ce.err)
}

// decodeError turns what httpsrc.Decode returned for ch into an
// *ObjectError at the object's line.
func (t *textObject) decodeError(ctx context.Context, ch chunk, err error) error {
	var ie *httpsrc.InputError
	if !errors.As(err, &ie) {
		// Too large with a single row, or a fault of no line: the row.
		return t.chunkError(ctx, ch, err.Error(), err)
	}
	if ie.Line == 0 {
		return t.chunkError(ctx, ch, ie.Reason, ie)
	}
	var line int
	var off int64
	if hdrLines := bytes.Count(t.header, []byte{'\n'}); ie.Line <= hdrLines {
		line = t.headerLine + ie.Line - 1 // the header was read from the object's start
		off = t.headerAt + int64(lineStart(t.header, ie.Line))
	} else {
		n := ie.Line - hdrLines // the line within the records
		line = t.line(ctx, ch.bodyLine+n-1)
		off = ch.bodyAt + int64(lineStart(ch.body[ch.header:], n))
	}
	return t.objectError(line, off, ie.Column, ie.Reason, inputError(ie, line))
}

// chunkError is a fault of ch as a whole, placed at its first row.
func (t *textObject) chunkError(ctx context.Context, ch chunk, reason string, err error) error {
	if ch.end > ch.bodyAt && ch.rows > 1 {
		reason = fmt.Sprintf("%s (in the text from here to byte offset %d)", reason, ch.end)
	}
	return t.objectError(t.line(ctx, ch.bodyLine), ch.bodyAt, "", reason, err)
}

func (t *textObject) objectError(line int, off int64, field, reason string, err error) *ObjectError {
	return &ObjectError{Source: t.s.cfg.Name, Object: t.obj.Key, Line: line, Offset: off, RowGroup: -1,
		Field: field, Reason: reason, Err: err}
}

// line returns the object's line of the reader's relative line rel. A
// reader that started inside the object (a resumed one) does not know
// its first line; only for an error message, the lines before it are
// counted. 0 if they cannot be: the message then names the byte offset
// alone, which is always true.
func (t *textObject) line(ctx context.Context, rel int) int {
	if t.r.firstLine == 0 && t.r.origin > 0 {
		n, err := countLines(ctx, t.s.store, t.obj, t.r.origin)
		if err != nil {
			t.s.cfg.Logger.Warn("objects source: cannot count lines for an error message", "source", t.s.cfg.Name,
				"object", t.obj.Key, "error", err)
			return 0
		}
		t.r.firstLine = n + 1
	}
	return t.r.absLine(rel)
}

// countLines counts the line breaks in obj's first upto bytes.
func countLines(ctx context.Context, store Store, obj Object, upto int64) (int, error) {
	rc, err := store.Open(ctx, obj.Key, 0)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	var c lineCounter
	if _, err := io.CopyN(&c, rc, upto); err != nil {
		return 0, err
	}
	return c.n, nil
}

type lineCounter struct{ n int }

func (c *lineCounter) Write(p []byte) (int, error) {
	c.n += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}
