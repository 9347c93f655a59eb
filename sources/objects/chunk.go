package objects

import (
	"bytes"
	"io"
)

// chunk is the text one unit decodes, and the object bytes it covers.
//
// The body holds the header, then whole records, rows of them not
// blank; the rest of [start, end) is blank records.
//
// INVARIANT: start ≤ bodyAt ≤ end; the body's records fit in
// [bodyAt, end); rows ≤ the rowsMax it was cut with.
type chunk struct {
	start, end int64  // covered: the unit's offset is end
	startLine  int    // relative line of start
	body       []byte // what is decoded: the CSV header, then records
	header     int    // len of the header at the start of body
	bodyAt     int64  // object offset of body[header]
	bodyLine   int    // relative line of body[header]
	rows       int
}

// nextChunk reads the next chunk from r: records while their text fits
// budget bytes and rowsMax rows. The first row is taken whatever its
// size (r bounds it), so a chunk has rows unless the object has none
// left. Blank records never start a body — a body of blanks alone has
// no rows to decode — and blank records after a full body are covered
// without being decoded, so that the chunk ends only before a row or at
// the object's end, never leaving a tail of blanks no unit would cover.
// buf is reused for the body.
func nextChunk(r *recordReader, header []byte, budget, rowsMax int, buf []byte) (chunk, error) {
	ch := chunk{start: r.pos, startLine: r.line, body: append(buf[:0], header...), header: len(header), bodyAt: r.pos, bodyLine: r.line}
	full := false
	for {
		rec, err := r.peek()
		if err == io.EOF {
			break
		}
		if err != nil {
			return chunk{}, err
		}
		switch fits := ch.rows == 0 || len(ch.body)-ch.header+len(rec.text) <= budget && (rec.blank || ch.rows < rowsMax); {
		case rec.blank && ch.rows == 0:
			r.take() // before the first row: the body starts after it
			ch.bodyAt, ch.bodyLine = r.pos, r.line
		case rec.blank && full:
			r.take()
		case !full && fits:
			r.take()
			ch.body = append(ch.body, rec.text...)
			if !rec.blank {
				ch.rows++
			}
		case rec.blank:
			full = true
			r.take()
		default:
			ch.end = r.pos // a row that does not fit: the next chunk's first
			return ch, ch.check(rowsMax)
		}
	}
	ch.end = r.pos
	return ch, ch.check(rowsMax)
}

// check verifies the invariant of a chunk nextChunk made.
func (ch chunk) check(rowsMax int) error {
	if ch.start <= ch.bodyAt && ch.bodyAt <= ch.end && ch.end-ch.bodyAt >= int64(len(ch.body)-ch.header) && ch.rows <= rowsMax {
		return nil
	}
	return invariantf("chunk [%d, %d) with a body at %d of %d bytes (header %d), %d rows (at most %d)",
		ch.start, ch.end, ch.bodyAt, len(ch.body), ch.header, ch.rows, rowsMax)
}

// lineStart returns where line n (1-based) of text starts, or len(text)
// if text has fewer lines.
func lineStart(text []byte, n int) int {
	at := 0
	for ; n > 1; n-- {
		i := bytes.IndexByte(text[at:], '\n')
		if i < 0 {
			return len(text)
		}
		at += i + 1
	}
	return at
}
