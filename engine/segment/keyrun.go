package segment

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"slices"
)

// Idempotency-key runs (the engine's key store, keystore.go). A run is an
// immutable object holding keys by their hash, sorted, in blocks, behind
// a meta section that a reader keeps in memory:
//
//	meta:    "IDKR" | u16 version=1 | u32 count | u64 min_value | u64 max_value
//	         | filter: KeyRunFilterBlocks(count) × 64 bytes (a blocked Bloom filter)
//	         | index: KeyRunBlocks(count) × [16] the first hash of each block
//	         | [32] sha256 of the meta's preceding bytes
//	block i: min(KeyRunBlockEntries, count − i·KeyRunBlockEntries) × ([16] hash | u64 value)
//	         | [32] sha256 of the block's entries
//
// Every size follows from count, which the bucket's manifest records, so
// a reader fetches the meta in one ranged GET and a block in another.
// Hashes are strictly ascending across the whole run (no duplicates).
//
// A key is stored as the first 16 bytes of its SHA-256 (KeyHashOf): 128
// bits make a collision between two of a window's keys (some 10⁸ at most)
// a chance of about 10⁻²³, and fixed-width entries need no lengths.

const (
	keyRunMagic   = "IDKR"
	KeyRunVersion = 1
	keyRunKind    = "idempotency-key run"
	// KeyRunEntriesMax bounds the keys of one run (merges stop there).
	KeyRunEntriesMax = 1 << 20
	// KeyRunBlockEntries is the keys per block: one lookup reads one.
	KeyRunBlockEntries = 512
	// KeyRunFilterBitsPerKey sizes the filter: about 0.02% false hits
	// (measured by a test), so a new key probing a window's hundred-odd
	// runs costs a block read about once in fifty.
	KeyRunFilterBitsPerKey = 20
	keyRunFilterProbes     = 10
	keyRunFilterBlockBytes = 64
	keyHashBytes           = 16
	keyEntryBytes          = keyHashBytes + 8
	keyRunHeaderBytes      = magicBytes + versionBytes + 4 + 8 + 8
)

// KeyHash is the stored form of an idempotency key.
type KeyHash [keyHashBytes]byte

// KeyHashOf hashes an idempotency key.
func KeyHashOf(key string) KeyHash {
	s := sha256.Sum256([]byte(key))
	return KeyHash(s[:keyHashBytes])
}

// KeyEntry is one key of a run: its hash and its value (the wall ms the
// key was submitted at).
type KeyEntry struct {
	Hash  KeyHash
	Value uint64
}

// KeyRunBlocks is the number of blocks of a run of count keys.
func KeyRunBlocks(count int) int { return (count + KeyRunBlockEntries - 1) / KeyRunBlockEntries }

// KeyRunFilterBlocks is the number of 64-byte filter blocks of a run.
func KeyRunFilterBlocks(count int) int {
	return max((count*KeyRunFilterBitsPerKey+keyRunFilterBlockBytes*8-1)/(keyRunFilterBlockBytes*8), 1)
}

// KeyRunMetaBytes is the size of a run's meta section.
func KeyRunMetaBytes(count int) int64 {
	return int64(keyRunHeaderBytes + KeyRunFilterBlocks(count)*keyRunFilterBlockBytes + KeyRunBlocks(count)*keyHashBytes + sumBytes)
}

// KeyRunBlockRange is the byte range of block i of a run of count keys.
func KeyRunBlockRange(count, i int) (start, length int64) {
	full := int64(KeyRunBlockEntries*keyEntryBytes + sumBytes)
	start = KeyRunMetaBytes(count) + int64(i)*full
	n := min(KeyRunBlockEntries, count-i*KeyRunBlockEntries)
	return start, int64(n*keyEntryBytes + sumBytes)
}

// KeyRunBytes is the size of a whole run of count keys.
func KeyRunBytes(count int) int64 {
	start, n := KeyRunBlockRange(count, KeyRunBlocks(count)-1)
	return start + n
}

// KeyRunMeta is what a reader keeps of a run: its filter and index.
type KeyRunMeta struct {
	Count           int
	MinValue, Value uint64 // the lowest and highest value of the run
	filter          []byte
	index           []KeyHash
}

// MemBytes is what the meta costs in memory.
func (m *KeyRunMeta) MemBytes() int64 { return int64(len(m.filter) + len(m.index)*keyHashBytes + 64) }

// MayContain reports whether the run may hold h (never false for a key
// it holds).
func (m *KeyRunMeta) MayContain(h KeyHash) bool {
	blk, bits := filterProbe(h, len(m.filter)/keyRunFilterBlockBytes)
	f := m.filter[blk*keyRunFilterBlockBytes:]
	for _, bit := range bits {
		if f[bit/8]&(1<<(bit%8)) == 0 {
			return false
		}
	}
	return true
}

