package sinks

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Jobs in these tests are built the way the engine builds them: parts
// encoded into a real segment body (segment.Encode), the body opened and
// verified (segment.OpenBody), and each PART decoded (Body.ReadSlice).

// fixtureCreatedUnixMs is 2026-08-01T12:00:00Z.
const fixtureCreatedUnixMs = 1785585600000

var (
	fixtureSchema = arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "score", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
	// noiseSchema is another namespace's, sharing the segment.
	noiseSchema = arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
)

// jobSpec describes a fixture job.
type jobSpec struct {
	namespace string
	createdMs int64 // 0: fixtureCreatedUnixMs
	cdc       bool
	plain     []int   // in a CDC job, the slices without a sidecar
	seq       uint64  // the segment's SnapshotID.Seq
	slices    [][]int // per slice, the rows of each batch
	idBase    int     // added to a slice's index in its rows' ids (rowFor), so two segments' rows differ
}

// fixtureRow is one row as the job holds it.
type fixtureRow struct {
	id    int64
	name  *string
	score *float64
	atMs  int64
	tags  []string        // nil: null
	cdc   *segment.CDCRow // nil: no change metadata (a plain slice)
}

// rowFor is the content of row r of slice s of a job created at createdMs.
func rowFor(s, r int, createdMs int64) fixtureRow {
	id := int64(s*1000 + r)
	row := fixtureRow{id: id, atMs: createdMs - id}
	if id%5 != 3 {
		name := fmt.Sprintf("n%d", id)
		row.name = &name
	}
	if id%7 != 2 {
		score := float64(id) / 4
		row.score = &score
	}
	if id%4 != 1 {
		row.tags = []string{}
		for k := range id % 3 {
			row.tags = append(row.tags, fmt.Sprintf("t%d", k))
		}
	}
	row.cdc = &segment.CDCRow{Kind: segment.MutationKind(1 + id%3), Identity: fmt.Appendf(nil, "key:%d", id%4), Order: uint64(1000 + id)}
	return row
}

// fixture is a job and the rows it holds, in order.
type fixture struct {
	job  *engine.Job
	rows []fixtureRow
	cdc  bool // the file has CDC columns
}

// newFixture builds spec's job from a real segment body. The segment also
// holds a part of another namespace between the job's parts, so the job's
// ordinals are not 0..n-1. The slices are released at the end of the test.
func newFixture(t testing.TB, spec jobSpec) fixture {
	t.Helper()
	if spec.createdMs == 0 {
		spec.createdMs = fixtureCreatedUnixMs
	}
	mem := memory.DefaultAllocator
	var parts []segment.Part
	var rows []fixtureRow
	var ordinals []segment.SliceOrdinal
	for s, batchRows := range spec.slices {
		key := segment.PartitionKey{SinkRef: "lake", Namespace: spec.namespace, Partition: fmt.Sprint(s),
			Schema: segment.FingerprintOf(fixtureSchema)}
		p := segment.Part{Key: key, Schema: fixtureSchema}
		cdc := spec.cdc && !slices.Contains(spec.plain, s)
		if cdc {
			p.Sidecar = &segment.Sidecar{}
		}
		r := 0
		for _, n := range batchRows {
			var made []fixtureRow
			for range n {
				made = append(made, rowFor(spec.idBase+s, r, spec.createdMs))
				r++
			}
			p.Batches = append(p.Batches, fixtureBatch(mem, made))
			for i := range made {
				if cdc {
					p.Sidecar.Rows = append(p.Sidecar.Rows, *made[i].cdc)
				} else {
					made[i].cdc = nil
				}
			}
			rows = append(rows, made...)
		}
		ordinals = append(ordinals, segment.SliceOrdinal(len(parts)))
		parts = append(parts, p)
		if s == 0 {
			parts = append(parts, noisePart(mem))
		}
	}
	var body bytes.Buffer
	if _, err := segment.Encode(&body, spec.createdMs, nil, parts, mem); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		for _, b := range p.Batches {
			b.Release()
		}
	}
	b, err := segment.OpenBody("fixture.seg", segment.Bytes(body.Bytes()), int64(body.Len()))
	if err != nil {
		t.Fatal(err)
	}
	id := engine.SnapshotID{Epoch: 1, Seq: spec.seq}
	job := &engine.Job{SinkRef: "lake", Namespace: spec.namespace, Segment: id, SegmentCreatedUnixMs: spec.createdMs}
	h := sha256.New()
	fmt.Fprintf(h, "%s|%v|%s", id, ordinals, job.SinkRef)
	job.ID = fmt.Sprintf("%x", h.Sum(nil)[:16])
	job.Origin = segment.Origin{WAL: segment.WALID{0xf1, 0x87}, Pipeline: "fixture"}
	content := sha256.Sum256(fmt.Appendf(b.Index.BodySum[:], "|%v", ordinals))
	job.Content = fmt.Sprintf("%x", content[:16])
	for _, o := range ordinals {
		s, err := b.ReadSlice(o, mem)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Release)
		job.Slices = append(job.Slices, s)
	}
	if job.Rows() != int64(len(rows)) {
		t.Fatalf("fixture job has %d rows, want %d", job.Rows(), len(rows))
	}
	return fixture{job: job, rows: rows, cdc: spec.cdc}
}

