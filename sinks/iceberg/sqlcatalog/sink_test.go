package sqlcatalog

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sinks/iceberg"
	"github.com/skipprd/skipprd/storage"
)

// The whole sink on an S3 warehouse: data files through the WAL's stack
// (storage.S3Store with the real SDK client, create-only PUTs) into
// gofakes3, metadata through iceberg-go's S3 IO into the same bucket,
// the SQL catalog on SQLite. Three jobs and a replay of the first: three
// snapshots, each file in the bucket, the rows as iceberg-go reads them.
// Two jobs more, and the fifth commit's look rewrites the five small
// files into one, read back from the bucket through the same stack.
func TestSinkOnS3Warehouse(t *testing.T) {
	e := sqliteS3(t)
	cat := open(t, e)
	loop := storage.NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = loop.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-stopped })
	client := s3.NewFromConfig(*e.cfg.AWS, func(o *s3.Options) {
		o.BaseEndpoint = aws.String(e.cfg.S3Endpoint)
		o.UsePathStyle = true
	})
	store := storage.NewS3Store(loop, client, testBucket, storage.S3Options{RequestTimeout: 10 * time.Second})
	files := iceberg.NewObjectFiles(sinks.NewParquetObjects(store, loop.Executor(), ""), testBucket, "warehouse")
	sink := iceberg.NewSink(iceberg.Config{Catalog: cat, Namespace: "lake", SinkRef: "lake", Files: files,
		SmallFiles: iceberg.SmallFiles{Every: 5, MinFiles: 5}, Blocking: storage.NewWorkers(loop, 2, 30*time.Second), Exec: loop.Executor(), Clock: loop.Clock()})
	apply := func(job *engine.Job) {
		t.Helper()
		err, stop := storage.Call(loop, func(done func(error)) { sink.Apply(job, done) })
		if err != nil || stop != nil {
			t.Fatalf("apply %s: %v %v", job.ID, err, stop)
		}
	}
	var want []row
	for n := 1; n <= 3; n++ {
		job, rows := s3Job(n)
		apply(job)
		want = append(want, rows...)
	}
	first, _ := s3Job(1)
	apply(first) // a replay: found in its snapshot
	id := iceberg.Ident{Namespace: "lake", Name: "events"}
	tbl := load(t, cat, id)
	if len(tbl.Snapshots) != 3 {
		t.Fatalf("%d snapshots, want 3", len(tbl.Snapshots))
	}
	paths := dataFiles(t, cat, id)
	if len(paths) != 3 {
		t.Fatalf("data files %v, want 3", paths)
	}
	for _, p := range paths {
		if !e.exists(t, p) {
			t.Fatalf("data file %s is listed but not in the bucket", p)
		}
	}
	got := scan(t, cat, id)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows %v, want %v", got, want)
	}
	if st := sink.Stats(); st.Committed != 3 || st.FoundSnapshot != 1 {
		t.Fatalf("stats %+v", st)
	}
	for n := 4; n <= 5; n++ {
		job, rows := s3Job(n)
		apply(job)
		want = append(want, rows...)
	}
	paths = dataFiles(t, cat, id)
	if len(paths) != 1 || !strings.Contains(paths[0], "/rewrite-") || !e.exists(t, paths[0]) {
		t.Fatalf("data files after the rewrite %v", paths)
	}
	if got := scan(t, cat, id); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("rows after the rewrite %v, want %v", got, want)
	}
	if st := sink.Stats(); st.Committed != 5 || st.Rewritten != 1 || st.RewriteFailed != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// s3Job is job n: n rows (id, name) of namespace events, in segment
// (1, n), and the rows as scan returns them.
func s3Job(n int) (*engine.Job, []row) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	var rows []row
	for r := range n {
		id := int64(n*100 + r)
		b.Field(0).(*array.Int64Builder).Append(id)
		b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", id))
		rows = append(rows, row{ID: id, Name: fmt.Sprintf("row %d", id)})
	}
	seg := engine.SnapshotID{Epoch: 1, Seq: uint64(n)}
	return &engine.Job{ID: fmt.Sprintf("p-%032x", n), Content: fmt.Sprintf("%032x", n),
		Origin: segment.Origin{WAL: segment.WALID{7}, Pipeline: "p"}, SinkRef: "lake", Namespace: "events",
		Segment: seg, SegmentCreatedUnixMs: day0.UnixMilli(), Segments: []engine.SnapshotID{seg},
		Slices: []*segment.Slice{{Entry: segment.IndexEntry{Rows: int64(n)}, Schema: schema,
			Batches: []arrow.RecordBatch{b.NewRecordBatch()}}}}, rows
}
