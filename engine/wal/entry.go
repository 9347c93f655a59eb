package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
)

// EntryBytes is the framed size of a payload of payloadLen bytes.
func EntryBytes(payloadLen int) int { return lengthBytes + payloadLen + crcBytes }

// AppendEntry appends payload framed as an entry to dst:
// u32 length | payload | u32 CRC-32C over the length bytes and the payload.
//
// REQUIRES: 1 ≤ len(payload) ≤ EntryPayloadMax (panics otherwise: Scan
// would not read the entry back). The record encoders' payloads always
// satisfy it.
func AppendEntry(dst, payload []byte) []byte {
	if len(payload) == 0 || len(payload) > EntryPayloadMax {
		panic(fmt.Sprintf("wal: entry payload of %d bytes, want 1..%d", len(payload), EntryPayloadMax))
	}
	dst = slices.Grow(dst, EntryBytes(len(payload)))
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = append(dst, payload...)
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// framedLen returns the payload length the bytes at b[p:] announce, if
// it is 1..EntryPayloadMax and the entry fits in b. No allocation: it is
// the scan's inner loop.
func framedLen(b []byte, p int) (n int, ok bool) {
	rest := len(b) - p
	if rest < lengthBytes {
		return 0, false
	}
	l := binary.LittleEndian.Uint32(b[p:])
	if l == 0 || l > EntryPayloadMax || int(l) > rest-lengthBytes-crcBytes {
		return 0, false
	}
	return int(l), true
}

// entryAt returns the payload length of the valid entry at b[p:], or
// ok = false: a plausible length, and a CRC that matches.
func entryAt(b []byte, p int) (n int, ok bool) {
	n, ok = framedLen(b, p)
	if !ok {
		return 0, false
	}
	end := p + lengthBytes + n
	return n, crc32.Checksum(b[p:end], castagnoli) == binary.LittleEndian.Uint32(b[end:])
}

// whyInvalid says why entryAt refused the bytes at p.
func whyInvalid(b []byte, p int) string {
	rest := len(b) - p
	if rest < lengthBytes {
		return fmt.Sprintf("%d bytes left, a length takes %d", rest, lengthBytes)
	}
	l := binary.LittleEndian.Uint32(b[p:])
	switch {
	case l == 0:
		return "length 0"
	case l > EntryPayloadMax:
		return fmt.Sprintf("length %d exceeds limit %d", l, EntryPayloadMax)
	case int(l) > rest-lengthBytes-crcBytes:
		return fmt.Sprintf("entry of %d bytes runs past the end (%d bytes left)", EntryBytes(int(l)), rest)
	}
	end := p + lengthBytes + int(l)
	return fmt.Sprintf("crc32c %08x, stored %08x", crc32.Checksum(b[p:end], castagnoli), binary.LittleEndian.Uint32(b[end:]))
}
