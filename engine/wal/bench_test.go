package wal

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// Scan's cost on what recovery reads:
//
//	go test ./engine/wal -run '^$' -bench Scan
//
// BenchmarkScan32MiB is a fresh DefaultSegmentBytes segment, a few units
// and then preallocated zeros: the zero tail must cost a memory compare,
// not a search. BenchmarkScanFull32MiB is a segment full of 64 KiB units:
// the CRC pass. BenchmarkScanTorn32MiB is a fresh segment whose first
// unit, 8 MiB of random-looking bytes, was torn: every offset of it is
// searched for a valid entry (linear, thanks to crcIndex).

func BenchmarkScan32MiB(b *testing.B) {
	img := scanImage32MiB(b)
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		if r := Scan("bench", img); len(r.Entries) != 9 || r.Torn || r.Corrupt != nil {
			b.Fatalf("%d entries, torn %v", len(r.Entries), r.Torn)
		}
	}
}

func BenchmarkScanFull32MiB(b *testing.B) {
	records := []Record{&Header{SegmentBytes: DefaultSegmentBytes}}
	arrow := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	img, _ := image(b, records)
	for seq := uint64(1); len(img)+EntryBytes(len(arrow)+64) < DefaultSegmentBytes; seq++ {
		img = mustEntry(b, img, &UnitRecord{Seq: seq, Key: validKey, Arrow: arrow})
	}
	n := len(Scan("bench", img).Entries)
	img = append(img, make([]byte, DefaultSegmentBytes-len(img))...)
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		if r := Scan("bench", img); len(r.Entries) != n || r.Torn || r.Corrupt != nil {
			b.Fatalf("%d entries, torn %v", len(r.Entries), r.Torn)
		}
	}
}

func BenchmarkScanTorn32MiB(b *testing.B) {
	img, _ := image(b, []Record{&Header{SegmentBytes: DefaultSegmentBytes}})
	end := len(img)
	arrow := make([]byte, 8<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range arrow {
		arrow[i] = byte(rng.Uint32())
	}
	img = mustEntry(b, img, &UnitRecord{Seq: 1, Key: validKey, Arrow: arrow})
	img = img[:len(img)-1000] // torn before its last bytes
	img = append(img, make([]byte, DefaultSegmentBytes-len(img))...)
	b.SetBytes(int64(len(img)))
	for b.Loop() {
		if r := Scan("bench", img); r.End != int64(end) || !r.Torn {
			b.Fatalf("end %d torn %v corrupt %v", r.End, r.Torn, r.Corrupt)
		}
	}
}
