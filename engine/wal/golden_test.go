package wal

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/golden"
)

// Run `go test ./engine/wal -run Golden -update` after a deliberate
// format change, and review every byte of the diff.
var update = flag.Bool("update", false, "rewrite golden vectors and the fuzz seed corpus")

const (
	goldenDir          = "testdata/golden"
	goldenSegmentBytes = 4096
)

// goldenRecords is the golden segment's content: a header, a CDC unit
// with an idempotency key, a plain unit, the seal of their generation
// with two ranges (in content order, not sorted), and its flushed record.
func goldenRecords() []Record {
	orders := segment.PartitionKey{SinkRef: "lake", Namespace: "orders", Partition: "region=eu",
		Bucketed: true, BucketUnixMs: 1_700_000_000_000, Schema: 0x0123456789abcdef}
	events := segment.PartitionKey{SinkRef: "lake", Namespace: "events", Schema: 0xfedcba9876543210}
	return []Record{
		&Header{Partition: 2, Segment: 41, FirstSeq: 1000, SegmentBytes: goldenSegmentBytes},
		&UnitRecord{
			Seq: 1000, Key: orders, IdempotencyKey: "http:req-7f3a",
			Offsets: segment.Offsets{{Key: "http:req-7f3a", Value: 1}},
			// Opaque to this package: placeholder bytes, not a real stream.
			Arrow: []byte("ARROW-IPC-STREAM:orders"),
			Sidecar: &segment.Sidecar{Rows: []segment.CDCRow{
				{Kind: segment.Insert, Identity: []byte("order-1"), Order: 501},
				{Kind: segment.Delete, Identity: []byte("order-0"), Order: 502},
			}},
		},
		&UnitRecord{
			Seq: 1001, Key: events,
			Offsets: segment.Offsets{{Key: "kafka:events/0", Value: 8812}, {Key: "kafka:events/1", Value: 9304}},
			Arrow:   []byte("ARROW-IPC-STREAM:events"),
		},
		&SealRecord{
			Snapshot: SnapshotRef{Epoch: 3, Seq: 17}, CreatedUnixMs: 1_700_000_123_456,
			Dir:        "pipeline/p_year=2023/p_month=11/p_day=14/",
			Partitions: 1<<2 | 1<<5,
			Ranges:     []SeqRange{{Lo: 1000, Hi: 1001}, {Lo: 990, Hi: 995}},
		},
		&FlushedRecord{Snapshot: SnapshotRef{Epoch: 3, Seq: 17}},
	}
}

// goldenImage encodes the golden segment file: the entries, then zeros up
// to goldenSegmentBytes.
func goldenImage(t tb) []byte {
	b, _ := image(t, goldenRecords())
	if len(b) > goldenSegmentBytes {
		t.Fatalf("golden entries take %d bytes, more than the segment's %d", len(b), goldenSegmentBytes)
	}
	return append(b, make([]byte, goldenSegmentBytes-len(b))...)
}

// describeScan renders what Scan and DecodeRecord make of an image, one
// line per entry; the golden .txt makes a format change readable.
func describeScan(t tb, b []byte) string {
	r := Scan("golden", b)
	var s strings.Builder
	for _, e := range r.Entries {
		rec, err := DecodeRecord(fmt.Sprintf("golden@%d", e.Offset), e.Payload)
		if err != nil {
			t.Fatalf("%v", err)
		}
		fmt.Fprintf(&s, "@%d +%d %s\n", e.Offset, EntryBytes(len(e.Payload)), describe(rec))
	}
	fmt.Fprintf(&s, "end %d torn %v corrupt %v size %d\n", r.End, r.Torn, r.Corrupt != nil, len(b))
	return s.String()
}

func TestGoldenVectors(t *testing.T) {
	img := goldenImage(t)
	files := map[string][]byte{
		"segment.wal": img,
		"segment.txt": []byte(describeScan(t, img)),
	}
	golden.Check(t, goldenDir, files, []string{"segment.wal", "segment.txt"}, *update)
	if *update {
		writeFuzzCorpus(t, img)
	}
}

// TestGoldenDecode reads the committed bytes (not a fresh encoding), so a
// reader change that can no longer read old segments fails here.
func TestGoldenDecode(t *testing.T) {
	img, err := os.ReadFile(filepath.Join(goldenDir, "segment.wal"))
	if err != nil {
		t.Fatal(err)
	}
	txt, err := os.ReadFile(filepath.Join(goldenDir, "segment.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if got := describeScan(t, img); got != string(txt) {
		t.Fatalf("decoded:\n%s\nwant:\n%s", got, txt)
	}
	r := Scan("segment.wal", img)
	want := goldenRecords()
	if len(r.Entries) != len(want) || r.Torn || r.Corrupt != nil {
		t.Fatalf("%d entries, torn %v, corrupt %v; want %d, clean", len(r.Entries), r.Torn, r.Corrupt, len(want))
	}
	var again []byte
	for i, e := range r.Entries {
		rec, err := DecodeRecord("segment.wal", e.Payload)
		if err != nil {
			t.Fatal(err)
		}
		if describe(rec) != describe(want[i]) {
			t.Fatalf("entry %d: %s\nwant %s", i, describe(rec), describe(want[i]))
		}
		again = mustEntry(t, again, rec)
	}
	if !bytes.Equal(again, img[:r.End]) {
		t.Fatal("the decoded records do not re-encode to the golden bytes")
	}
}
