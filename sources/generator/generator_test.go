package generator

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fastStreams are unpaced streams small enough for unit tests.
func fastStreams() []Stream {
	return []Stream{
		{Namespace: "events", Partitions: 3, BatchRows: 50},
		{Namespace: "pageviews", Partitions: 1, BatchRows: 7},
		{Namespace: "orders", Partitions: 1, BatchRows: 40, TotalRows: 100},
		{Namespace: "sessions", Partitions: 2, BatchRows: 25},
	}
}

func newTestGenerator(t *testing.T, streams []Stream) (*Generator, *memory.CheckedAllocator) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return New(Config{Streams: streams, Allocator: mem, Logger: quiet, RetryBase: time.Millisecond, RetryMax: 4 * time.Millisecond}), mem
}

// unitRecord is what a fake ingest saw of one submission.
type unitRecord struct {
	key     segment.PartitionKey
	offsets segment.Offsets
	rows    int64
	batch   arrow.RecordBatch // retained; released at cleanup
}

// recorder is a fake host: it answers with answer(u, attempt) and
// records every submission, checking that no offset key ever has two
// units in flight.
type recorder struct {
	t        *testing.T
	mu       sync.Mutex
	units    []unitRecord
	inFlight map[string]bool
	attempts map[string]int // by offsets' string form
	answer   func(u engine.Unit, attempt int) error
	acked    segment.Offsets
}

func newRecorder(t *testing.T, answer func(u engine.Unit, attempt int) error) *recorder {
	r := &recorder{t: t, inFlight: map[string]bool{}, attempts: map[string]int{}, answer: answer}
	t.Cleanup(func() {
		for _, u := range r.units {
			u.batch.Release()
		}
	})
	return r
}

func (r *recorder) ingest(ctx context.Context, u engine.Unit) error {
	if len(u.Offsets) != 1 || len(u.Batches) != 1 {
		r.t.Errorf("unit with %d offsets, %d batches", len(u.Offsets), len(u.Batches))
	}
	key := u.Offsets[0].Key
	id := fmt.Sprint(u.Offsets)
	r.mu.Lock()
	if r.inFlight[key] {
		r.t.Errorf("two units in flight for %s", key)
	}
	r.inFlight[key] = true
	r.attempts[id]++
	attempt := r.attempts[id]
	u.Batches[0].Retain()
	r.units = append(r.units, unitRecord{key: u.Key, offsets: u.Offsets, rows: u.Batches[0].NumRows(), batch: u.Batches[0]})
	r.mu.Unlock()

	var err error
	if r.answer != nil {
		err = r.answer(u, attempt)
	}
	if ctx.Err() != nil {
		r.t.Errorf("ingest context ended: a unit in flight must not be abandoned")
	}
	r.mu.Lock()
	r.inFlight[key] = false
	if err == nil {
		r.acked = segment.MaxMerge(r.acked, u.Offsets)
	}
	r.mu.Unlock()
	return err
}

// Records are a pure function of (namespace, partition, offset): the same
// range twice is identical, a range split differently holds the same
// records, and partitions and namespaces differ.
func TestRecordsAreDeterministic(t *testing.T) {
	g, _ := newTestGenerator(t, fastStreams())
	g2, _ := newTestGenerator(t, fastStreams())
	for _, ns := range []string{"events", "pageviews", "orders", "sessions"} {
		whole := records(t, g, ns, 0, 1000, 60)
		again := records(t, g2, ns, 0, 1000, 60)
		if !array.RecordEqual(whole, again) {
			t.Fatalf("%s: two generators disagree on [1000,1060)", ns)
		}
		tail := records(t, g, ns, 0, 1030, 30)
		wholeTail := whole.NewSlice(30, 60)
		t.Cleanup(wholeTail.Release)
		if !array.RecordEqual(wholeTail, tail) {
			t.Fatalf("%s: [1030,1060) differs when generated on its own", ns)
		}
		if ns == "events" && array.RecordEqual(whole, records(t, g, ns, 1, 1000, 60)) {
			t.Fatalf("%s: partitions 0 and 1 produced the same records", ns)
		}
		if !whole.Schema().Equal(tables[ns].schema) || whole.NumRows() != 60 {
			t.Fatalf("%s: schema %v, %d rows", ns, whole.Schema(), whole.NumRows())
		}
	}
	first := records(t, g, "events", 0, 0, 10).NewSlice(0, 1)
	t.Cleanup(first.Release)
	if array.RecordEqual(first, records(t, g, "events", 0, 1, 1)) {
		t.Fatal("neighbouring offsets produced the same record")
	}
	if _, err := g.Records("nope", 0, 0, 1); err == nil {
		t.Fatal("unknown namespace accepted")
	}
}

