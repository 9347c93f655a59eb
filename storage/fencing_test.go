package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Regression tests for engine findings made on the production runtime:
// a superseded writer must not ack, the sweeper racing a paused writer
// must not corrupt the log, Close during recovery keeps ingest closed, and
// a resubmitted unanswered unit joins the pending one.

// A writer whose epoch has been superseded must not ack (it used to: the
// epoch was never checked at commit). The same idempotent unit, submitted
// to the stale writer and then to the current one, ends up committed once.
func TestSupersededWriterCannotAck(t *testing.T) {
	f, ctx := newHostFixture(t), testCtx(t)
	h1 := f.host(t, nil)
	startHost(t, ctx, h1) // epoch 1
	h2 := f.host(t, nil)
	startHost(t, ctx, h2) // epoch 2: h1 should now be fenced

	u := f.unit("dup", "orders")
	u.IdempotencyKey = "order-dup"
	if err := h1.Ingest(ctx, u); err == nil {
		t.Errorf("the superseded writer (epoch 1) acked a unit after epoch 2 recovered")
	}
	u2 := f.unit("dup", "orders")
	u2.IdempotencyKey = "order-dup"
	mustIngest(t, ctx, h2, u2)
	h1.Kill()
	h2.Kill()

	h3 := f.host(t, nil)
	startHost(t, ctx, h3)
	readOwned(t, ctx, f.client, h3, f.spec) // reports "unit dup is in segment … and in segment …"
}

// The sweeper of a new incarnation deletes the body of a superseded
// writer paused between its body upload and its marker PUT. When the old
// writer's marker then lands it does not count (its epoch was sealed), so
// the old writer must not ack, and the next recovery must neither fail
// (marker without body) nor own it. It used to ack and then fail closed.
func TestSweeperRacingPausedWriter(t *testing.T) {
	f, ctx := newHostFixture(t), testCtx(t)
	// h1 pauses just before its marker PUT is sent; its own request
	// timeout is long so that the held request is not cancelled.
	g := newGate(isMarkerPut, false)
	cfg := walConfig("host-test", hostRequestTimeout)
	h1 := newWALHost(t, cfg, newClientVia(f.endpoint, g), 30*time.Second)
	startHost(t, ctx, h1)
	u := f.unit("paused", "events")
	u.Offsets = segment.Offsets{{Key: "src/paused", Value: 1}}
	answer := ingest(ctx, h1, u)
	<-g.arrived // body stored; marker PUT not sent yet

	h2 := f.host(t, nil) // recovers, sweeps epoch-1 orphans (OrphanGrace 0)
	startHost(t, ctx, h2)
	waitStats(t, ctx, h2, func(s engine.Stats) bool { return s.OrphansSwept > 0 })
	h2.Kill()

	g.open() // h1 resumes: its marker PUT lands
	if err := <-answer; err == nil {
		t.Fatal("the paused, superseded writer acked its unit")
	}
	h1.Kill()

	h3 := f.host(t, nil)
	if err := h3.Start(ctx); err != nil {
		t.Fatalf("recovery after the stale marker landed: %v", err)
	}
	segs, err := h3.Segments(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range segs {
		if s.ID.Epoch == 1 {
			t.Fatalf("recovery owns the fenced segment %s", s.ID)
		}
	}
}

// Close during recovery keeps ingest closed: recovery must not open it
// afterwards (it used to, and then acked units).
func TestCloseDuringRecoveryStaysClosed(t *testing.T) {
	srv := newFakeS3(t)
	l := startLoop(t)
	store := NewS3Store(l, newTestClient(srv.URL), testBucket, S3Options{RequestTimeout: time.Second})
	cfg := walConfig("close-recovery", 200*time.Millisecond)
	e, err := engine.New(cfg, l.Ports(store, nil))
	if err != nil {
		t.Fatal(err)
	}
	closed, _ := Call(l, func(done func(error)) {
		e.Start(func(error) {})
		e.Close(done)
	})
	t.Logf("Close during recovery: %v", closed)
	time.Sleep(cfg.FenceWait + time.Second)
	spec := walSpec{uid: "after-close", ns: "orders", rows: 4, payloadBytes: 16}
	u := spec.unit()
	defer releaseUnit(u)
	acked, _ := Call(l, func(done func(error)) { e.Submit(u, done) })
	if !errors.Is(acked, engine.ErrClosed) {
		t.Errorf("Submit after a Close that answered ErrClosed: %v (nil = acked), want ErrClosed", acked)
	}
}

// A unit whose Ingest stopped waiting (context) is still pending in the
// engine; resubmitting it — the documented reaction to "no answer" —
// shares the pending unit's answer. (It used to be refused with
// ErrInvalidUnit, documented as permanent.)
func TestResubmittedUnitJoinsPending(t *testing.T) {
	f, ctx := newHostFixture(t), testCtx(t)
	g := newGate(isMarkerPut, false)
	h := f.host(t, g)
	startHost(t, ctx, h)
	short, cancel := context.WithCancel(ctx)
	u := f.unit("impatient", "sessions")
	u.Offsets = segment.Offsets{{Key: "src/impatient", Value: 1}}
	answer := ingest(short, h, u)
	<-g.arrived
	cancel()
	<-answer
	u2 := f.unit("impatient", "sessions")
	u2.Offsets = segment.Offsets{{Key: "src/impatient", Value: 1}}
	retry := ingest(ctx, h, u2)
	time.Sleep(50 * time.Millisecond) // let the retry reach the engine
	g.open()
	if err := <-retry; err != nil {
		t.Fatalf("retry of an unanswered replayable unit: %v", err)
	}
	releaseUnit(u2)
}
