package postgrescdc

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/storage"
)

// killAfterCommit wraps ingest so that the n-th unit is committed by
// the host, which is then killed before the source hears the ack: the
// crash window in which the host has a unit the source does not know
// it has. It returns the unit's offsets through got.
func killAfterCommit(h *storage.Host, ingest IngestFunc, n int, got chan<- segment.Offsets) IngestFunc {
	var calls atomic.Int32
	return func(ctx context.Context, u engine.Unit) error {
		call := calls.Add(1)
		err := ingest(ctx, u)
		if int(call) == n && err == nil {
			h.Kill()
			got <- append(segment.Offsets(nil), u.Offsets...)
			return storage.ErrUnanswered
		}
		return err
	}
}

// A source stopped mid-stream, then one whose host is killed just after
// committing a unit and before acking it, then one on a new host over
// the same data: the recovered offsets cover the unanswered unit, the
// third source receives its chunks again from the slot and drops them,
// and in the end the lake holds every change exactly once and equals
// the source, while no change was acked twice.
func TestRestartNoLossNoDuplicate(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(workloadSchema)
	l := newLake(t)
	cfg := e.config(workloadTables...)
	cfg.Logger = quietLogger(t)
	h1 := l.start(t)
	r1, rec1 := startSource(t, cfg, h1)
	// Every change from the slot's creation on is streamed: the workload
	// starts then, while the first source takes its snapshot.
	e.waitForSlot(t)
	w := newWorkload(t, e)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.fixed()
		w.random(300)
	}()
	waitFor(t, 20*time.Second, "changes acked by the first source", func() bool { return r1.src.Stats().Changes > 200 })
	if err := r1.stop(t); err != nil {
		t.Fatalf("first Run: %v", err)
	}

	rec2 := &recorder{}
	unanswered := make(chan segment.Offsets, 1)
	r2 := startOn(t, cfg, h1, rec2.wrap(killAfterCommit(h1, h1.Ingest, 3, unanswered)))
	var lost segment.Offsets
	select {
	case lost = <-unanswered:
	case <-time.After(20 * time.Second):
		t.Fatal("the second source did not submit 3 units")
	}
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run: %v", err)
	}

	// The disk WAL counts a unit it replays as committed once its
	// generation commits: wait for that, so that the third source starts
	// from offsets that cover the unanswered unit and must drop it itself.
	h2 := l.start(t)
	waitFor(t, 10*time.Second, "recovery to commit the unanswered unit", func() bool {
		recovered, err := h2.Offsets(context.Background())
		return err == nil && recovered.Covers(lost)
	})
	r3, rec3 := startSource(t, cfg, h2)
	<-done
	w.check()
	checkLake(t, e, l, workloadTables, w.changes)
	if err := r3.stop(t); err != nil {
		t.Fatalf("third Run: %v", err)
	}
	checkAckedOnce(t, rec1, rec2, rec3)
	if r3.src.Stats().ChangesSkipped == 0 {
		t.Fatalf("the third source skipped nothing; the unit committed at the kill (%v) must come again and be dropped", lost)
	}
}

