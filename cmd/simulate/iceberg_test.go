package main

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sinks/iceberg"
)

// The iceberg destination's table oracle fires on a compaction id in two
// snapshots of a table's log, and on more retained snapshots than the
// retention, the expiry's slack and the skipped expiries allow.
func TestIcebergTableOracleFires(t *testing.T) {
	d := &iceDest{keep: 2}
	id := iceberg.Ident{Namespace: "skipprd", Name: "ns0"}
	snap := func(n int64, job string) iceberg.Snapshot {
		return iceberg.Snapshot{ID: n, Summary: map[string]string{iceberg.SummaryCompactionID: job}}
	}
	dup := &iceberg.ModelTable{Log: []iceberg.Snapshot{snap(1, "p-a"), snap(2, "p-b"), snap(3, "p-a")}}
	if err := d.checkTable(id, dup); err == nil || !strings.Contains(err.Error(), "compaction id p-a in snapshots 1 and 3") {
		t.Fatalf("duplicate: %v", err)
	}
	var many []iceberg.Snapshot
	for i := range int64(2 + iceberg.ExpireSlack + 2) {
		many = append(many, snap(i+1, "p-"+string(rune('a'+i))))
	}
	grown := &iceberg.ModelTable{Log: many, Snapshots: many}
	if err := d.checkTable(id, grown); err == nil || !strings.Contains(err.Error(), "retains 24 snapshots") {
		t.Fatalf("unbounded: %v", err)
	}
	grown.Snapshots = many[1:]
	if err := d.checkTable(id, grown); err != nil {
		t.Fatalf("within the bound: %v", err)
	}
}

// TestRewrittenFileOracleFires: a rewritten file's rows are split back
// into the files it stands for by their row counts, so rows lost or
// added by a rewrite, or moved from one job to another, fail the check.
func TestRewrittenFileOracleFires(t *testing.T) {
	file := func(batches ...arrow.RecordBatch) []byte {
		body, err := sinks.EncodeBatches(testUnitSchema, nil, func(write func(arrow.RecordBatch) error) error {
			for _, b := range batches {
				if err := write(b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	a, b := testBatch(1, 3), testBatch(2, 4)
	var wantA, wantB sim.RowDigest
	if err := digestParquetRuns(file(a), asLakeRecord, []int64{3}, []*sim.RowDigest{&wantA}); err != nil {
		t.Fatal(err)
	}
	if err := digestParquetRuns(file(b), asLakeRecord, []int64{4}, []*sim.RowDigest{&wantB}); err != nil {
		t.Fatal(err)
	}
	merged := file(a, b)
	var gotA, gotB sim.RowDigest
	if err := digestParquetRuns(merged, asLakeRecord, []int64{3, 4}, []*sim.RowDigest{&gotA, &gotB}); err != nil {
		t.Fatal(err)
	}
	if gotA != wantA || gotB != wantB {
		t.Fatalf("split digests %+v %+v, the files' own %+v %+v", gotA, gotB, wantA, wantB)
	}
	// A row moved from b's share to a's: both digests change.
	var movedA, movedB sim.RowDigest
	if err := digestParquetRuns(merged, asLakeRecord, []int64{4, 3}, []*sim.RowDigest{&movedA, &movedB}); err != nil {
		t.Fatal(err)
	}
	if movedA == wantA || movedB == wantB {
		t.Fatalf("a row moved between jobs went unseen: %+v %+v", movedA, movedB)
	}
	for _, counts := range [][]int64{{3, 3}, {3, 5}} {
		var x, y sim.RowDigest
		err := digestParquetRuns(merged, asLakeRecord, counts, []*sim.RowDigest{&x, &y})
		if err == nil || !strings.Contains(err.Error(), "rows") {
			t.Fatalf("counts %v of a 7-row file: %v", counts, err)
		}
	}
}
