package segment

import (
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"sort"
)

// Streaming a body that is too large to hold: the reader hashes every
// byte in order through a StreamCheck, keeps only the windows it needs,
// and once the check passes opens a Body over those windows alone.

// StreamCheck verifies a body read front to back against the index of
// its commit marker.
type StreamCheck struct {
	name   string
	marker *Index
	h      hash.Hash
	n      int64
}

// NewStreamCheck starts checking a body against marker.
func NewStreamCheck(name string, marker *Index) *StreamCheck {
	return &StreamCheck{name: name, marker: marker, h: sha256.New()}
}

// Write feeds the next bytes of the body.
func (c *StreamCheck) Write(p []byte) {
	if rest := c.marker.BodyBytes - sumBytes - c.n; rest > 0 {
		c.h.Write(p[:min(int64(len(p)), rest)])
	}
	c.n += int64(len(p))
}

// Done reports whether exactly the committed body went through.
func (c *StreamCheck) Done() error {
	if c.n != c.marker.BodyBytes {
		return &FormatError{Kind: bodyKind, Object: c.name, Field: "body", Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes streamed, commit marker says %d", c.n, c.marker.BodyBytes)}
	}
	var got [sumBytes]byte
	c.h.Sum(got[:0])
	if got != c.marker.BodySum {
		return &FormatError{Kind: bodyKind, Object: c.name, Field: "footer.sha256", Offset: c.n - sumBytes,
			Err: ErrChecksum, Detail: fmt.Sprintf("body hashes to %x, marker says %x", got[:8], c.marker.BodySum[:8])}
	}
	return nil
}

// Window is a byte range of a body and its bytes.
type Window struct {
	Off   int64
	Bytes []byte
}

// WindowBody opens a body from the windows a stream kept. REQUIRES: the
// windows came from a stream whose StreamCheck.Done returned nil, and
// cover every PART the caller will read (ReadSlice fails on bytes outside
// them).
func WindowBody(name string, marker *Index, windows []Window) *Body {
	sorted := append([]Window(nil), windows...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Off < sorted[j].Off })
	return &Body{name: name, r: windowReader(sorted), Index: marker}
}

// PartWindow is the byte range [Off, Off+Len) holding PART e's payloads.
func PartWindow(e IndexEntry) (off, length int64) { return e.ArrowStart, e.End() - e.ArrowStart }

// windowReader serves reads that fall inside one window.
type windowReader []Window

func (w windowReader) ReadAt(p []byte, off int64) (int, error) {
	i := sort.Search(len(w), func(i int) bool { return w[i].Off+int64(len(w[i].Bytes)) > off })
	if i == len(w) || off < w[i].Off || off+int64(len(p)) > w[i].Off+int64(len(w[i].Bytes)) {
		return 0, fmt.Errorf("segment: read [%d,%d) outside the streamed windows: %w", off, off+int64(len(p)), io.ErrUnexpectedEOF)
	}
	return copy(p, w[i].Bytes[off-w[i].Off:]), nil
}

// EncodedBody opens a body the caller encoded itself: body is the
// encoder's output and ix the index the encoder returned, so there is
// nothing to verify. (A body read back from storage goes through
// OpenBody or CheckBody.)
func EncodedBody(name string, ix *Index, body []byte) *Body {
	return &Body{name: name, r: Bytes(body), Index: ix}
}

// Detached returns b read through a plain io.ReaderAt: a slice read from
// it copies its PART's bytes instead of pointing into b's (ReadSlice reads
// an in-memory body in place), so it holds only its own bytes once b is
// let go — what a compaction job that spans many segments needs, or it
// would keep every one of their bodies alive.
func (b *Body) Detached() *Body { return &Body{name: b.name, r: readerOnly{b.r}, Index: b.Index} }

// readerOnly hides the concrete type of an io.ReaderAt.
type readerOnly struct{ io.ReaderAt }
