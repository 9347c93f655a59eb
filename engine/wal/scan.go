package wal

import (
	"bytes"
	"encoding/binary"
)

// Entry is one valid entry of a segment image.
type Entry struct {
	Offset  int64  // of the entry's length field within the image
	Payload []byte // aliases the image (capacity clipped to the payload)
}

// ScanResult is what Scan found in a segment image.
type ScanResult struct {
	// Entries are the valid entries from byte 0 on, in order, each
	// starting where the previous one ends.
	Entries []Entry
	// End is the offset just past the last valid entry: appends continue
	// here (after Torn, once the torn bytes are zeroed or overwritten).
	End int64
	// Torn: the bytes at End are not a valid entry, some byte after End is
	// non-zero, and no valid entry starts anywhere after End — a write
	// torn by a crash. Discard it.
	Torn bool
	// Corrupt: the bytes at End are not a valid entry, yet a valid entry
	// starts after End. Never a torn tail: halt. Nil otherwise.
	Corrupt *CorruptError
}

// Scan walks the entries of a segment file's image b (name is the file,
// for errors) from offset 0 and classifies what follows the last valid
// one; see doc.go. The bytes at an offset p are a valid entry when at
// least 4 bytes remain, the length is 1..EntryPayloadMax, the entry fits
// in b and its CRC matches. Scan does not decode payloads (DecodeRecord
// does) and never fails: damage is reported in the result.
//
// Cost: one CRC pass over the entries, one memory compare over a zero
// tail. Only when non-zero bytes follow an invalid entry does Scan look
// for a valid entry at every later byte offset: linear in the bytes after
// End (zero runs skipped, CRCs answered by a crcIndex), with an index of
// 4 bytes per 512 allocated for the search.
func Scan(name string, b []byte) ScanResult {
	var r ScanResult
	p := 0
	for {
		n, ok := entryAt(b, p)
		if !ok {
			break
		}
		start := p + lengthBytes
		r.Entries = append(r.Entries, Entry{Offset: int64(p), Payload: b[start : start+n : start+n]})
		p += EntryBytes(n)
	}
	r.End = int64(p)
	if nextNonZero(b, p) < 0 {
		return r // nothing, or only the preallocated zeros, after End
	}
	if q, ok := resync(b, p+1); ok {
		r.Corrupt = &CorruptError{Name: name, Offset: int64(p), Next: int64(q), Reason: whyInvalid(b, p)}
		return r
	}
	if n, ok := framedLen(b, p); ok && b[p+EntryBytes(n)-1] != 0 {
		// Written whole (a torn write ends in the zeros it did not
		// overwrite), yet it fails its CRC: damaged after the write.
		r.Corrupt = &CorruptError{Name: name, Offset: int64(p), Next: int64(p + EntryBytes(n)),
			Reason: "a complete entry fails its CRC (" + whyInvalid(b, p) + ")"}
		return r
	}
	r.Torn = true
	return r
}

// resync returns the first offset q ≥ from holding a valid entry whose
// payload starts with a known kind. Cost: a zero run costs a memory
// compare; every other offset a few comparisons, and the rare candidate
// whose length and kind are plausible (about 1 in 8000 offsets of random
// bytes) a CRC query of bounded cost (crcIndex).
func resync(b []byte, from int) (int, bool) {
	const entryBytesMin = lengthBytes + kindBytes + crcBytes
	crcs := crcIndex{b: b, from: from}
	for q := from; len(b)-q >= entryBytesMin; q++ {
		z := nextNonZero(b, q)
		if z < 0 {
			return 0, false
		}
		// A length field at q is zero unless it covers byte z.
		q = max(q, z-(lengthBytes-1))
		n, ok := framedLen(b, q)
		if !ok || !Kind(b[q+lengthBytes]).known() {
			continue
		}
		end := q + lengthBytes + n
		if crcs.window(q, end) == binary.LittleEndian.Uint32(b[end:]) {
			return q, true
		}
	}
	return 0, false
}

// zeroBlock is compared against, never written.
var zeroBlock [4096]byte

// nextNonZero returns the index of the first non-zero byte of b at or
// after from, or -1.
func nextNonZero(b []byte, from int) int {
	i := from
	if i < len(b) && b[i] != 0 {
		return i
	}
	for len(b)-i >= len(zeroBlock) && bytes.Equal(b[i:i+len(zeroBlock)], zeroBlock[:]) {
		i += len(zeroBlock)
	}
	for ; len(b)-i >= 8; i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return -1
}
