package wal

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
	"pgregory.net/rapid"
)

// checkEntries fails unless got are exactly the entries of b at offsets.
func checkEntries(t tb, b []byte, got []Entry, offsets []int) {
	t.Helper()
	if len(got) != len(offsets) {
		t.Fatalf("%d entries, want %d", len(got), len(offsets))
	}
	for i, e := range got {
		if e.Offset != int64(offsets[i]) {
			t.Fatalf("entry %d at %d, want %d", i, e.Offset, offsets[i])
		}
		n := int(binary.LittleEndian.Uint32(b[offsets[i]:]))
		if !bytes.Equal(e.Payload, b[offsets[i]+4:offsets[i]+4+n]) {
			t.Fatalf("entry %d: payload differs", i)
		}
	}
}

func TestScanIntactImage(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, offsets, dataEnd := drawImage(t)
		r := Scan("s", b)
		checkEntries(t, b, r.Entries, offsets)
		if r.End != int64(dataEnd) || r.Torn || r.Corrupt != nil {
			t.Fatalf("end %d torn %v corrupt %v; want end %d, clean", r.End, r.Torn, r.Corrupt, dataEnd)
		}
		for i, e := range r.Entries {
			if _, err := DecodeRecord(fmt.Sprint("entry ", i), e.Payload); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// A crash tears the last write: the image ends (or turns to zeros, in a
// preallocated file) anywhere inside the last entry. Scan returns the
// intact prefix and calls the rest torn, never corrupt.
func TestScanTornTail(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, offsets, dataEnd := drawImage(t)
		last := offsets[len(offsets)-1]
		cut := rapid.IntRange(last, dataEnd-1).Draw(t, "cut")
		torn := bytes.Clone(b[:cut])
		if rapid.Bool().Draw(t, "preallocated") {
			torn = append(torn, make([]byte, rapid.IntRange(0, 2*(dataEnd-last)).Draw(t, "zeros"))...)
		}
		if len(torn) >= dataEnd && bytes.Equal(torn[last:dataEnd], b[last:dataEnd]) {
			// The cut took only zero bytes the entry ends with and the
			// preallocated zeros gave them back: the entry is whole, no
			// tear (found by rapid: a last byte 0x00, cut off, one zero).
			t.Skip("the zeros restored the entry: not a tear")
		}
		r := Scan("s", torn)
		checkEntries(t, torn, r.Entries, offsets[:len(offsets)-1])
		if r.Corrupt != nil {
			t.Fatalf("a torn tail reads as corruption: %v", r.Corrupt)
		}
		nonZero := bytes.ContainsFunc(torn[last:], func(r rune) bool { return r != 0 })
		if r.End != int64(last) || r.Torn != nonZero {
			t.Fatalf("end %d torn %v; want end %d torn %v", r.End, r.Torn, last, nonZero)
		}
	})
}

// One flipped bit: inside a non-last entry it is corruption, reported at
// that entry, with the next entry found (never a silently shorter log);
// inside the last entry, past its length field, it is corruption too
// unless it zeroed the entry's last byte (then it reads as a torn write,
// the one case media damage cannot be told from a crash); in the zero
// tail it is a torn tail after every entry.
func TestScanBitFlip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		b, offsets, dataEnd := drawImage(t)
		b = append(b, 0, 0, 0, 0) // at least a little tail
		bit := rapid.IntRange(0, 8*len(b)-1).Draw(t, "bit")
		at := bit / 8
		bad := bytes.Clone(b)
		bad[at] ^= 1 << (bit % 8)
		r := Scan("s", bad)
		hit := len(offsets) // the entry holding the flipped byte
		for i := len(offsets) - 1; i >= 0 && at < dataEnd; i-- {
			if at >= offsets[i] {
				hit = i
				break
			}
		}
		switch {
		case hit == len(offsets): // the zero tail
			checkEntries(t, bad, r.Entries, offsets)
			if r.End != int64(dataEnd) || !r.Torn || r.Corrupt != nil {
				t.Fatalf("flip in the tail: end %d torn %v corrupt %v", r.End, r.Torn, r.Corrupt)
			}
		case hit == len(offsets)-1:
			checkEntries(t, bad, r.Entries, offsets[:hit])
			if r.End != int64(offsets[hit]) || r.Torn == (r.Corrupt != nil) {
				t.Fatalf("flip in the last entry: end %d torn %v corrupt %v", r.End, r.Torn, r.Corrupt)
			}
			if at >= offsets[hit]+4 && bad[dataEnd-1] != 0 && r.Corrupt == nil {
				t.Fatalf("flip at %d in the last entry [%d, %d), its last byte intact: read as torn, want corruption",
					at, offsets[hit], dataEnd)
			}
		default:
			checkEntries(t, bad, r.Entries, offsets[:hit])
			c := r.Corrupt
			if r.End != int64(offsets[hit]) || r.Torn || c == nil {
				t.Fatalf("flip in entry %d of %d: end %d torn %v corrupt %v; want corruption",
					hit, len(offsets), r.End, r.Torn, c)
			}
			if c.Offset != r.End || c.Next != int64(offsets[hit+1]) || c.Name != "s" {
				t.Fatalf("corruption %+v; want at %d, next %d", c, offsets[hit], offsets[hit+1])
			}
		}
	})
}

