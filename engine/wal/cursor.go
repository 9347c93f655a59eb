package wal

import (
	"encoding/binary"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// cursor reads little-endian fields from one record payload. Errors are
// sticky: after the first failure every read returns zero values and err
// keeps the first *FormatError, which names the field and its offset. A
// cursor never allocates for a length it reads: take only slices buf.
type cursor struct {
	name string
	buf  []byte
	pos  int
	err  *FormatError
}

func (c *cursor) remaining() int { return len(c.buf) - c.pos }

// fail records the first error at the cursor's position.
func (c *cursor) fail(field string, sentinel error, format string, args ...any) {
	if c.err == nil {
		c.err = &FormatError{Object: c.name, Field: field, Offset: int64(c.pos),
			Err: sentinel, Detail: fmt.Sprintf(format, args...)}
	}
}

func (c *cursor) take(field string, n int) []byte {
	if c.err != nil {
		return nil
	}
	if n < 0 || n > c.remaining() {
		c.fail(field, segment.ErrTruncated, "need %d bytes, %d remain", n, c.remaining())
		return nil
	}
	b := c.buf[c.pos : c.pos+n : c.pos+n]
	c.pos += n
	return b
}

func (c *cursor) u16(field string) uint16 {
	if b := c.take(field, 2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (c *cursor) u32(field string) uint32 {
	if b := c.take(field, 4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (c *cursor) u64(field string) uint64 {
	if b := c.take(field, 8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// bounded reads a u16 or u32 length or count and fails with ErrCorrupt,
// leaving the cursor on it, if it exceeds max.
func (c *cursor) bounded(field string, width int, max int) int {
	start := c.pos
	var v uint64
	switch width {
	case 2:
		v = uint64(c.u16(field))
	case 4:
		v = uint64(c.u32(field))
	default:
		panic(fmt.Sprintf("wal: cursor width %d", width))
	}
	if c.err == nil && v > uint64(max) {
		c.pos = start
		c.fail(field, segment.ErrCorrupt, "%d exceeds limit %d", v, max)
		return 0
	}
	return int(v)
}

// end fails unless every byte was consumed: trailing bytes would make the
// encoding non-canonical.
func (c *cursor) end(field string) {
	if c.err == nil && c.remaining() != 0 {
		c.fail(field, segment.ErrCorrupt, "%d trailing bytes", c.remaining())
	}
}

// failed returns the sticky error as an error (nil-safe for interfaces).
func (c *cursor) failed() error {
	if c.err == nil {
		return nil
	}
	return c.err
}
