package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"

	"github.com/skipprd/skipprd/engine"
)

// errBodyRevoked is what a borrowed body returns once its request is over.
var errBodyRevoked = errors.New("storage: request body read after the request ended")

// borrowedBody is a request body over a buffer the engine lends until done
// runs. net/http may keep reading a request body after RoundTrip returns
// (an early response, a cancelled request: "may do so in a separate
// goroutine even after RoundTrip returns"), and the SDK wraps the body in
// its own readers. Without this guard, a transport goroutine could still
// be reading the engine's buffer while the engine, already told the
// request is done, reuses it. revoke waits for any read in progress and
// makes every later read fail, so after revoke the buffer is untouched.
//
// It is an io.ReadSeeker because SigV4 hashes the payload over plain HTTP
// and rewinds it before sending.
type borrowedBody struct {
	mu      sync.Mutex
	r       *bytes.Reader
	revoked bool
}

func newBorrowedBody(p []byte) *borrowedBody {
	return &borrowedBody{r: bytes.NewReader(p)}
}

func (b *borrowedBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.revoked {
		return 0, errBodyRevoked
	}
	return b.r.Read(p)
}

func (b *borrowedBody) Seek(offset int64, whence int) (int64, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.revoked {
		return 0, errBodyRevoked
	}
	return b.r.Seek(offset, whence)
}

// revoke ends the loan. Call it before posting done.
func (b *borrowedBody) revoke() {
	b.mu.Lock()
	b.revoked = true
	b.mu.Unlock()
}

// readLimited reads a response body of at most limit bytes. declared is
// the Content-Length (-1 when absent). A declared length over the limit is
// refused before reading a byte; the read itself goes through an
// io.LimitReader of limit+1, so a body longer than it claims (or a
// chunked body with no length) costs at most limit+1 bytes of memory
// before it is refused.
func readLimited(body io.Reader, declared, limit int64) ([]byte, error) {
	if declared > limit {
		return nil, fmt.Errorf("%d bytes, limit %d: %w", declared, limit, engine.ErrTooLarge)
	}
	// One spare byte, so reading an honest body to EOF never reallocates.
	capacity := int64(512)
	if declared >= 0 {
		capacity = declared + 1
	}
	buf, err := readAll(io.LimitReader(body, limit+1), make([]byte, 0, capacity))
	if err != nil {
		return nil, err
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("more than %d bytes: %w", limit, engine.ErrTooLarge)
	}
	if declared >= 0 && int64(len(buf)) != declared {
		return nil, fmt.Errorf("body has %d bytes, Content-Length %d: %w", len(buf), declared, io.ErrUnexpectedEOF)
	}
	return buf, nil
}

// readAll is io.ReadAll into a caller-sized buffer.
func readAll(r io.Reader, buf []byte) ([]byte, error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)] // let append pick the growth
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// totalSize returns the object's total size from a Content-Range header
// ("bytes 3-6/10" → 10), or fallback when the header is absent or the
// total is unknown ("*"). For a ranged GET, ObjectInfo.Size still
// describes the stored object, not the slice that was read.
func totalSize(contentRange string, fallback int64) int64 {
	_, total, ok := strings.Cut(contentRange, "/")
	if !ok {
		return fallback
	}
	size, err := strconv.ParseInt(total, 10, 64)
	if err != nil {
		return fallback
	}
	return size
}