func TestScanCases(t *testing.T) {
	header := mustEntry(t, nil, &Header{SegmentBytes: DefaultSegmentBytes})
	flushed := mustEntry(t, nil, &FlushedRecord{Snapshot: SnapshotRef{1, 2}})
	unknownKind := AppendEntry(nil, []byte{9, 1, 2, 3})
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x10
		return b
	}
	zeros := func(n int) []byte { return make([]byte, n) }
	// A payload of exactly 16 MiB: its length field is 00 00 00 01, so
	// after zeros its first non-zero byte is the length's last.
	big := make([]byte, 1<<24)
	big[0] = byte(KindFlushed)
	bigEntry := AppendEntry(nil, big)
	for _, c := range []struct {
		name    string
		in      []byte
		entries int
		end     int
		torn    bool
		next    int // > 0: want Corrupt with this Next
	}{
		{"empty", nil, 0, 0, false, 0},
		{"all zeros", zeros(1000), 0, 0, false, 0},
		{"one entry, no tail", header, 1, len(header), false, 0},
		{"one entry, zeros", cat(header, zeros(100)), 1, len(header), false, 0},
		{"1-3 stray bytes", cat(header, []byte{0, 7}), 1, len(header), true, 0},
		{"stray byte far in the zeros", cat(header, zeros(9000), []byte{1}, zeros(10)), 1, len(header), true, 0},
		{"damaged first entry before a good one", cat(flip(header, 10), flushed), 0, 0, false, len(header)},
		{"zeroed entry before a good one", cat(header, zeros(len(flushed)), flushed), 1, len(header), false, len(header) + len(flushed)},
		{"garbage then a good entry after zeros", cat(header, []byte{1, 2, 3}, zeros(5000), flushed, zeros(64)), 1, len(header), false, len(header) + 3 + 5000},
		{"good entry one byte after a stray byte", cat(header, []byte{0xff}, flushed), 1, len(header), false, len(header) + 1},
		{"good 16 MiB entry after zeros", cat(header, zeros(8), bigEntry), 1, len(header), false, len(header) + 8},
		{"length past the limit", cat(header, []byte{0, 0, 0, 0x10}), 1, len(header), true, 0},
		{"length past the end", header[:len(header)-1], 0, 0, true, 0},
		// Scan frames, it does not decode: a well-framed entry of an
		// unknown kind is an entry (DecodeRecord refuses it) …
		{"unknown kind is framed", cat(header, unknownKind), 2, len(header) + len(unknownKind), false, 0},
		// … but does not count as a valid entry after damage.
		// (a damaged complete entry is corruption by itself, see below).
		{"unknown kind after damage", cat(flip(header, 10), unknownKind), 0, 0, false, len(header)},
		{"unknown kind after a torn entry", cat(header[:len(header)-1], []byte{0}, unknownKind[:3]), 0, 0, true, 0},
		// The last entry written whole, then damaged: not a torn write.
		{"damaged last entry", cat(flushed, flip(flushed, 6), zeros(64)), 1, len(flushed), false, 2 * len(flushed)},
		// The last entry torn: its tail still holds the zeros it did not
		// overwrite.
		{"torn last entry", cat(flushed, flushed[:len(flushed)-3], zeros(64)), 1, len(flushed), true, 0},
	} {
		r := Scan(c.name, c.in)
		var next int64
		if r.Corrupt != nil {
			next = r.Corrupt.Next
		}
		if len(r.Entries) != c.entries || r.End != int64(c.end) || r.Torn != c.torn || next != int64(c.next) {
			t.Errorf("%s: %d entries, end %d, torn %v, corrupt %v; want %d, %d, %v, next %d",
				c.name, len(r.Entries), r.End, r.Torn, r.Corrupt, c.entries, c.end, c.torn, c.next)
		}
	}
}

func TestCorruptErrorIsCorrupt(t *testing.T) {
	header := mustEntry(t, nil, &Header{SegmentBytes: DefaultSegmentBytes})
	b := append(bytes.Clone(header), header...)
	b[3] ^= 0x10 // the first length: 43 → 43 + 1<<28, past EntryPayloadMax
	r := Scan("wal/partition-2/segment-000000000009.wal", b)
	if r.Corrupt == nil {
		t.Fatal("no corruption reported")
	}
	var err error = r.Corrupt
	if !errors.Is(err, segment.ErrCorrupt) {
		t.Fatalf("%v does not match segment.ErrCorrupt", err)
	}
	msg := err.Error()
	for _, want := range []string{"wal/partition-2/segment-000000000009.wal", "byte 0", fmt.Sprintf("byte %d", len(header)), "exceeds limit"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not contain %q", msg, want)
		}
	}
}

// scanImage32MiB is a DefaultSegmentBytes file with a header and a few
// units at the start and preallocated zeros after.
func scanImage32MiB(t tb) []byte {
	records := []Record{&Header{Partition: 3, Segment: 11, FirstSeq: 1, SegmentBytes: DefaultSegmentBytes}}
	for i := range 8 {
		records = append(records, &UnitRecord{Seq: uint64(i + 1), Key: validKey, Arrow: bytes.Repeat([]byte{byte(i + 1)}, 4096)})
	}
	b, _ := image(t, records)
	return append(b, make([]byte, DefaultSegmentBytes-len(b))...)
}

// The preallocated tail is skipped, not searched byte by byte.
func TestScanZeroTailIsFast(t *testing.T) {
	b := scanImage32MiB(t)
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		r := Scan("s", b)
		best = min(best, time.Since(start))
		if len(r.Entries) != 9 || r.Torn || r.Corrupt != nil {
			t.Fatalf("%d entries, torn %v, corrupt %v", len(r.Entries), r.Torn, r.Corrupt)
		}
	}
	if best > 50*time.Millisecond {
		t.Fatalf("scanning a 32 MiB segment with a zero tail took %v, want well under 100ms", best)
	}
}