// BlockOf is the block that holds h if the run does.
func (m *KeyRunMeta) BlockOf(h KeyHash) int {
	i, found := slices.BinarySearchFunc(m.index, h, func(e KeyHash, t KeyHash) int { return bytes.Compare(e[:], t[:]) })
	if found {
		return i
	}
	return max(i-1, 0)
}

// filterProbe picks h's filter block (from the high half of its first
// 8 bytes) and keyRunFilterProbes bit positions inside the block's 512
// bits, each from 9 bits of h of its own (the next 8 bytes, then the low
// half of the first): independent positions, unlike a progression, which
// shares bits between keys and doubles the false hits.
func filterProbe(h KeyHash, blocks int) (blk int, bits [keyRunFilterProbes]uint16) {
	h1 := binary.LittleEndian.Uint64(h[0:8])
	g := binary.LittleEndian.Uint64(h[8:16])
	for i := range bits {
		if i == 7 {
			g = h1 & 0xffff_ffff
		}
		bits[i] = uint16(g & (keyRunFilterBlockBytes*8 - 1))
		g >>= 9
	}
	return int(((h1 >> 32) * uint64(blocks)) >> 32), bits
}

// EncodeKeyRun returns the run object for entries (strictly ascending by
// hash, 1..KeyRunEntriesMax of them) and its meta.
func EncodeKeyRun(entries []KeyEntry) ([]byte, *KeyRunMeta, error) {
	n := len(entries)
	if n == 0 || n > KeyRunEntriesMax {
		return nil, nil, fmt.Errorf("%w: key run of %d entries, limit 1..%d", ErrTooLarge, n, KeyRunEntriesMax)
	}
	m := &KeyRunMeta{Count: n, MinValue: entries[0].Value, filter: make([]byte, KeyRunFilterBlocks(n)*keyRunFilterBlockBytes)}
	for i, e := range entries {
		if i > 0 && bytes.Compare(entries[i-1].Hash[:], e.Hash[:]) >= 0 {
			return nil, nil, fmt.Errorf("%w: key run entry %d not above entry %d", ErrInvalid, i, i-1)
		}
		m.MinValue, m.Value = min(m.MinValue, e.Value), max(m.Value, e.Value)
		m.add(e.Hash)
		if i%KeyRunBlockEntries == 0 {
			m.index = append(m.index, e.Hash)
		}
	}
	b := make([]byte, 0, KeyRunBytes(n))
	b = m.appendMeta(b)
	for i := 0; i < n; i += KeyRunBlockEntries {
		start := len(b)
		for _, e := range entries[i:min(i+KeyRunBlockEntries, n)] {
			b = append(b, e.Hash[:]...)
			b = binary.LittleEndian.AppendUint64(b, e.Value)
		}
		sum := sha256.Sum256(b[start:])
		b = append(b, sum[:]...)
	}
	return b, m, nil
}

func (m *KeyRunMeta) add(h KeyHash) {
	blk, bits := filterProbe(h, len(m.filter)/keyRunFilterBlockBytes)
	f := m.filter[blk*keyRunFilterBlockBytes:]
	for _, bit := range bits {
		f[bit/8] |= 1 << (bit % 8)
	}
}

func (m *KeyRunMeta) appendMeta(b []byte) []byte {
	start := len(b)
	b = append(b, keyRunMagic...)
	b = binary.LittleEndian.AppendUint16(b, KeyRunVersion)
	b = binary.LittleEndian.AppendUint32(b, uint32(m.Count))
	b = binary.LittleEndian.AppendUint64(b, m.MinValue)
	b = binary.LittleEndian.AppendUint64(b, m.Value)
	b = append(b, m.filter...)
	for _, h := range m.index {
		b = append(b, h[:]...)
	}
	sum := sha256.Sum256(b[start:])
	return append(b, sum[:]...)
}

