package sinks

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
)

// Jobs that span segments: slices from several segments, whose ordinals
// repeat, under the id of the segment whose cut ends the job.

// The fixture is what the tests below need: three segments, ordinals
// that repeat, rows that differ.
func TestSpanFixture(t *testing.T) {
	f := spanFixture(t, spanSpecs...)
	var ordinals []segment.SliceOrdinal
	for _, s := range f.job.Slices {
		ordinals = append(ordinals, s.Entry.Ordinal)
	}
	if slices.Equal(slices.Compact(slices.Sorted(slices.Values(ordinals))), ordinals) {
		t.Fatalf("ordinals %v do not repeat", ordinals)
	}
	want := []engine.SnapshotID{{Epoch: 1, Seq: 3}, {Epoch: 1, Seq: 4}, {Epoch: 1, Seq: 7}}
	if !slices.Equal(f.job.Segments, want) || f.job.Segment != want[2] {
		t.Fatalf("segments %v, segment %s; want %v, the last", f.job.Segments, f.job.Segment, want)
	}
	ids := map[int64]bool{}
	for _, r := range f.rows {
		if ids[r.id] {
			t.Fatalf("row id %d twice: the segments' rows must differ", r.id)
		}
		ids[r.id] = true
	}
	if f.job.Rows() != int64(len(f.rows)) || len(f.rows) != 27 {
		t.Fatalf("%d rows in the job, %d in the fixture; want 27", f.job.Rows(), len(f.rows))
	}
}

// A spanning job's file holds every segment's rows in job order and
// records the segments it spans.
func TestEncodeParquetSpanningJob(t *testing.T) {
	for _, cdc := range []bool{false, true} {
		t.Run(fmt.Sprint("cdc=", cdc), func(t *testing.T) {
			specs := slices.Clone(spanSpecs)
			for i := range specs {
				specs[i].cdc = cdc
			}
			f := spanFixture(t, specs...)
			b, err := EncodeParquet(f.job)
			if err != nil {
				t.Fatal(err)
			}
			checkArrow(t, b, f.job, cdcRowsOf(f))
			checkParquetGo(t, b, f.rows, cdc)
			kv := footerOf(t, b)
			md, err := parseFooter(kv.footer)
			if err != nil {
				t.Fatal(err)
			}
			want := "3 000000000001-000000000003..000000000001-000000000007"
			if got := lastValue(md.KeyValueMetadata(), MetaSegments); got != want {
				t.Fatalf("%s = %q, want %q", MetaSegments, got, want)
			}
			if got := lastValue(md.KeyValueMetadata(), MetaSegment); got != "000000000001-000000000007" {
				t.Fatalf("%s = %q, want the last segment's", MetaSegment, got)
			}
		})
	}
}

// A message about one slice of a spanning job names it by its place in
// the job: its ordinal alone is another segment's too.
func TestEncodeParquetNamesSlicesOfSpanningJobs(t *testing.T) {
	specs := slices.Clone(spanSpecs)
	for i := range specs {
		specs[i].cdc = true
	}
	f := spanFixture(t, specs...)
	job := *f.job
	job.Slices = slices.Clone(job.Slices)
	bad := *job.Slices[3] // the third segment's first slice, ordinal 0 like slice 0 and 2
	bad.Sidecar = &segment.Sidecar{Rows: bad.Sidecar.Rows[1:]}
	job.Slices[3] = &bad
	_, err := EncodeParquet(&job)
	if !errors.Is(err, ErrBadJob) || !strings.Contains(err.Error(), "slice 3 (ordinal 0): sidecar has 2 rows, batches 3") {
		t.Fatalf("got %v, want ErrBadJob naming slice 3 (ordinal 0)", err)
	}
}

// The Parquet folder sink writes a spanning job as one file, dated by
// its last segment, that reads back row for row; its replay is found
// applied by the footer, and a job of the same id that spans other
// segments is a collision naming both.
func TestParquetDirSpanningJob(t *testing.T) {
	l, sink, _, dir := newOSDiskSink(t, "lake")
	f := spanFixture(t, spanSpecs...)
	if err := applyOnLoop(t, l, sink, f.job); err != nil {
		t.Fatal(err)
	}
	rel := "lake/events/p_year=2026/p_month=08/p_day=01/" + f.job.ID + ".parquet"
	if sink.Path(f.job) != rel {
		t.Fatalf("path %s, want %s (the last segment's date)", sink.Path(f.job), rel)
	}
	name := filepath.Join(dir, filepath.FromSlash(rel))
	body := mustRead(t, name)
	checkArrow(t, body, f.job, nil)
	checkParquetGo(t, body, f.rows, false)
	wantOnlyFile(t, filepath.Dir(name), f.job.ID+".parquet")
	if err := applyOnLoop(t, l, sink, f.job); err != nil || sink.Stats().Replays != 1 {
		t.Fatalf("replay: %v, stats %+v", err, sink.Stats())
	}

	other := *f.job
	other.Content = "0badc0de0badc0de0badc0de0badc0de"
	other.Segments = f.job.Segments[1:]
	err := applyOnLoop(t, l, sink, &other)
	if !errors.Is(err, engine.ErrIDCollision) {
		t.Fatalf("another job under the id: %v, want a collision", err)
	}
	for _, says := range []string{"segments 3 000000000001-000000000003..000000000001-000000000007",
		"segments 2 000000000001-000000000004..000000000001-000000000007"} {
		if !strings.Contains(err.Error(), says) {
			t.Errorf("the collision does not say %q: %v", says, err)
		}
	}
	if !bytes.Equal(mustRead(t, name), body) {
		t.Fatal("the collision changed the file")
	}
}

