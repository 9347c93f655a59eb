package wal

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// segFile is one segment file of a partition test: its number and image.
type segFile struct {
	num uint64
	b   []byte
}

func hdr(num, first uint64) *Header {
	return &Header{Partition: 3, Segment: num, FirstSeq: first, SegmentBytes: DefaultSegmentBytes}
}

func unitRec(seq uint64) *UnitRecord {
	return &UnitRecord{Seq: seq, Key: validKey, Arrow: []byte("ipc")}
}

// file frames records as segment num's image.
func file(t *testing.T, num uint64, recs ...Record) segFile {
	t.Helper()
	b, _ := image(t, recs)
	return segFile{num, b}
}

// scanAll scans files in order and returns what the hooks saw: units by
// sequence (dropped ones removed), seals, flushed records, and the torn
// files.
func scanAll(files []segFile) (s *PartitionScan, units []uint64, events []string, torn []uint64) {
	s = NewPartitionScan(3)
	h := PartitionHooks{
		Unit: func(_ uint64, r *UnitRecord) { units = append(units, r.Seq) },
		Seal: func(seg uint64, r *SealRecord) { events = append(events, "seal") },
		Flushed: func(seg uint64, r *FlushedRecord) {
			events = append(events, "flushed")
		},
		Drop: func(seq uint64) { units = slices.DeleteFunc(units, func(u uint64) bool { return u == seq }) },
	}
	for _, f := range files {
		if s.Add(f.num, "seg", f.b, h) {
			torn = append(torn, f.num)
		}
	}
	return s, units, events, torn
}

func TestPartitionScan(t *testing.T) {
	seal := &SealRecord{Snapshot: SnapshotRef{1, 1}, Ranges: []SeqRange{{1, 2}}}
	flushed := &FlushedRecord{Snapshot: SnapshotRef{1, 1}}
	torn := func(f segFile) segFile { f.b = append(f.b, 0x40, 0, 0, 0, 9); return f }
	for _, c := range []struct {
		name   string
		files  func(t *testing.T) []segFile
		units  []uint64
		events []string
		next   uint64
		halted string // a substring of the reason; "" = clean
		tornIn []uint64
	}{
		{"two files in order", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(1, 1), unitRec(1), unitRec(2), seal), file(t, 2, hdr(2, 3), unitRec(3), flushed)}
		}, []uint64{1, 2, 3}, []string{"seal", "flushed"}, 4, "", nil},
		{"older files deleted", func(t *testing.T) []segFile {
			return []segFile{file(t, 7, hdr(7, 40), unitRec(40), unitRec(41))}
		}, []uint64{40, 41}, nil, 42, "", nil},
		{"a poisoned batch superseded", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(1, 1), unitRec(1), unitRec(2), unitRec(3)), file(t, 2, hdr(2, 2), unitRec(2))}
		}, []uint64{1, 2}, nil, 3, "", nil},
		{"everything superseded", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(1, 5), unitRec(5), unitRec(6)), file(t, 2, hdr(2, 5))}
		}, nil, nil, 5, "", nil},
		{"a torn tail", func(t *testing.T) []segFile {
			return []segFile{torn(file(t, 1, hdr(1, 1), unitRec(1)))}
		}, []uint64{1}, nil, 2, "", []uint64{1}},
		{"a gap", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(1, 1), unitRec(1)), file(t, 2, hdr(2, 5), unitRec(5))}
		}, []uint64{1}, nil, 2, "(a gap)", nil},
		{"a sequence skipped", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(1, 1), unitRec(1), unitRec(3))}
		}, []uint64{1}, nil, 1, "expected 2", nil},
		{"another file's header", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(9, 1), unitRec(1))}
		}, nil, nil, 1, "header names partition 3 segment 9", nil},
		{"no header", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, unitRec(1))}
		}, nil, nil, 1, "first entry is not a header", nil},
		{"a second header", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, hdr(1, 1), unitRec(1), hdr(1, 2))}
		}, []uint64{1}, nil, 1, "a header at offset", nil},
		{"nothing read after a halt", func(t *testing.T) []segFile {
			return []segFile{file(t, 1, unitRec(1)), file(t, 2, hdr(2, 1), unitRec(1))}
		}, nil, nil, 1, "first entry is not a header", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, units, events, tornIn := scanAll(c.files(t))
			if !slices.Equal(units, c.units) || !slices.Equal(events, c.events) || s.NextSeq != c.next || !slices.Equal(tornIn, c.tornIn) {
				t.Fatalf("units %v events %v next %d torn %v; want %v %v %d %v", units, events, s.NextSeq, tornIn, c.units, c.events, c.next, c.tornIn)
			}
			if s.Units() != uint64(len(units)) {
				t.Fatalf("Units() = %d, the hooks hold %d", s.Units(), len(units))
			}
			switch {
			case c.halted == "" && s.Halted != nil:
				t.Fatalf("halted: %v", s.Halted)
			case c.halted != "" && (s.Halted == nil || !strings.Contains(s.Halted.Error(), c.halted) || !errors.Is(s.Halted, ErrPartitionDamaged)):
				t.Fatalf("halted %v, want a damage naming %q", s.Halted, c.halted)
			}
		})
	}
}

// Corruption mid-file halts the partition, and the entries before it in
// that file are still delivered.
func TestPartitionScanCorruptFile(t *testing.T) {
	f := file(t, 1, hdr(1, 1), unitRec(1), unitRec(2), unitRec(3))
	_, offsets := image(t, []Record{hdr(1, 1), unitRec(1), unitRec(2), unitRec(3)})
	f.b[offsets[2]+6] ^= 0xff // damage unit 2; unit 3 still valid after it
	s, units, _, _ := scanAll([]segFile{f, file(t, 2, hdr(2, 4), unitRec(4))})
	var ce *CorruptError
	if !errors.As(s.Halted, &ce) || !slices.Equal(units, []uint64{1}) {
		t.Fatalf("halted %v, units %v: want a corrupt scan and unit 1 delivered, nothing of file 2", s.Halted, units)
	}
}

// The units held are [lo, NextSeq): no file read breaks it, but a caller
// that moves NextSeq does, and the next Add panics naming the values.
func TestPartitionScanHeldRange(t *testing.T) {
	s, _, _, _ := scanAll([]segFile{file(t, 1, hdr(1, 1), unitRec(1), unitRec(2))})
	s.NextSeq = 9
	defer func() {
		msg, _ := recover().(string)
		if !strings.Contains(msg, "the units held are [lo, NextSeq): partition 3 holds 2 from 1, next sequence 9") {
			t.Fatalf("recovered %q; want the panic naming the range", msg)
		}
	}()
	s.Add(2, "seg", nil, PartitionHooks{})
}
