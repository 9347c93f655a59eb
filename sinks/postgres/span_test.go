package postgres

import (
	"reflect"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// spanJob is a CDC job that spans two segments: slices of ordinals 0
// and 1 from the first, 0 again from the second. Identity k changes in
// both segments, j in the first only.
func spanJob(t *testing.T, id string) *engine.Job {
	k, j := []byte("k"), []byte("j")
	job := &engine.Job{ID: id, Content: contentOf(id), Origin: testOrigin, SinkRef: "pg", Namespace: "span",
		Segment: engine.SnapshotID{Epoch: 1, Seq: 9}, Segments: []engine.SnapshotID{{Epoch: 1, Seq: 8}, {Epoch: 1, Seq: 9}}}
	for _, sl := range []struct {
		ord     segment.SliceOrdinal
		changes []segment.CDCRow
		values  [][]*int64
	}{
		{0, []segment.CDCRow{{Kind: segment.Insert, Identity: k, Order: 5}, {Kind: segment.Insert, Identity: j, Order: 6}}, [][]*int64{{i64(1)}, {i64(10)}}},
		{1, []segment.CDCRow{{Kind: segment.Update, Identity: k, Order: 7}}, [][]*int64{{i64(2)}}},
		{0, []segment.CDCRow{{Kind: segment.Update, Identity: k, Order: 12}}, [][]*int64{{i64(3)}}},
	} {
		b := int64Batch(t, []string{"a"}, sl.values)
		t.Cleanup(b.Release)
		job.Slices = append(job.Slices, &segment.Slice{Entry: segment.IndexEntry{Ordinal: sl.ord, Rows: b.NumRows()},
			Schema: b.Schema(), Batches: []arrow.RecordBatch{b}, Sidecar: &segment.Sidecar{Rows: sl.changes}})
	}
	return job
}

// A job whose slices come from two segments, their ordinals repeating,
// is one transaction of every slice's rows in job order: on the server
// as in the model, the latest change of each identity stands, the
// applied-jobs row counts every row, and a replay writes nothing.
func TestPGXSpanningJob(t *testing.T) {
	s := newServer(t, 2)
	model := NewModel()
	job := spanJob(t, "span-1")
	tx := mustPlan(t, job)
	if tx.Rows != 4 || len(tx.Changes) != 4 || len(tx.Batches) != 3 {
		t.Fatalf("planned %d rows, %d changes, %d batches; want 4, 4, 3", tx.Rows, len(tx.Changes), len(tx.Batches))
	}
	for range 2 {
		if _, err := s.db.Apply(ctxT(t), mustPlan(t, job)); err != nil {
			t.Fatal(err)
		}
		if _, err := model.Apply(ctxT(t), mustPlan(t, job)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]RowState{
		"6b": {Order: 12, Values: []string{"3"}},
		"6a": {Order: 6, Values: []string{"10"}},
	}
	if got := readTable1(t, s, "span"); !reflect.DeepEqual(got, want) {
		t.Fatalf("server %v, want %v", got, want)
	}
	if got := modelState(model, "span"); !reflect.DeepEqual(got, want) {
		t.Fatalf("model %v, want %v", got, want)
	}
	if n := s.count(t, "SELECT rows FROM skipprd_applied_jobs WHERE compaction_id = $1", job.ID); n != 4 {
		t.Fatalf("the applied-jobs row counts %d rows, want 4", n)
	}
	if got := model.AppliedJobs(); !slices.Equal(got, []string{job.ID}) {
		t.Fatalf("the model applied %v, want the job once", got)
	}
}

// A refusal names the slice by its place in the job as well as its
// ordinal, which the other segment's slice shares.
func TestPlanNamesSlicesOfSpanningJobs(t *testing.T) {
	job := spanJob(t, "span-2")
	job.Slices[2].Sidecar = nil
	_, err := Plan(job)
	wantCannotApply(t, err, "slice 2 (ordinal 0) differs from slice 0")
}
