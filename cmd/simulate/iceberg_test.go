package main

import (
	"strings"
	"testing"

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