// spanFixture builds a job whose slices come from several segments, one
// per spec (each its own seq, and idBase so the rows differ), in order,
// as the engine gives a job that spans segments: the slices' ordinals
// repeat, Segments lists the segments and Segment is the last, whose cut
// ends the job.
func spanFixture(t testing.TB, specs ...jobSpec) fixture {
	t.Helper()
	var out fixture
	h := sha256.New()
	for i, spec := range specs {
		f := newFixture(t, spec)
		if i == 0 {
			job := *f.job
			job.Slices = nil
			out.job = &job
		}
		out.job.Slices = append(out.job.Slices, f.job.Slices...)
		out.job.Segments = append(out.job.Segments, f.job.Segment)
		out.job.Segment, out.job.SegmentCreatedUnixMs = f.job.Segment, f.job.SegmentCreatedUnixMs
		out.rows = append(out.rows, f.rows...)
		out.cdc = out.cdc || f.cdc
		fmt.Fprintf(h, "%s|%s|", f.job.ID, f.job.Content)
	}
	sum := h.Sum(nil)
	out.job.ID, out.job.Content = fmt.Sprintf("%x", sum[:16]), fmt.Sprintf("%x", sum[16:])
	return out
}

func fixtureBatch(mem memory.Allocator, rows []fixtureRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, fixtureSchema)
	defer b.Release()
	ids := b.Field(0).(*array.Int64Builder)
	names := b.Field(1).(*array.StringBuilder)
	scores := b.Field(2).(*array.Float64Builder)
	at := b.Field(3).(*array.TimestampBuilder)
	tags := b.Field(4).(*array.ListBuilder)
	tagValues := tags.ValueBuilder().(*array.StringBuilder)
	for _, r := range rows {
		ids.Append(r.id)
		if r.name == nil {
			names.AppendNull()
		} else {
			names.Append(*r.name)
		}
		if r.score == nil {
			scores.AppendNull()
		} else {
			scores.Append(*r.score)
		}
		at.Append(arrow.Timestamp(r.atMs))
		if r.tags == nil {
			tags.AppendNull()
		} else {
			tags.Append(true)
			for _, v := range r.tags {
				tagValues.Append(v)
			}
		}
	}
	return b.NewRecordBatch()
}

func noisePart(mem memory.Allocator) segment.Part {
	b := array.NewRecordBuilder(mem, noiseSchema)
	defer b.Release()
	b.Field(0).(*array.Int32Builder).AppendValues([]int32{7, 8, 9}, nil)
	key := segment.PartitionKey{SinkRef: "lake", Namespace: "noise", Schema: segment.FingerprintOf(noiseSchema)}
	return segment.Part{Key: key, Schema: noiseSchema, Batches: []arrow.RecordBatch{b.NewRecordBatch()}}
}

// Standard fixtures: a plain job of two slices and three batches, a CDC
// job of two slices, and a small CDC job for loops that encode it often.
var (
	plainSpec = jobSpec{namespace: "events", seq: 1, slices: [][]int{{3, 4}, {5}}}
	cdcSpec   = jobSpec{namespace: "orders", seq: 2, cdc: true, slices: [][]int{{4}, {2, 3}}}
	smallSpec = jobSpec{namespace: "small", seq: 5, cdc: true, slices: [][]int{{2}}}
	mixedSpec = jobSpec{namespace: "mixed", seq: 6, cdc: true, plain: []int{1}, slices: [][]int{{2}, {3}, {1, 1}}}
	// spanSpecs are the segments of a job that spans three: the same
	// namespace and schema, other rows, other days (the job's file is
	// dated by the last).
	spanSpecs = []jobSpec{
		{namespace: "events", seq: 3, createdMs: fixtureCreatedUnixMs - 2*86_400_000, slices: [][]int{{3, 4}, {5}}},
		{namespace: "events", seq: 4, createdMs: fixtureCreatedUnixMs - 86_400_000, idBase: 10, slices: [][]int{{2}}},
		{namespace: "events", seq: 7, idBase: 20, slices: [][]int{{1, 2}, {6}, {4}}},
	}
)
