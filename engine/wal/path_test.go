package wal

import (
	"testing"

	"pgregory.net/rapid"
)

func TestPaths(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{PartitionDir(0), "wal/partition-0"},
		{PartitionDir(63), "wal/partition-63"},
		{SegmentName(0), "segment-000000000000.wal"},
		{SegmentPath(0, 1), "wal/partition-0/segment-000000000001.wal"},
		{SegmentPath(7, SegmentNumberMax), "wal/partition-7/segment-999999999999.wal"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for name, call := range map[string]func(){
		"PartitionDir(PartitionsMax)":        func() { PartitionDir(PartitionsMax) },
		"SegmentName(SegmentNumberMax+1)":    func() { SegmentName(SegmentNumberMax + 1) },
		"SegmentPath(0, SegmentNumberMax+1)": func() { SegmentPath(0, SegmentNumberMax+1) },
		"SegmentPath(PartitionsMax, 0)":      func() { SegmentPath(PartitionsMax, 0) },
		"PartitionDir(MaxUint32)":            func() { PartitionDir(1<<32 - 1) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", name)
				}
			}()
			call()
		}()
	}
}

// The parsers accept exactly what the namers produce.
func TestParseNamesRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p := rapid.Uint32Range(0, PartitionsMax-1).Draw(t, "p")
		n := rapid.Uint64Range(0, SegmentNumberMax).Draw(t, "n")
		dir := PartitionDir(p)
		if got, ok := ParsePartitionDir(dir[len(Root)+1:]); !ok || got != p {
			t.Fatalf("ParsePartitionDir(%q) = %d, %v", dir, got, ok)
		}
		if got, ok := ParseSegmentName(SegmentName(n)); !ok || got != n {
			t.Fatalf("ParseSegmentName(%q) = %d, %v", SegmentName(n), got, ok)
		}
		if SegmentPath(p, n) != dir+"/"+SegmentName(n) {
			t.Fatalf("SegmentPath(%d, %d) = %q", p, n, SegmentPath(p, n))
		}
	})
}

func TestParseNamesStrict(t *testing.T) {
	for _, name := range []string{
		"", "segment-", "segment-.wal",
		"segment-00000000001.wal",       // 11 digits
		"segment-0000000000001.wal",     // 13 digits
		"segment-00000000000a.wal",      // not a digit
		"segment-+00000000001.wal",      // sign
		"segment- 00000000001.wal",      // space
		"segment-000000000001.wal.tmp",  // suffix after
		"segment-000000000001.WAL",      // case
		"Segment-000000000001.wal",      // case
		"xsegment-000000000001.wal",     // prefix before
		"segment-000000000001",          // no suffix
		"segment_000000000001.wal",      // separator
		"segment-00000000000\u0661.wal", // a non-ASCII digit
	} {
		if n, ok := ParseSegmentName(name); ok {
			t.Errorf("ParseSegmentName(%q) = %d, true", name, n)
		}
	}
	for _, name := range []string{
		"", "partition-", "partition-00", "partition-01", "partition-64", "partition-100",
		"partition--1", "partition-+1", "partition-1a", "partition- 1", "partition-1 ",
		"Partition-1", "partition1", "partition-99999999999999999999", "partition-4294967296",
		"partition-\u0661",
	} {
		if p, ok := ParsePartitionDir(name); ok {
			t.Errorf("ParsePartitionDir(%q) = %d, true", name, p)
		}
	}
	for name, want := range map[string]uint32{"partition-0": 0, "partition-9": 9, "partition-10": 10, "partition-63": 63} {
		if p, ok := ParsePartitionDir(name); !ok || p != want {
			t.Errorf("ParsePartitionDir(%q) = %d, %v; want %d", name, p, ok, want)
		}
	}
}