func records(t *testing.T, g *Generator, ns string, part int, from uint64, n int) arrow.RecordBatch {
	t.Helper()
	b, err := g.Records(ns, part, from, n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Release)
	return b
}

// Event times derive from the offset, never from the wall clock, and
// the columns look like what they claim to be.
func TestRecordsLookReal(t *testing.T) {
	g, _ := newTestGenerator(t, fastStreams())
	b := records(t, g, "events", 0, 3_600_000, 100) // an hour of events in
	ids := b.Column(0).(*array.String)
	times := b.Column(5).(*array.Timestamp)
	for i := range int(b.NumRows()) {
		if len(ids.Value(i)) != 36 || ids.Value(i)[14] != '4' {
			t.Fatalf("event_id %q is not UUID-shaped", ids.Value(i))
		}
		at := times.Value(i).ToTime(arrow.Microsecond)
		want := DefaultEpoch.Add(time.Hour + time.Duration(i)*time.Millisecond)
		if at.Before(want) || !at.Before(want.Add(time.Millisecond)) {
			t.Fatalf("row %d event_time %v, want within a millisecond of %v", i, at, want)
		}
	}
	refs := records(t, g, "pageviews", 0, 0, 500).Column(3)
	if refs.NullN() == 0 || refs.NullN() == refs.Len() {
		t.Fatalf("pageviews.referrer has %d nulls of %d; want some, not all", refs.NullN(), refs.Len())
	}
	orderIDs := records(t, g, "orders", 0, 10, 5).Column(0).(*array.Int64)
	for i := range 5 {
		if orderIDs.Value(i) != int64(11+i) {
			t.Fatalf("order_id %d at offset %d", orderIDs.Value(i), 10+i)
		}
	}
}

// Units carry their partition's key and the offset after their last
// record; a snapshot stops at its total; every partition starts at 0.
func TestRunProducesKeyedUnitsAndStopsSnapshots(t *testing.T) {
	streams := []Stream{{Namespace: "orders", Partitions: 2, BatchRows: 40, TotalRows: 100}}
	g, _ := newTestGenerator(t, streams)
	rec := newRecorder(t, nil)
	if err := g.Run(context.Background(), rec.ingest, nil); err != nil {
		t.Fatal(err)
	}
	want := segment.Offsets{{Key: "generator/orders/0", Value: 100}, {Key: "generator/orders/1", Value: 100}}
	if fmt.Sprint(rec.acked) != fmt.Sprint(want) || fmt.Sprint(g.Positions()) != fmt.Sprint(want) {
		t.Fatalf("acked %v, positions %v; want %v", rec.acked, g.Positions(), want)
	}
	if len(rec.units) != 6 { // 40 + 40 + 20 per partition
		t.Fatalf("%d units, want 6", len(rec.units))
	}
	for _, u := range rec.units {
		if u.key.SinkRef != "lake" || u.key.Namespace != "orders" || u.key.Schema != segment.FingerprintOf(tables["orders"].schema) {
			t.Fatalf("key %v", u.key)
		}
		end := u.offsets[0].Value
		if u.key.Partition != u.offsets[0].Key[len(u.offsets[0].Key)-1:] {
			t.Fatalf("unit for partition %q carries offset key %q", u.key.Partition, u.offsets[0].Key)
		}
		first := u.batch.Column(0).(*array.Int64).Value(0)
		if uint64(first)+uint64(u.rows)-1 != end { // order_id = offset+1
			t.Fatalf("unit ending at offset %d starts with order %d and has %d rows", end, first, u.rows)
		}
	}
	if s := g.Stats(); s.RowsAcked != 200 || s.RowsIngested != 200 || s.UnitsAcked != 6 || s.Retries != 0 {
		t.Fatalf("stats %+v", s)
	}
}

