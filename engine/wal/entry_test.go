package wal

import (
	"bytes"
	"encoding/binary"
	"testing"

	"pgregory.net/rapid"
)

// crc32cBitwise is CRC-32C written out from its definition (reflected
// polynomial 0x82F63B78, init and final xor all ones), independent of
// hash/crc32's tables.
func crc32cBitwise(b []byte) uint32 {
	crc := ^uint32(0)
	for _, x := range b {
		crc ^= uint32(x)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestEntryFraming(t *testing.T) {
	if got := crc32cBitwise([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("reference CRC-32C check value %08x, want e3069283", got)
	}
	rapid.Check(t, func(t *rapid.T) {
		payload := rapid.SliceOfN(rapid.Byte(), 1, 300).Draw(t, "payload")
		prefix := rapid.SliceOfN(rapid.Byte(), 0, 5).Draw(t, "prefix")
		b := AppendEntry(bytes.Clone(prefix), payload)
		if !bytes.Equal(b[:len(prefix)], prefix) {
			t.Fatal("AppendEntry changed dst")
		}
		e := b[len(prefix):]
		if len(e) != EntryBytes(len(payload)) {
			t.Fatalf("%d bytes, EntryBytes says %d", len(e), EntryBytes(len(payload)))
		}
		n := len(payload)
		if binary.LittleEndian.Uint32(e) != uint32(n) || !bytes.Equal(e[4:4+n], payload) {
			t.Fatal("length or payload misplaced")
		}
		// The checksum covers the length bytes, then the payload.
		if got, want := binary.LittleEndian.Uint32(e[4+n:]), crc32cBitwise(e[:4+n]); got != want {
			t.Fatalf("crc %08x, want CRC-32C of length+payload %08x", got, want)
		}
	})
	for _, n := range []int{0, EntryPayloadMax + 1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("AppendEntry of %d bytes did not panic", n)
				}
			}()
			AppendEntry(nil, make([]byte, n))
		}()
	}
}
