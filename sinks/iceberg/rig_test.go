package iceberg

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/storage"
)

// A rig is one sink on the production loop: real workers for the
// Blocking port, a real folder for the warehouse, and the Model catalog
// (whose faults the test sets), so what runs is the sink's protocol as
// production runs it, against a catalog the test can break.
type rig struct {
	t     *testing.T
	loop  *storage.Loop
	model *Model
	dir   string // the warehouse folder
	small SmallFiles
	sink  *Sink
}

const rigTimeout = 30 * time.Second

func newRig(t *testing.T, keep int) *rig { t.Helper(); return newRigSmall(t, keep, SmallFiles{}) }

// newRigSmall is a rig whose sinks rewrite small files by small.
func newRigSmall(t *testing.T, keep int, small SmallFiles) *rig {
	t.Helper()
	loop := storage.NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = loop.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	dir := t.TempDir()
	disk, err := storage.NewOSDisk(loop, dir, storage.DiskOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, loop: loop, dir: dir, model: NewModel("file://" + dir), small: small}
	r.sink = r.newSink(disk, keep)
	return r
}

// newSink is another process's sink on the same catalog and folder.
func (r *rig) newSink(disk engine.Disk, keep int) *Sink {
	files := NewDirFiles(sinks.NewParquetDir(disk, r.loop.Executor(), storage.NewRand(), ""), r.dir)
	return NewSink(Config{Catalog: r.model, Namespace: "lake", SinkRef: "lake", Files: files,
		Retention: Retention{KeepLast: keep}, SmallFiles: r.small, Blocking: storage.NewWorkers(r.loop, 2, rigTimeout),
		Exec: r.loop.Executor(), Clock: r.loop.Clock()})
}

// apply applies job through the rig's sink and waits for the answer.
func (r *rig) apply(job *engine.Job) error {
	r.t.Helper()
	return applyWith(r.t, r.loop, r.sink, job)
}

func applyWith(t *testing.T, loop *storage.Loop, s engine.Sink, job *engine.Job) error {
	t.Helper()
	err, stopped := storage.Call(loop, func(done func(error)) { s.Apply(job, done) })
	if stopped != nil {
		t.Fatalf("loop: %v", stopped)
	}
	return err
}

func (r *rig) mustApply(job *engine.Job) {
	r.t.Helper()
	if err := r.apply(job); err != nil {
		r.t.Fatalf("apply %s: %v", job.ID, err)
	}
}

// table returns the model's table of namespace ns.
func (r *rig) table(ns string) *ModelTable {
	mt := r.model.Table(Ident{Namespace: "lake", Name: ns})
	if mt == nil {
		r.t.Fatalf("no table lake.%s", ns)
	}
	return mt
}

// checkOnce fails t unless every compaction id is in at most one
// snapshot of the table's log and every listed file is on disk.
func (r *rig) checkOnce(ns string) {
	r.t.Helper()
	if err := checkLog(r.table(ns)); err != nil {
		r.t.Fatal(err)
	}
	for _, f := range r.table(ns).Files {
		p := filepath.Join(r.dir, f.Path[len("file://"+r.dir):])
		if _, err := os.Stat(p); err != nil {
			r.t.Fatalf("file %s of snapshot %d: %v", f.Path, f.Snapshot, err)
		}
	}
}

// checkLog is the protocol's first promise over a table's whole log.
func checkLog(mt *ModelTable) error {
	seen := map[string]int64{}
	for _, s := range mt.Log {
		id := s.Summary[SummaryCompactionID]
		if id == "" {
			continue
		}
		if prev, dup := seen[id]; dup {
			return fmt.Errorf("compaction id %s is in snapshots %d and %d", id, prev, s.ID)
		}
		seen[id] = s.ID
	}
	return nil
}

// testWAL is the WAL id of the rig's jobs' log.
var testWAL = segment.WALID{1, 2, 3, 4}

// schemaIDName is the columns of most test jobs.
var schemaIDName = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// testJob is job n of namespace ns: n rows (n ≥ 1) of schema, one
// slice, the PART at ordinal 0 of segment (1, n) — so jobs of one
// namespace come in lane order by n. Column values are a function of n
// and the row.
func testJob(ns string, n int, schema *arrow.Schema) *engine.Job {
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for r := range n {
		for i, f := range schema.Fields() {
			appendValue(b.Field(i), f.Type, int64(n*1000+r))
		}
	}
	rec := b.NewRecordBatch()
	seg := engine.SnapshotID{Epoch: 1, Seq: uint64(n)}
	return &engine.Job{
		ID:      fmt.Sprintf("p-%032x", n),
		Content: fmt.Sprintf("%032x", n*7),
		Origin:  segment.Origin{WAL: testWAL, Pipeline: "p"}, SinkRef: "lake", Namespace: ns,
		Segment: seg, SegmentCreatedUnixMs: 1785585600000 + int64(n), Segments: []engine.SnapshotID{seg},
		Slices: []*segment.Slice{{Entry: segment.IndexEntry{Ordinal: 0, Rows: int64(n)}, Schema: schema,
			Batches: []arrow.RecordBatch{rec}}},
	}
}

func appendValue(b array.Builder, t arrow.DataType, v int64) {
	switch b := b.(type) {
	case *array.Int64Builder:
		b.Append(v)
	case *array.Int32Builder:
		b.Append(int32(v))
	case *array.Float32Builder:
		b.Append(float32(v) / 2)
	case *array.Float64Builder:
		b.Append(float64(v) / 2)
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("v%d", v))
	default:
		panic(fmt.Sprintf("appendValue: %s", t))
	}
}
