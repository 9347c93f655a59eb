package httpsrc

import (
	"bufio"
	"io"
	"sync"
)

// limitedBody reads a request body and stops it at max bytes: it never
// asks the body for more than max+1 bytes in all, and a read that finds a
// byte past max fails with ErrTooLarge (and sets over) instead of
// handing the byte on. Every error it returns, io.EOF included, it
// returns again on every later read, so a reader that peeked at an error
// and dropped it (bufio.Reader.Peek does) still sees it.
type limitedBody struct {
	r    io.Reader
	max  int64
	n    int64 // bytes handed on; ≤ max
	over bool  // a byte past max was found
	err  error // sticky
}

func newLimitedBody(r io.Reader, max int64) *limitedBody {
	return &limitedBody{r: r, max: max}
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	// One byte past max is asked for, to tell a body of exactly max
	// bytes from a longer one.
	if room := b.max - b.n + 1; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.r.Read(p)
	if b.n+int64(n) > b.max {
		n = int(b.max - b.n)
		b.over = true
		err = tooLargef("the body is longer than %d bytes", b.max)
	}
	b.n += int64(n)
	if err != nil {
		b.err = err
	}
	return n, err
}

// remaining is how many bytes the body may still hold.
func (b *limitedBody) remaining() int64 { return b.max - b.n }

// utf8BOM is what some tools (spreadsheets exporting CSV, above all)
// write before the first byte of UTF-8 text.
const utf8BOM = "\xEF\xBB\xBF"

// textReader returns body buffered, without a leading UTF-8 byte order
// mark: a BOM would otherwise become part of the first CSV column's name
// or make the first JSON line invalid. releaseTextReader takes it back.
func textReader(body io.Reader) *bufio.Reader {
	br := textReaders.Get().(*bufio.Reader)
	br.Reset(body)
	if head, _ := br.Peek(len(utf8BOM)); string(head) == utf8BOM {
		_, _ = br.Discard(len(utf8BOM)) // the three bytes are buffered: it skips them
	}
	return br
}

// textReaders pools textReader's readers: a 64 KiB buffer allocated and
// zeroed for every request was a third of the memory decoding a 40 KB
// JSON body took.
var textReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// releaseTextReader pools br, from textReader. Nothing may use br, or
// hold a slice of what it read, after.
func releaseTextReader(br *bufio.Reader) {
	br.Reset(nil)
	textReaders.Put(br)
}
