package wal

import (
	"hash/crc32"
	"testing"

	"pgregory.net/rapid"
)

// crcIndex answers the same CRC as hashing the window directly, for
// windows of every size and position, queried in any order.
func TestCRCIndexWindows(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 6*crcStride).Draw(t, "b")
		from := rapid.IntRange(0, len(b)).Draw(t, "from")
		x := crcIndex{b: b, from: from}
		for range rapid.IntRange(1, 8).Draw(t, "queries") {
			i := rapid.IntRange(from, len(b)).Draw(t, "i")
			j := rapid.IntRange(i, len(b)).Draw(t, "j")
			if got, want := x.window(i, j), crc32.Checksum(b[i:j], castagnoli); got != want {
				t.Fatalf("window [%d, %d) of %d bytes from %d: %08x, want %08x", i, j, len(b), from, got, want)
			}
		}
	})
}

func TestXPow8n(t *testing.T) {
	// x^(8n) is what n zero bytes do to the register: hashing n zeros
	// after a prefix multiplies the prefix's CRC by it, plus the CRC of
	// the zeros alone.
	for _, n := range []int{0, 1, 2, 3, 7, 8, 255, 4096, 65537} {
		prefix := []byte("skipprd")
		zeros := make([]byte, n)
		whole := crc32.Checksum(append(append([]byte(nil), prefix...), zeros...), castagnoli)
		want := whole ^ crc32.Checksum(zeros, castagnoli)
		if got := multModP(crc32.Checksum(prefix, castagnoli), xPow8n(n)); got != want {
			t.Errorf("n %d: %08x, want %08x", n, got, want)
		}
	}
}
