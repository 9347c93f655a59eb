package httpsrc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// lineReader splits a body into lines of at most max bytes each, not
// counting the line break ("\n" or "\r\n"). It holds one line at a time:
// a longer line fails as soon as max+2 of its bytes have been read, so a
// body without line breaks never costs more than that.
type lineReader struct {
	br   *bufio.Reader
	max  int
	line int    // 1-based number of the line last returned, or being read
	buf  []byte // a line that spans the bufio buffer; reused
}

func newLineReader(body io.Reader, max int) *lineReader {
	return &lineReader{br: textReader(body), max: max}
}

// release gives back the reader's buffer; no line it returned may be
// used after.
func (l *lineReader) release() { releaseTextReader(l.br) }

// next returns the next line without its line break, valid until the
// next call; io.EOF after the last one. A line longer than max is an
// *InputError naming it.
func (l *lineReader) next() ([]byte, error) {
	l.line++
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		// max+2: room for the line break, trimmed below.
		if len(l.buf)+len(chunk) > l.max+2 {
			return nil, l.tooLong()
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			l.buf = append(l.buf, chunk...)
			continue
		}
		line := chunk
		if len(l.buf) > 0 {
			l.buf = append(l.buf, chunk...)
			line = l.buf
		}
		switch {
		case err == io.EOF && len(line) == 0:
			return nil, io.EOF
		case err != nil && err != io.EOF:
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > l.max {
			return nil, l.tooLong()
		}
		return line, nil
	}
}

func (l *lineReader) tooLong() error {
	return inputErrorf(l.line, "", "line %d is longer than %d bytes", l.line, l.max)
}