// A restart resumes every partition from the offsets the host recovered
// and regenerates exactly the records that follow: together the two runs
// hold each record once, identical to a run that never stopped.
func TestRunResumesFromOffsets(t *testing.T) {
	streams := fastStreams()
	g1, _ := newTestGenerator(t, streams)
	ctx, cancel := context.WithCancel(context.Background())
	var units sync.Map // per offset key, units acked so far
	rec1 := newRecorder(t, func(u engine.Unit, _ int) error {
		v, _ := units.LoadOrStore(u.Offsets[0].Key, new(int))
		if n := v.(*int); *n >= 3 {
			cancel() // a "crash" after three units of some key
		} else {
			*n++
		}
		return nil
	})
	if err := g1.Run(ctx, rec1.ingest, nil); err != nil {
		t.Fatal(err)
	}
	recovered := rec1.acked
	if len(recovered) == 0 {
		t.Fatal("nothing acked before the stop")
	}

	g2, _ := newTestGenerator(t, streams)
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	pending := map[string]bool{} // partitions that must produce again
	for _, p := range g2.parts {
		if v, _ := recovered.Get(p.offsetKey); p.stream.TotalRows == 0 || v < p.stream.TotalRows {
			pending[p.offsetKey] = true
		}
	}
	var mu sync.Mutex
	rec2 := newRecorder(t, func(u engine.Unit, _ int) error {
		mu.Lock()
		defer mu.Unlock()
		if key := u.Offsets[0].Key; pending[key] {
			delete(pending, key)
			checkResumed(t, g2, u, recovered)
		}
		if len(pending) == 0 {
			cancel2()
		}
		return nil
	})
	if err := g2.Run(ctx2, rec2.ingest, recovered); err != nil {
		t.Fatal(err)
	}
	for _, u := range rec2.units {
		if from, _ := recovered.Get(u.offsets[0].Key); u.offsets[0].Value <= from {
			t.Fatalf("resumed run resubmitted %v, recovered %d", u.offsets, from)
		}
	}
}

// A snapshot the host already holds entirely produces nothing again.
func TestRunSkipsACompleteSnapshot(t *testing.T) {
	g, _ := newTestGenerator(t, []Stream{{Namespace: "orders", Partitions: 1, BatchRows: 40, TotalRows: 100}})
	rec := newRecorder(t, nil)
	done := segment.Offsets{{Key: "generator/orders/0", Value: 100}, {Key: "other/key", Value: 7}}
	if err := g.Run(context.Background(), rec.ingest, done); err != nil {
		t.Fatal(err)
	}
	if len(rec.units) != 0 {
		t.Fatalf("%d units for a complete snapshot", len(rec.units))
	}
}

// checkResumed checks a resumed partition's first unit: it starts where
// the recovered offset says and holds the records a straight run would.
func checkResumed(t *testing.T, g *Generator, u engine.Unit, recovered segment.Offsets) {
	t.Helper()
	key := u.Offsets[0].Key
	from, _ := recovered.Get(key)
	rows := u.Batches[0].NumRows()
	if u.Offsets[0].Value != from+uint64(rows) {
		t.Errorf("%s: resumed unit ends at %d with %d rows; recovered offset %d", key, u.Offsets[0].Value, rows, from)
		return
	}
	part := int(u.Key.Partition[0] - '0')
	want, err := g.Records(u.Key.Namespace, part, from, int(rows))
	if err != nil {
		t.Error(err)
		return
	}
	defer want.Release()
	if !array.RecordEqual(want, u.Batches[0]) {
		t.Errorf("%s: resumed records differ from a straight run's", key)
	}
}

