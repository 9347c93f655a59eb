package segment

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math/bits"
)

const bitmapKind = "completion bitmap"

// Bitmap is a segment's SCBL completion bitmap: bit i is set once slice
// ordinal i has been applied to its sink.
//
// INVARIANT: len(words) == ceil(n/8); bits at positions ≥ n are zero. Bits
// are only ever set: there is no Clear, and Merge is a bitwise OR, so a
// bitmap written later never loses a bit an earlier one had.
//
// Wire form:
//
//	"SCBL" | u16 version=1 | u32 bit_count | ceil(bit_count/8) bytes
//	(bit i is bit i%8 of byte i/8, least significant first)
//	| [32] sha256 of every preceding byte
type Bitmap struct {
	n    int
	bits []byte
}

// NewBitmap returns a bitmap of n clear bits. REQUIRES: 0 ≤ n ≤ PartsMax.
func NewBitmap(n int) *Bitmap {
	if n < 0 || n > PartsMax {
		panic(fmt.Sprintf("segment: bitmap of %d bits, limit %d", n, PartsMax))
	}
	return &Bitmap{n: n, bits: make([]byte, (n+7)/8)}
}

// Len is the number of bits (the segment's part count).
func (b *Bitmap) Len() int { return b.n }

// Set sets bit i. REQUIRES: 0 ≤ i < Len().
func (b *Bitmap) Set(i SliceOrdinal) {
	if int(i) >= b.n {
		panic(fmt.Sprintf("segment: set bit %d of %d", i, b.n))
	}
	b.bits[i/8] |= 1 << (i % 8)
}

// IsSet reports whether bit i is set. REQUIRES: 0 ≤ i < Len().
func (b *Bitmap) IsSet(i SliceOrdinal) bool {
	if int(i) >= b.n {
		panic(fmt.Sprintf("segment: test bit %d of %d", i, b.n))
	}
	return b.bits[i/8]&(1<<(i%8)) != 0
}

// Count returns the number of set bits.
func (b *Bitmap) Count() int {
	n := 0
	for _, w := range b.bits {
		n += bits.OnesCount8(w)
	}
	return n
}

// AllSet reports whether every slice has been applied: the segment may be
// reclaimed.
func (b *Bitmap) AllSet() bool { return b.Count() == b.n }

// Merge ORs o into b. It can only set bits. Bitmaps of different lengths
// belong to different segments: that is an error, and b is unchanged.
func (b *Bitmap) Merge(o *Bitmap) error {
	if o.n != b.n {
		return invalidf("merge bitmap of %d bits into one of %d", o.n, b.n)
	}
	for i := range b.bits {
		b.bits[i] |= o.bits[i]
	}
	return nil
}

// Clone returns an independent copy.
func (b *Bitmap) Clone() *Bitmap {
	return &Bitmap{n: b.n, bits: append([]byte(nil), b.bits...)}
}

// Encode returns b's SCBL object.
func (b *Bitmap) Encode() []byte {
	out := make([]byte, 0, bitmapFixedBytes+len(b.bits)+sumBytes)
	out = append(out, bitmapMagic...)
	out = binary.LittleEndian.AppendUint16(out, BitmapVersion)
	out = binary.LittleEndian.AppendUint32(out, uint32(b.n))
	out = append(out, b.bits...)
	sum := sha256.Sum256(out)
	return append(out, sum[:]...)
}

// DecodeBitmap parses and verifies an SCBL object.
func DecodeBitmap(name string, data []byte) (*Bitmap, error) {
	if len(data) > BitmapBytesMax {
		return nil, &FormatError{Kind: bitmapKind, Object: name, Field: "bitmap", Err: ErrCorrupt,
			Detail: fmt.Sprintf("%d bytes, limit %d", len(data), BitmapBytesMax)}
	}
	c := newCursor(bitmapKind, name, data, 0)
	c.magic("magic", bitmapMagic)
	c.version("version", BitmapVersion)
	if err := c.failed(); err != nil {
		return nil, err
	}
	if err := checkTrailingSum(c, "sha256"); err != nil {
		return nil, err
	}
	n := int(c.bounded("bit_count", 4, PartsMax))
	raw := c.take("bits", (n+7)/8)
	c.end("bits")
	if err := c.failed(); err != nil {
		return nil, err
	}
	if n%8 != 0 && raw[len(raw)-1]>>(n%8) != 0 {
		c.pos--
		c.fail("bits", ErrCorrupt, "bits set past bit_count %d", n)
		return nil, c.err
	}
	return &Bitmap{n: n, bits: append([]byte(nil), raw...)}, nil
}