// A source stopped in the middle of a transaction of many chunks — some
// of its units acked, the rest not yet received — and started again
// receives the whole transaction again from the slot, drops exactly the
// chunks it had acked (same cut, same positions) and ingests the rest:
// every change acked once, the lake equal to the source.
func TestRestartInsideLargeTransaction(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE big (id int PRIMARY KEY, v text)`)
	tables := []string{"public.big"}
	l := newLake(t)
	h := l.start(t)
	cfg := e.config(tables...)
	cfg.Logger = quietLogger(t)

	// From the third unit inside a transaction on, every unit waits for
	// the stop and is then refused as a cancelled submit: when the whole
	// transaction streamed in before the stop, its units are one flight,
	// which a stop lets land, and they must not be acked.
	var streamUnits atomic.Int32
	var thirdOnce sync.Once
	third, stopping := make(chan struct{}), make(chan struct{})
	gated := func(ctx context.Context, u engine.Unit) error {
		if len(u.Sidecar.Rows) > 0 && u.Sidecar.Rows[0].Order > 0 && streamUnits.Add(1) >= 3 {
			thirdOnce.Do(func() { close(third) })
			<-stopping // the stop lands meanwhile, however loaded the box
			return context.Canceled
		}
		return h.Ingest(ctx, u)
	}
	rec1 := &recorder{}
	r1 := startOn(t, cfg, h, rec1.wrap(gated))
	src1 := r1.src
	waitFor(t, 10*time.Second, "the stream", func() bool { return src1.Stats().ConfirmedLSN > 0 })
	w := &workload{t: t, conn: e.db}
	w.tx(ch(`INSERT INTO big SELECT g, 'small' FROM generate_series(1, 10) g`))
	w.tx(ch(`INSERT INTO big SELECT g, 'large' FROM generate_series(11, 3010) g`),
		ch(`UPDATE big SET v = 'updated ' || id WHERE id %% 3 = 0`), ch(`DELETE FROM big WHERE id %% 7 = 0`))
	w.check()
	<-third
	r1.cancel() // before the third unit goes on: the stop falls inside the transaction
	close(stopping)
	if err := r1.stop(t); err != nil {
		t.Fatalf("first Run: %v", err)
	}
	acked1 := src1.Stats().Changes
	if acked1 == 0 || int64(acked1) >= w.changes {
		t.Fatalf("the first source acked %d of %d changes; the stop must fall inside the large transaction", acked1, w.changes)
	}

	r2, rec2 := startSource(t, cfg, h)
	checkLake(t, e, l, tables, w.changes)
	if err := r2.stop(t); err != nil {
		t.Fatalf("second Run: %v", err)
	}
	if n := checkAckedOnce(t, rec1, rec2); int64(n) != w.changes {
		t.Fatalf("%d distinct changes acked, the workload made %d", n, w.changes)
	}
	if r2.src.Stats().ChangesSkipped == 0 {
		t.Fatal("the second source skipped nothing: the large transaction's acked chunks must come again and be dropped")
	}
}

// After a crash the host replays from its log the units it had acked
// but not yet written to a segment; until that segment commits they are
// pending, and its offsets view does not show them. A source started on
// such a view receives their chunks again, with changes made since, and
// groups them otherwise: it must not store the chunks of a replayed unit
// a second time in a unit that goes past it. Its first unit is one chunk
// (acked as covered by the replayed unit); the host's view read after it
// drops the rest of what the host replayed.
func TestRestartWhileTheHostReplays(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE r (id int PRIMARY KEY, v text)`)
	tables := []string{"public.r"}
	l := newLake(t)
	h1 := l.start(t)
	cfg := e.config(tables...)
	cfg.Logger = quietLogger(t)
	cfg.HostOffsets = h1.Offsets
	cfg.FlushInterval = 200 * time.Millisecond // chunks gather into units even when transactions come slowly
	src1, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The first unit of three chunks or more is committed, then the host
	// dies; stale is the view as it was before that unit.
	var stale segment.Offsets
	unanswered := make(chan segment.Offsets, 1)
	var killed atomic.Bool
	ingest := func(ctx context.Context, u engine.Unit) error {
		if killed.Load() {
			return storage.ErrStopped
		}
		before, _ := h1.Offsets(ctx)
		err := h1.Ingest(ctx, u)
		if err == nil && len(u.Batches) >= 3 && killed.CompareAndSwap(false, true) {
			stale = before
			h1.Kill()
			unanswered <- append(segment.Offsets(nil), u.Offsets...)
			return storage.ErrUnanswered
		}
		return err
	}
	r1 := run(t, src1, ingest, nil)
	waitFor(t, 10*time.Second, "the stream", func() bool { return src1.Stats().ConfirmedLSN > 0 })
	w := &workload{t: t, conn: e.db}
	// 120 rows a transaction are three chunks (ChunkRows 50), so a unit
	// of three chunks forms however slowly they come (in a CI run beside
	// the simulator sweep, 60-row ones formed none in 10 s).
	for i := range 6 {
		w.tx(ch(`INSERT INTO r SELECT g, 'v' FROM generate_series(%d, %d) g`, i*120+1, i*120+120))
	}
	var lost segment.Offsets
	select {
	case lost = <-unanswered:
	case <-time.After(10 * time.Second):
		t.Fatal("no unit of three chunks or more")
	}
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	w.tx(ch(`UPDATE r SET v = 'after' WHERE id %% 2 = 0`), ch(`INSERT INTO r VALUES (1000, 'new')`))
	w.check()

	h2 := l.start(t)
	if stale.Covers(lost) {
		t.Fatalf("the view %v before the lost unit covers it (%v)", stale, lost)
	}
	// One unit for the whole backlog: it would run past the replayed one.
	cfg.HostOffsets, cfg.UnitRows, cfg.FlushInterval = h2.Offsets, 4000, time.Second
	src2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rec2 := &recorder{}
	r2 := run(t, src2, rec2.wrap(h2.Ingest), stale) // as a daemon reading the view too early would
	checkLake(t, e, l, tables, w.changes)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	checkAckedOnce(t, rec2)
	if src2.Stats().ChangesSkipped == 0 {
		t.Fatal("the second source skipped nothing: the host's view after its first unit covers the replayed chunks")
	}
}