// Backpressure, "not ready" and an unknown outcome (a log write that
// failed, a host that stopped answering) are retried with the very same
// unit; a unit the host can never take, or a host that refuses units for
// good, stops the run and is returned.
func TestRunRetriesTheSameUnitAndStopsOnRefusals(t *testing.T) {
	streams := []Stream{{Namespace: "events", Partitions: 1, BatchRows: 10, TotalRows: 30}}
	g, _ := newTestGenerator(t, streams)
	errUnanswered := errors.New("unit unanswered")
	rec := newRecorder(t, func(u engine.Unit, attempt int) error {
		switch attempt {
		case 1:
			return fmt.Errorf("%w: admission full", engine.ErrResourceExhausted)
		case 2:
			return engine.ErrNotReady
		case 3:
			return fmt.Errorf("%w: WAL segment 00000001.log: no space left on device", engine.ErrUnknownOutcome)
		case 4:
			return errUnanswered
		}
		return nil
	})
	if err := g.Run(context.Background(), rec.ingest, nil); err != nil {
		t.Fatal(err)
	}
	const tries = 5
	if len(rec.units) != 3*tries {
		t.Fatalf("%d submissions, want 3 units × %d attempts", len(rec.units), tries)
	}
	for i := 0; i < len(rec.units); i++ {
		a, b := rec.units[i-i%tries], rec.units[i]
		if fmt.Sprint(a.offsets) != fmt.Sprint(b.offsets) || !array.RecordEqual(a.batch, b.batch) {
			t.Fatalf("a retry changed the unit: %v then %v", a.offsets, b.offsets)
		}
	}
	if s := g.Stats(); s.Retries != 3*(tries-1) || s.Unknowns != 3*2 || s.RowsAcked != 30 || s.RowsIngested != 30 {
		t.Fatalf("stats %+v", s)
	}

	for _, refusal := range []error{
		fmt.Errorf("%w: failed closed", engine.ErrClosed),
		fmt.Errorf("%w: no batches", engine.ErrInvalidUnit),
	} {
		g2, _ := newTestGenerator(t, fastStreams())
		rec2 := newRecorder(t, func(u engine.Unit, _ int) error {
			if u.Offsets[0].Key == "generator/events/1" && u.Offsets[0].Value > 100 {
				return refusal
			}
			return nil
		})
		err := g2.Run(context.Background(), rec2.ingest, nil)
		if !errors.Is(err, refusal) {
			t.Fatalf("run: %v, want %v", err, refusal)
		}
		if v, _ := g2.Positions().Get("generator/events/1"); v != 100 {
			t.Fatalf("events/1 position %d, want 100 (the refused unit is not acked)", v)
		}
		if s := g2.Stats(); s.RowsIngested != s.RowsAcked || s.Unknowns != 0 {
			t.Fatalf("stats %+v: the refused unit still counts as ingested, or was retried", s)
		}
	}
}

// When ctx ends while the host is closing, ErrClosed is a clean stop.
func TestRunStopsCleanlyWhenTheHostCloses(t *testing.T) {
	g, _ := newTestGenerator(t, fastStreams())
	ctx, cancel := context.WithCancel(context.Background())
	rec := newRecorder(t, func(engine.Unit, int) error {
		cancel()
		return fmt.Errorf("%w: closing", engine.ErrClosed)
	})
	if err := g.Run(ctx, rec.ingest, nil); err != nil {
		t.Fatalf("run: %v", err)
	}
}