// DecodeKeyRunMeta parses and verifies a run's meta section (exactly
// KeyRunMetaBytes(count) bytes) for a run the manifest says holds count
// keys.
func DecodeKeyRunMeta(name string, b []byte, count int) (*KeyRunMeta, error) {
	if count < 1 || count > KeyRunEntriesMax {
		return nil, &FormatError{Kind: keyRunKind, Object: name, Field: "count", Err: ErrCorrupt,
			Detail: fmt.Sprintf("manifest count %d outside 1..%d", count, KeyRunEntriesMax)}
	}
	if want := KeyRunMetaBytes(count); int64(len(b)) != want {
		return nil, &FormatError{Kind: keyRunKind, Object: name, Field: "meta", Err: ErrTruncated,
			Detail: fmt.Sprintf("%d bytes, a run of %d keys has %d", len(b), count, want)}
	}
	c := newCursor(keyRunKind, name, b, 0)
	c.magic("magic", keyRunMagic)
	c.version("version", KeyRunVersion)
	if err := c.failed(); err != nil {
		return nil, err
	}
	if err := checkTrailingSum(c, "meta_sha256"); err != nil {
		return nil, err
	}
	if got := c.u32("count"); c.err == nil && int(got) != count {
		c.fail("count", ErrCorrupt, "run holds %d keys, its manifest says %d", got, count)
	}
	m := &KeyRunMeta{Count: count, MinValue: c.u64("min_value"), Value: c.u64("max_value")}
	m.filter = slices.Clone(c.take("filter", KeyRunFilterBlocks(count)*keyRunFilterBlockBytes))
	m.index = make([]KeyHash, 0, KeyRunBlocks(count))
	for range KeyRunBlocks(count) {
		m.index = append(m.index, KeyHash(c.take("index", keyHashBytes)))
	}
	c.end("meta")
	if err := c.failed(); err != nil {
		return nil, err
	}
	if m.MinValue > m.Value {
		return nil, &FormatError{Kind: keyRunKind, Object: name, Field: "min_value", Offset: magicBytes + versionBytes + 4, Err: ErrCorrupt,
			Detail: fmt.Sprintf("min %d above max %d", m.MinValue, m.Value)}
	}
	return m, nil
}

// DecodeKeyRunBlock parses and verifies block i of a run (exactly the
// bytes of KeyRunBlockRange): ascending hashes, the first the index's.
func DecodeKeyRunBlock(name string, b []byte, m *KeyRunMeta, i int) ([]KeyEntry, error) {
	start, n := KeyRunBlockRange(m.Count, i)
	if i < 0 || i >= len(m.index) || int64(len(b)) != n {
		return nil, &FormatError{Kind: keyRunKind, Object: name, Field: fmt.Sprintf("block[%d]", i), Offset: start, Err: ErrTruncated,
			Detail: fmt.Sprintf("%d bytes, want %d of %d blocks", len(b), n, len(m.index))}
	}
	c := newCursor(keyRunKind, name, b, start)
	c.scope = fmt.Sprintf("block[%d].", i)
	if err := checkTrailingSum(c, "sha256"); err != nil {
		return nil, err
	}
	out := make([]KeyEntry, 0, int(n-sumBytes)/keyEntryBytes)
	for c.err == nil && c.remaining() > 0 {
		e := KeyEntry{Hash: KeyHash(c.take("hash", keyHashBytes)), Value: c.u64("value")}
		switch {
		case c.err != nil:
		case len(out) == 0 && e.Hash != m.index[i]:
			c.fail("hash", ErrCorrupt, "first hash %x, the index says %x", e.Hash, m.index[i])
		case len(out) > 0 && bytes.Compare(out[len(out)-1].Hash[:], e.Hash[:]) >= 0:
			c.fail("hash", ErrCorrupt, "hash %x not above %x", e.Hash, out[len(out)-1].Hash)
		case i+1 < len(m.index) && bytes.Compare(e.Hash[:], m.index[i+1][:]) >= 0:
			c.fail("hash", ErrCorrupt, "hash %x not below the next block's %x", e.Hash, m.index[i+1])
		case e.Value < m.MinValue || e.Value > m.Value:
			c.fail("value", ErrCorrupt, "value %d outside the run's %d..%d", e.Value, m.MinValue, m.Value)
		}
		out = append(out, e)
	}
	if err := c.failed(); err != nil {
		return nil, err
	}
	return out, nil
}

// DecodeKeyRun parses and verifies a whole run of count keys.
func DecodeKeyRun(name string, b []byte, count int) (*KeyRunMeta, []KeyEntry, error) {
	if want := KeyRunBytes(max(count, 1)); int64(len(b)) != want {
		return nil, nil, &FormatError{Kind: keyRunKind, Object: name, Field: "run", Err: ErrTruncated,
			Detail: fmt.Sprintf("%d bytes, a run of %d keys has %d", len(b), count, want)}
	}
	metaLen := KeyRunMetaBytes(count)
	m, err := DecodeKeyRunMeta(name, b[:metaLen], count)
	if err != nil {
		return nil, nil, err
	}
	out := make([]KeyEntry, 0, count)
	for i := range KeyRunBlocks(count) {
		start, n := KeyRunBlockRange(count, i)
		es, err := DecodeKeyRunBlock(name, b[start:start+n], m, i)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, es...)
	}
	return m, out, nil
}
