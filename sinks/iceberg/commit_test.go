package iceberg

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
)

// faultsOnce makes the first request of op fail with o, then lets every
// request through.
func faultsOnce(op Op, o Outcome) func(Op, Ident) Outcome {
	used := false
	return func(got Op, _ Ident) Outcome {
		if got == op && !used {
			used = true
			return o
		}
		return OK
	}
}

// A job lands as one snapshot recording it; applied again (a replay
// after a crash), it is found in that snapshot and nothing is added.
func TestCommitOnceAndReplay(t *testing.T) {
	r := newRig(t, 10)
	job := testJob("events", 3, schemaIDName)
	r.mustApply(job)
	r.mustApply(job)
	mt := r.table("events")
	if len(mt.Log) != 1 || len(mt.Files) != 1 {
		t.Fatalf("log %d snapshots, %d files; want 1 and 1", len(mt.Log), len(mt.Files))
	}
	s := mt.Log[0].Summary
	if s[SummaryCompactionID] != job.ID || s[SummaryContent] != job.Content || s[SummaryWALID] != testWAL.String() {
		t.Fatalf("summary %v", s)
	}
	if got := mt.Props[watermarkKey(job, "lake")]; got != "000000000001-000000000003/0" {
		t.Fatalf("watermark %q", got)
	}
	if st := r.sink.Stats(); st.Committed != 1 || st.FoundSnapshot != 1 || st.Created != 1 {
		t.Fatalf("stats %+v", st)
	}
	r.checkOnce("events")
}

// An Append that lands but whose answer is lost is found by the look
// that follows, and answered as applied — never appended again.
func TestAmbiguousAppendThatLandedIsFound(t *testing.T) {
	r := newRig(t, 10)
	r.model.Decide = faultsOnce(OpAppend, Ambiguous)
	job := testJob("events", 2, schemaIDName)
	r.mustApply(job)
	r.mustApply(job)
	if n := len(r.table("events").Log); n != 1 {
		t.Fatalf("%d snapshots, want 1", n)
	}
	if st := r.sink.Stats(); st.AmbiguousLanded != 1 || st.Committed != 0 {
		t.Fatalf("stats %+v", st)
	}
	r.checkOnce("events")
}

// An Append with no answer that did not land fails the Apply after the
// look; the engine's retry then commits it once.
func TestAmbiguousAppendThatDidNotLand(t *testing.T) {
	r := newRig(t, 10)
	r.model.Decide = faultsOnce(OpAppend, FailAmbiguous)
	job := testJob("events", 2, schemaIDName)
	if err := r.apply(job); err == nil || !strings.Contains(err.Error(), "not in the table") {
		t.Fatalf("first apply: %v", err)
	}
	r.mustApply(job)
	if n := len(r.table("events").Log); n != 1 {
		t.Fatalf("%d snapshots, want 1", n)
	}
	if st := r.sink.Stats(); st.AmbiguousLost != 1 || st.Committed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Another writer's snapshot landing first makes the pinned Append
// conflict; the sink looks, rebases and commits on top of it.
func TestConflictRebases(t *testing.T) {
	r := newRig(t, 10)
	r.mustApply(testJob("events", 1, schemaIDName))
	r.model.Decide = faultsOnce(OpAppend, Conflict)
	r.mustApply(testJob("events", 2, schemaIDName))
	mt := r.table("events")
	if len(mt.Log) != 3 || mt.Log[1].Summary["skipprd.model"] != "foreign" || mt.Log[2].Parent != mt.Log[1].ID {
		t.Fatalf("log %+v", mt.Log)
	}
	if st := r.sink.Stats(); st.Conflicts != 1 || st.Committed != 2 {
		t.Fatalf("stats %+v", st)
	}
	r.checkOnce("events")
}

// A job with a new column evolves the schema; another writer's column
// landing first makes the Evolve conflict, and the sink evolves again on
// the new schema. Field ids stay: the new column's id follows the
// foreign one's.
func TestEvolveAddsColumnAcrossAConflict(t *testing.T) {
	r := newRig(t, 10)
	r.mustApply(testJob("events", 1, schemaIDName))
	wider := arrow.NewSchema(append(schemaIDName.Fields(), arrow.Field{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	r.model.Decide = faultsOnce(OpEvolve, Conflict)
	r.mustApply(testJob("events", 2, wider))
	s := r.table("events").Schema
	foreign, ok1 := s.FindFieldByName("foreign_1")
	score, ok2 := s.FindFieldByName("score")
	if !ok1 || !ok2 || score.ID != foreign.ID+1 {
		t.Fatalf("schema %v", s)
	}
	r.checkOnce("events")
}

// int → long and float → double widen the table's column.
func TestEvolveWidens(t *testing.T) {
	r := newRig(t, 10)
	narrow := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int32}, {Name: "f", Type: arrow.PrimitiveTypes.Float32}}, nil)
	wide := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil)
	r.mustApply(testJob("m", 1, narrow))
	r.mustApply(testJob("m", 2, wide))
	r.mustApply(testJob("m", 3, narrow)) // the wide table holds it
	s := r.table("m").Schema
	n, _ := s.FindFieldByName("n")
	f, _ := s.FindFieldByName("f")
	if n.Type.String() != "long" || f.Type.String() != "double" {
		t.Fatalf("schema %v", s)
	}
	if len(r.table("m").Log) != 3 {
		t.Fatalf("log %d", len(r.table("m").Log))
	}
}

