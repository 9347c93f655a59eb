package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// testHost is the test's side of the ingest port: it acks a unit by
// committing its offsets (max-merged) and recording its rows, answers
// a unit whose offsets are covered without recording it again (as the
// engine does), and lets a test script other answers.
type testHost struct {
	t         *testing.T
	mu        sync.Mutex
	committed segment.Offsets
	units     []gotUnit
	calls     int
	// answer, if set, answers call n (1-based) before the host looks at
	// the unit; nil: take it.
	answer func(n int, u engine.Unit) error
	// onAck runs after the n-th unit is committed and recorded; what it
	// returns is the answer (an error: committed, but the source is not
	// told so — a crash before the ack).
	onAck func(n int) error
}

// gotUnit is what the host recorded of a unit.
type gotUnit struct {
	offset segment.Offset
	schema *arrow.Schema
	ids    []int64
}

func newHost(t *testing.T) *testHost { return &testHost{t: t} }

func (h *testHost) ingest(ctx context.Context, u engine.Unit) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if ctx.Err() != nil {
		h.t.Errorf("ingest called with an ended context: the source must detach it")
	}
	if h.answer != nil {
		if err := h.answer(h.calls, u); err != nil {
			return err
		}
	}
	h.check(u)
	if h.committed.Covers(u.Offsets) {
		return nil // committed before: acked, not stored again
	}
	h.committed = segment.MaxMerge(h.committed, u.Offsets)
	h.units = append(h.units, gotUnit{offset: plainOffset(u), schema: u.Schema, ids: ids(h.t, u)})
	if h.onAck != nil {
		return h.onAck(len(h.units))
	}
	return nil
}

// check verifies what the engine would refuse.
func (h *testHost) check(u engine.Unit) {
	h.t.Helper()
	if err := u.Key.Validate(); err != nil {
		h.t.Errorf("unit key: %v", err)
	}
	if got := segment.FingerprintOf(u.Schema); got != u.Key.Schema {
		h.t.Errorf("unit key fingerprint %x, schema's %x", u.Key.Schema, got)
	}
	floors := 0
	for _, o := range u.Offsets {
		if segment.IsFloor(o.Key) {
			floors++
		}
	}
	if len(u.Offsets)-floors != 1 || floors > 1 || u.Offsets.Validate() != nil {
		h.t.Errorf("unit offsets %v: want one valid entry, and a floor or none", u.Offsets)
	}
	for i, b := range u.Batches {
		if !b.Schema().Equal(u.Schema) {
			h.t.Errorf("batch %d schema %v, unit's %v", i, b.Schema(), u.Schema)
		}
	}
}

// plainOffset is the offset of u that is no floor.
func plainOffset(u engine.Unit) segment.Offset {
	for _, o := range u.Offsets {
		if !segment.IsFloor(o.Key) {
			return o
		}
	}
	return segment.Offset{}
}

// ids returns the "id" column of u's rows.
func ids(t *testing.T, u engine.Unit) []int64 {
	t.Helper()
	var out []int64
	for _, b := range u.Batches {
		idx := b.Schema().FieldIndices("id")
		if len(idx) != 1 {
			t.Fatalf("no id column in %v", b.Schema())
		}
		col, ok := b.Column(idx[0]).(*array.Int64)
		if !ok {
			t.Fatalf("id column is %s", b.Column(idx[0]).DataType())
		}
		out = append(out, col.Int64Values()...)
	}
	return out
}

// allIDs returns every id the host recorded, sorted, and fails on a
// duplicate.
func (h *testHost) allIDs() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []int64
	for _, u := range h.units {
		all = append(all, u.ids...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			h.t.Errorf("id %d ingested twice", all[i])
		}
	}
	return all
}

// unitsOf returns the units recorded for an offset key, in order.
func (h *testHost) unitsOf(key string) []gotUnit {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []gotUnit
	for _, u := range h.units {
		if u.offset.Key == key {
			out = append(out, u)
		}
	}
	return out
}

func (h *testHost) offsets() segment.Offsets {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.committed)
}

// fixture is a source under test and what it runs against.
type fixture struct {
	t    *testing.T
	src  *Source
	host *testHost
	log  *logbuf.Buffer
	mem  *memory.CheckedAllocator
	// sleeps records the backoffs asked for (under mu: tasks sleep at once).
	mu     sync.Mutex
	sleeps []time.Duration
}