// The memory sink holds a spanning job once, its batches in job order and
// its segments recorded; a replay is a no-op, and a replay that spans
// other segments under the same content is the engine's bug: a panic.
func TestMemorySpanningJob(t *testing.T) {
	w := newSimWorld(t, 9, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	defer m.Release()
	specs := slices.Clone(spanSpecs)
	for i := range specs {
		specs[i].cdc = true
	}
	f := spanFixture(t, specs...)
	sink := m.Sink(w.inc.Timers())
	for range 2 {
		if err := w.apply(sink, f.job); err != nil {
			t.Fatal(err)
		}
	}
	got := m.Applied()
	if len(got) != 1 || !slices.Equal(got[0].Segments, f.job.Segments) || got[0].Segment != f.job.Segment {
		t.Fatalf("applied %d jobs, first %+v; want the job once, its segments %v", len(got), got, f.job.Segments)
	}
	checkBatches(t, got[0].Batches, f.job)
	if len(got[0].Sidecars) != len(f.job.Slices) {
		t.Fatalf("%d sidecars for %d slices", len(got[0].Sidecars), len(f.job.Slices))
	}
	for i, s := range f.job.Slices {
		if a, b := sidecarString(got[0].Sidecars[i]), sidecarString(s.Sidecar); a != b {
			t.Fatalf("slice %d sidecar %s, want %s", i, a, b)
		}
	}

	other := *f.job
	other.Segments = f.job.Segments[:2]
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), f.job.ID) {
			t.Fatalf("a replay spanning other segments: recovered %v, want a panic naming the job", p)
		}
	}()
	sink.Apply(&other, func(error) {})
}

// A job larger than a row group's bounds is split into several row
// groups, batches cut where a bound falls, and reads back row for row:
// by bytes (about bytes Arrow bytes each) and by rows.
func TestEncodeParquetRowGroupBounds(t *testing.T) {
	specs := slices.Clone(spanSpecs)
	for i := range specs {
		specs[i].cdc = true
	}
	f := spanFixture(t, specs...)
	for _, tc := range []struct {
		name string
		lim  rowGroupLimits
	}{
		{"by rows", rowGroupLimits{rows: 4, bytes: rowGroupBytesMax}},
		{"by bytes", rowGroupLimits{rows: rowGroupRowsMax, bytes: 600}},
		{"a row over the bytes", rowGroupLimits{rows: rowGroupRowsMax, bytes: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			schema, cdc, err := fileSchema(f.job)
			if err != nil {
				t.Fatal(err)
			}
			b, err := encode(f.job, schema, cdc, JobMetadata(f.job), tc.lim)
			if err != nil {
				t.Fatal(err)
			}
			checkArrow(t, b, f.job, cdcRowsOf(f))
			checkParquetGo(t, b, f.rows, true)
			groups := rowGroupRows(t, b)
			var total int64
			for _, n := range groups {
				total += n
				if n > tc.lim.rows || n == 0 {
					t.Fatalf("row groups of %v rows; want 1..%d each", groups, tc.lim.rows)
				}
			}
			if total != f.job.Rows() || len(groups) < 2 {
				t.Fatalf("row groups of %v rows (%d in all); want several, %d rows in all", groups, total, f.job.Rows())
			}
			if tc.lim.bytes == 1 && len(groups) != int(f.job.Rows()) {
				t.Fatalf("row groups of %v rows; want one a row, every row over the bound", groups)
			}
			if tc.lim.rows == 4 && groups[0] != 4 {
				t.Fatalf("row groups of %v rows; want full ones of 4 first", groups)
			}
		})
	}
	// Within the default bounds the same job is one row group.
	b := mustEncode(t, f.job)
	if groups := rowGroupRows(t, b); len(groups) != 1 {
		t.Fatalf("the default bounds made row groups of %v rows; want one", groups)
	}
}

// rowGroupRows lists the rows of each row group of file b.
func rowGroupRows(t *testing.T, b []byte) []int64 {
	t.Helper()
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Close()
	var out []int64
	for g := range rdr.MetaData().NumRowGroups() {
		out = append(out, rdr.MetaData().RowGroup(g).NumRows())
	}
	return out
}