// A column no Iceberg change can make hold the job's values refuses the
// job for good, naming the table and the column; nothing is committed.
func TestUnholdableColumnIsRefused(t *testing.T) {
	r := newRig(t, 10)
	r.mustApply(testJob("events", 1, schemaIDName))
	asNumber := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.PrimitiveTypes.Int64}}, nil)
	err := r.apply(testJob("events", 2, asNumber))
	if !errors.Is(err, engine.ErrCannotApply) || !strings.Contains(err.Error(), "lake.events") || !strings.Contains(err.Error(), "name") {
		t.Fatalf("err %v", err)
	}
	if n := len(r.table("events").Log); n != 1 {
		t.Fatalf("%d snapshots", n)
	}
}

// Another job's content under a job's id in a snapshot is a collision:
// refused, never "applied".
func TestCollisionIsRefused(t *testing.T) {
	r := newRig(t, 10)
	job := testJob("events", 1, schemaIDName)
	r.mustApply(job)
	other := testJob("events", 1, schemaIDName)
	other.Content = strings.Repeat("f", 32)
	err := r.apply(other)
	if !errors.Is(err, engine.ErrIDCollision) || !errors.Is(err, engine.ErrCannotApply) {
		t.Fatalf("err %v", err)
	}
}

// Old snapshots are expired to the retention; a job replayed after its
// snapshot was expired is found by its log's high-water mark.
func TestExpiredJobIsFoundByWatermark(t *testing.T) {
	r := newRigSmall(t, 2, SmallFiles{Every: -1}) // no rewrite snapshots in the count
	first := testJob("events", 1, schemaIDName)
	r.mustApply(first)
	for n := 2; n <= ExpireSlack+5; n++ {
		r.mustApply(testJob("events", n, schemaIDName))
	}
	mt := r.table("events")
	if len(mt.Snapshots) > 2+ExpireSlack || len(mt.Log) != ExpireSlack+5 {
		t.Fatalf("%d retained, %d in the log", len(mt.Snapshots), len(mt.Log))
	}
	r.mustApply(first)
	if st := r.sink.Stats(); st.FoundWatermark != 1 || st.Expired == 0 {
		t.Fatalf("stats %+v", st)
	}
	r.checkOnce("events")
}

// checkLog catches a compaction id committed twice.
func TestCheckLogCatchesADuplicate(t *testing.T) {
	mt := &ModelTable{Log: []Snapshot{
		{ID: 1, Summary: map[string]string{SummaryCompactionID: "p-1"}},
		{ID: 2, Summary: map[string]string{"skipprd.model": "foreign"}},
		{ID: 3, Summary: map[string]string{SummaryCompactionID: "p-1"}},
	}}
	if err := checkLog(mt); err == nil || !strings.Contains(err.Error(), "snapshots 1 and 3") {
		t.Fatalf("checkLog: %v", err)
	}
}

// A table partitioned by a timestamp column of the rows gets one file
// per day the job's rows span, all in the job's one snapshot.
func TestPartitionByAColumnSplitsByDay(t *testing.T) {
	r := newRig(t, 10)
	r.sink.cfg.Spec = PartitionSpec{SourceColumn: "at"}
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, Nullable: true}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	const dayMs = 86_400_000
	for i := range 6 {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(1785585600000 + int64(i%3)*dayMs))
	}
	job := testJob("clicks", 1, schemaIDName)
	job.Slices[0].Schema, job.Slices[0].Entry.Rows = schema, 6
	job.Slices[0].Batches = []arrow.RecordBatch{b.NewRecordBatch()}
	r.mustApply(job)
	mt := r.table("clicks")
	if len(mt.Log) != 1 || len(mt.Files) != 3 || mt.Spec.SourceColumn != "at" {
		t.Fatalf("%d snapshots, %d files, spec %v; want 1, 3, at", len(mt.Log), len(mt.Files), mt.Spec)
	}
	for i, f := range mt.Files {
		if f.Rows != 2 || (i > 0 && f.Day != mt.Files[i-1].Day+1) || !strings.Contains(f.Path, "/data/at_day=") {
			t.Fatalf("file %d: %+v", i, f.DataFile)
		}
	}
	r.checkOnce("clicks")
}