// newFixture returns a source over store; cfg's zero fields take test
// values. Its poll ends Run after one pass unless the test replaces it.
// At the end of the test every Arrow byte must be released.
func newFixture(t *testing.T, cfg Config, store Store) *fixture {
	t.Helper()
	f := &fixture{t: t, host: newHost(t), log: &logbuf.Buffer{}, mem: memory.NewCheckedAllocator(memory.NewGoAllocator())}
	t.Cleanup(func() { f.mem.AssertSize(t, 0) })
	if cfg.Name == "" {
		cfg.Name = "drop"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "events"
	}
	if cfg.SinkRef == "" {
		cfg.SinkRef = "lake"
	}
	cfg.Allocator = f.mem
	cfg.Logger = slog.New(slog.NewTextHandler(f.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	src, err := New(cfg, store)
	if err != nil {
		t.Fatal(err)
	}
	src.sleep = func(ctx context.Context, d time.Duration) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.sleeps = append(f.sleeps, d)
		return ctx.Err()
	}
	src.poll = func(context.Context) error { return errOnePass }
	f.src = src
	return f
}

var errOnePass = errors.New("test: one pass")

// run runs the source with the host's committed offsets and returns
// Run's answer.
func (f *fixture) run(ctx context.Context) error {
	return f.src.Run(ctx, f.host.ingest, f.host.offsets())
}

// writeFile writes a file under dir, making folders.
func writeFile(t *testing.T, dir, key string, body []byte) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
}

// jsonlRows returns n JSON lines with ids from, from+1, …
func jsonlRows(from, n int) []byte {
	var b bytes.Buffer
	for i := range n {
		id := from + i
		fmt.Fprintf(&b, "{\"id\":%d,\"name\":\"row %d\",\"v\":%d.5}\n", id, id, id)
	}
	return b.Bytes()
}

// csvRows returns a CSV header and n rows with ids from on; every
// fifth row's name is quoted and spans two lines.
func csvRows(from, n int) []byte {
	var b bytes.Buffer
	b.WriteString("id,name,v\n")
	for i := range n {
		id := from + i
		if id%5 == 0 {
			fmt.Fprintf(&b, "%d,\"row\n%d, \"\"quoted\"\"\",%d.5\n", id, id, id)
		} else {
			fmt.Fprintf(&b, "%d,row %d,%d.5\n", id, id, id)
		}
	}
	return b.Bytes()
}

// parquetBytes returns a Parquet file of groups row groups of rows rows,
// ids from on.
func parquetBytes(t *testing.T, from, groups, rows int) []byte {
	t.Helper()
	sizes := make([]int, groups)
	for i := range sizes {
		sizes[i] = rows
	}
	return parquetGroups(t, from, sizes...)
}

// parquetGroups returns a Parquet file of row groups of the sizes given,
// ids from on, each with a schema-level metadata entry naming the file.
func parquetGroups(t *testing.T, from int, sizes ...int) []byte {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	schema = arrow.NewSchema(schema.Fields(), func() *arrow.Metadata {
		m := arrow.NewMetadata([]string{"written_for"}, []string{fmt.Sprint(from)})
		return &m
	}())
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(schema, &buf, parquet.NewWriterProperties(), pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewGoAllocator()
	id := from
	for _, rows := range sizes {
		b := array.NewRecordBuilder(mem, schema)
		for range rows {
			b.Field(0).(*array.Int64Builder).Append(int64(id))
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("row %d", id))
			id++
		}
		rec := b.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// seq returns from, from+1, …, from+n-1.
func seq(from, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(from + i)
	}
	return out
}

// concat returns the lists joined and sorted.
func concat(lists ...[]int64) []int64 {
	var out []int64
	for _, l := range lists {
		out = append(out, l...)
	}
	slices.Sort(out)
	return out
}

// sameIDs fails unless got equals want.
func sameIDs(t *testing.T, got, want []int64) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("ids: got %d, want %d\nmissing %v\nextra %v", len(got), len(want), diff(want, got), diff(got, want))
	}
}

// diff returns the ids of a not in b (both sorted), at most 20.
func diff(a, b []int64) []int64 {
	var out []int64
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok && len(out) < 20 {
			out = append(out, x)
		}
	}
	return out
}

// contains fails unless s holds every one of parts.
func contains(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q does not contain %q", s, p)
		}
	}
}
