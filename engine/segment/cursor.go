package segment

import (
	"encoding/binary"
	"fmt"
)

// cursor reads little-endian fields from a byte window of an object. Errors
// are sticky: after the first failure every read returns zero values and
// cur.err keeps the first *FormatError, which names the field and its
// absolute byte offset. A cursor never allocates more than the bytes it was
// handed, so a hostile length can cost at most a failed bounds check.
type cursor struct {
	kind   string // object kind for errors
	object string // object name for errors
	buf    []byte
	base   int64 // absolute offset of buf[0] within the object
	pos    int
	scope  string // prefix for field names, e.g. "part[3]."; set per record
	err    *FormatError
}

func newCursor(kind, object string, buf []byte, base int64) *cursor {
	return &cursor{kind: kind, object: object, buf: buf, base: base}
}

// at is the absolute offset of the next unread byte.
func (c *cursor) at() int64 { return c.base + int64(c.pos) }

func (c *cursor) remaining() int { return len(c.buf) - c.pos }

// fail records the first error; later failures are consequences of it.
func (c *cursor) fail(field string, sentinel error, format string, args ...any) {
	if c.err == nil {
		c.err = &FormatError{
			Kind: c.kind, Object: c.object, Field: c.scope + field, Offset: c.at(),
			Err: sentinel, Detail: fmt.Sprintf(format, args...),
		}
	}
}

// failed returns the sticky error as an error (nil-safe for interfaces).
func (c *cursor) failed() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

func (c *cursor) take(field string, n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > c.remaining() {
		c.fail(field, ErrTruncated, "need %d bytes, %d remain", n, c.remaining())
		return nil
	}
	b := c.buf[c.pos : c.pos+n]
	c.pos += n
	return b
}

func (c *cursor) u8(field string) uint8 {
	b := c.take(field, 1)
	if b == nil {
		return 0
	}
	return b[0]
}

func (c *cursor) u16(field string) uint16 {
	b := c.take(field, 2)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint16(b)
}

func (c *cursor) u32(field string) uint32 {
	b := c.take(field, 4)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(b)
}

func (c *cursor) u64(field string) uint64 {
	b := c.take(field, 8)
	if b == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

func (c *cursor) sum(field string) (s [sumBytes]byte) {
	copy(s[:], c.take(field, sumBytes))
	return s
}

// magic consumes a 4-byte magic and fails with ErrCorrupt if it differs.
func (c *cursor) magic(field, want string) {
	start := c.pos
	got := c.take(field, magicBytes)
	if got != nil && string(got) != want {
		c.pos = start
		c.fail(field, ErrCorrupt, "magic %q, want %q", got, want)
	}
}

// version consumes a u16 version and fails unless it equals want.
func (c *cursor) version(field string, want uint16) {
	start := c.pos
	if v := c.u16(field); c.err == nil && v != want {
		c.pos = start
		c.fail(field, ErrUnsupportedVersion, "version %d, this build reads %d", v, want)
	}
}

// versionIn consumes a u16 version and fails unless it is in lo..hi.
func (c *cursor) versionIn(field string, lo, hi uint16) uint16 {
	start := c.pos
	v := c.u16(field)
	if c.err == nil && (v < lo || v > hi) {
		c.pos = start
		c.fail(field, ErrUnsupportedVersion, "version %d, this build reads %d to %d", v, lo, hi)
	}
	return v
}

// bounded reads a length or count of the given width and fails with
// ErrCorrupt if it exceeds max. Use it for every length before using it.
func (c *cursor) bounded(field string, width int, max uint64) uint64 {
	start := c.pos
	var v uint64
	switch width {
	case 2:
		v = uint64(c.u16(field))
	case 4:
		v = uint64(c.u32(field))
	case 8:
		v = c.u64(field)
	default:
		panic(fmt.Sprintf("segment: cursor width %d", width))
	}
	if c.err == nil && v > max {
		c.pos = start
		c.fail(field, ErrCorrupt, "%d exceeds limit %d", v, max)
		return 0
	}
	return v
}

// bytes reads a u16-length-prefixed byte string of at most max bytes.
// The length prefix's field name is field with "_len" appended on failure.
func (c *cursor) bytes(field string, max int) []byte {
	start := c.pos
	n := c.u16(field)
	if c.err == nil && int(n) > max {
		c.pos = start
		c.fail(field+"_len", ErrCorrupt, "%d exceeds limit %d", n, max)
		return nil
	}
	return c.take(field, int(n))
}

// end fails unless every byte of the window was consumed: trailing bytes
// make an encoding non-canonical, and canonical bytes are what the golden
// vectors and checksums pin down.
func (c *cursor) end(field string) {
	if c.err == nil && c.remaining() != 0 {
		c.fail(field, ErrCorrupt, "%d trailing bytes", c.remaining())
	}
}
