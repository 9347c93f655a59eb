package segment

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
)

// Offset is one source progress mark: the highest position a source has
// had committed for Key. Values only grow; the value domain is the
// source's (a Kafka offset, a byte position, 1 for "object seen").
type Offset struct {
	Key   string
	Value uint64
}

// Offsets is a canonical set of offsets.
//
// INVARIANT: sorted by Key in strictly ascending byte order (no duplicate
// keys); every Key is 1..OffsetKeyBytesMax bytes; len ≤ OffsetsEntriesMax
// once it has been encoded. A nil Offsets is the empty set.
//
// Wire form (the offsets blob):
//
//	u32 count | count × ( u16 key_len | key | u64 value )
//
// Same logical offsets ⇒ same bytes, because order is fixed by the key.
type Offsets []Offset

// Get returns the value for key.
func (o Offsets) Get(key string) (uint64, bool) {
	i, ok := o.find(key)
	if !ok {
		return 0, false
	}
	return o[i].Value, true
}

func (o Offsets) find(key string) (int, bool) {
	return slices.BinarySearchFunc(o, key, func(e Offset, k string) int {
		return strings.Compare(e.Key, k)
	})
}

// Advance returns o with key raised to at least value (max-merge of one
// entry). o's backing array may be reused.
func (o Offsets) Advance(key string, value uint64) Offsets {
	i, ok := o.find(key)
	if ok {
		o[i].Value = max(o[i].Value, value)
		return o
	}
	return slices.Insert(o, i, Offset{Key: key, Value: value})
}

// MaxMerge returns the union of a and b keeping the larger value per key,
// and of floors (floor.go) the greatest per family, without the keys it
// covers. It is commutative, associative and idempotent, so replaying a
// snapshot's offsets any number of times in any order gives the same
// view. The result is freshly allocated.
func MaxMerge(a, b Offsets) Offsets {
	out := make(Offsets, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i].Key, b[j].Key); {
		case c < 0:
			out = append(out, a[i])
			i++
		case c > 0:
			out = append(out, b[j])
			j++
		default:
			out = append(out, Offset{Key: a[i].Key, Value: max(a[i].Value, b[j].Value)})
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	return reduceFloors(append(out, b[j:]...))
}

// Covers reports whether o is at or above every offset of want: merging
// want into o would change nothing.
func (o Offsets) Covers(want Offsets) bool {
	marks := floorsOf(o)
	for _, w := range want {
		if v, ok := o.Get(w.Key); ok && v >= w.Value {
			continue
		}
		if !floorCovers(marks, w) {
			return false
		}
	}
	return true
}

// Validate reports whether o satisfies its invariant and the limits of
// a segment's offsets blob.
func (o Offsets) Validate() error { return o.validate(OffsetsEntriesMax) }

func (o Offsets) validate(entriesMax int) error {
	if len(o) > entriesMax {
		return tooLargef("offsets: %d entries, limit %d", len(o), entriesMax)
	}
	for i, e := range o {
		if len(e.Key) == 0 || len(e.Key) > OffsetKeyBytesMax {
			return invalidf("offsets: entry %d key length %d outside 1..%d", i, len(e.Key), OffsetKeyBytesMax)
		}
		if i > 0 && o[i-1].Key >= e.Key {
			return invalidf("offsets: entry %d key %q not above %q", i, e.Key, o[i-1].Key)
		}
	}
	return nil
}

// encodedLen is the byte length of o's wire form.
func (o Offsets) encodedLen() int {
	n := offsetsCountBytes
	for _, e := range o {
		n += lenPrefixBytes + len(e.Key) + 8
	}
	return n
}

// AppendOffsets appends o's canonical wire form to dst.
func AppendOffsets(dst []byte, o Offsets) ([]byte, error) {
	if err := o.Validate(); err != nil {
		return dst, err
	}
	return appendOffsetEntries(dst, o), nil
}

// appendOffsetEntries writes the wire form. REQUIRES: o is valid.
func appendOffsetEntries(dst []byte, o Offsets) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(o)))
	for _, e := range o {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(e.Key)))
		dst = append(dst, e.Key...)
		dst = binary.LittleEndian.AppendUint64(dst, e.Value)
	}
	return dst
}

// DecodeOffsets parses an offsets blob that must span all of b. name is
// used in errors; base is b's offset within its enclosing object.
func DecodeOffsets(name string, b []byte, base int64) (Offsets, error) {
	c := newCursor("offsets blob", name, b, base)
	o := c.offsets("offsets")
	c.end("offsets")
	if err := c.failed(); err != nil {
		return nil, err
	}
	return o, nil
}

// offsets reads one offsets blob at the cursor. field names it in errors.
func (c *cursor) offsets(field string) Offsets { return c.offsetsLimited(field, OffsetsEntriesMax) }

// offsetsLimited reads an offsets blob of at most limit entries.
func (c *cursor) offsetsLimited(field string, limit int) Offsets {
	// Each entry takes at least 11 bytes, so the count is also bounded by
	// what remains; that keeps the allocation proportional to the input.
	maxCount := min(limit, c.remaining()/(lenPrefixBytes+1+8))
	n := int(c.bounded(field+".count", offsetsCountBytes, uint64(maxCount)))
	if c.err != nil || n == 0 {
		return nil
	}
	keyField, valueField := field+".key", field+".value"
	// Validate and note where each key lies, then copy the blob into one
	// string the keys are substrings of: one allocation for all keys.
	begin := c.pos
	spans := make([]int32, 0, 2*n) // key start and end, relative to begin
	values := make([]uint64, 0, n)
	var prev []byte
	for i := range n {
		start := c.at()
		key := c.bytes(keyField, OffsetKeyBytesMax)
		value := c.u64(valueField)
		if c.err != nil {
			return nil
		}
		if len(key) == 0 || (i > 0 && bytes.Compare(key, prev) <= 0) {
			c.pos = int(start - c.base)
			c.fail(keyField, ErrCorrupt, "entry %d key %q empty or not above the previous key", i, key)
			return nil
		}
		keyAt := c.pos - 8 - len(key) - begin
		spans = append(spans, int32(keyAt), int32(keyAt+len(key)))
		values = append(values, value)
		prev = key
	}
	blob := string(c.buf[begin:c.pos])
	o := make(Offsets, n)
	for i := range o {
		o[i] = Offset{Key: blob[spans[2*i]:spans[2*i+1]], Value: values[i]}
	}
	return o
}
