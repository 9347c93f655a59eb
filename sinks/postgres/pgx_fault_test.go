package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/storage"
)

// faultRig is a database reached through a proxy that cuts COMMITs, the
// sink's DB on it, and a Sink driving that DB through storage.Workers on
// a running storage.Loop, as the daemon wires it.
type faultRig struct {
	*server
	proxy *proxy
	loop  *storage.Loop
	sink  *Sink
}

func newFaultRig(t *testing.T) *faultRig {
	t.Helper()
	dbURL := pgtest.Database(t)
	px := newProxy(t, dbURL)
	s := openServer(t, px.url, dbURL, 2)
	loop := storage.NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = loop.Run(ctx) }()
	t.Cleanup(func() { cancel(); loop.Stop() })
	return &faultRig{server: s, proxy: px, loop: loop, sink: NewSink(s.db, storage.NewWorkers(loop, 1, testTimeout))}
}

// sinkApply runs job through the Sink on the loop and returns done's error.
func (r *faultRig) sinkApply(t *testing.T, job *engine.Job) error {
	t.Helper()
	err, stop := storage.Call(r.loop, func(done func(error)) { r.sink.Apply(job, done) })
	if stop != nil {
		t.Fatalf("the loop stopped: %v", stop)
	}
	return err
}

// The connection breaks after the server received COMMIT and before its
// answer came back: Apply says ErrAmbiguous, and the job did land —
// Applied finds it, and its rows are there once. Through the Sink the
// same fault is settled by that lookup: done(nil), counted as an
// ambiguous commit that landed.
func TestPGXAmbiguousCommitLanded(t *testing.T) {
	r := newFaultRig(t)
	r.proxy.arm(cutAfterCommit)
	direct := plainJob("j-direct", "landed", bigBatch(t, 50))
	err := r.apply(t, direct)
	if !errors.Is(err, ErrAmbiguous) || r.proxy.cutCount() != 1 {
		t.Fatalf("Apply with COMMIT cut after sending: err %v (cuts %d), want ErrAmbiguous", err, r.proxy.cutCount())
	}
	found, err := r.db.Applied(ctxT(t), mustPlan(t, direct))
	if err != nil || found != FoundApplied {
		t.Fatalf("Applied = %s, %v; the COMMIT reached the server", found, err)
	}
	if n := r.count(t, "SELECT count(*) FROM landed"); n != 50 {
		t.Fatalf("%d rows, want 50", n)
	}

	r.proxy.arm(cutAfterCommit)
	if err := r.sinkApply(t, plainJob("j-sink", "landed", bigBatch(t, 50))); err != nil {
		t.Fatalf("Sink.Apply: %v, want the lookup to settle it as applied", err)
	}
	if st := r.sink.Stats(); r.proxy.cutCount() != 2 || st.AmbiguousLanded != 1 || st.AmbiguousLost != 0 || st.Applied != 1 {
		t.Fatalf("cuts %d, stats %+v; want 2 cuts, one landed ambiguous commit", r.proxy.cutCount(), st)
	}
	if n := r.count(t, "SELECT count(*) FROM landed"); n != 100 {
		t.Fatalf("%d rows, want 100", n)
	}
}

// The connection breaks as the client sends COMMIT, before the server
// gets it: Apply still says ErrAmbiguous (the client cannot know), and
// the job did not land. Through the Sink the lookup settles it as a
// failure that no longer claims to be ambiguous; the retry then applies
// the job once.
func TestPGXCutBeforeCommitSettlesLost(t *testing.T) {
	r := newFaultRig(t)
	r.proxy.arm(cutBeforeCommit)
	direct := plainJob("j-direct", "lost", bigBatch(t, 50))
	err := r.apply(t, direct)
	if !errors.Is(err, ErrAmbiguous) || r.proxy.cutCount() != 1 {
		t.Fatalf("Apply with COMMIT cut before the server: err %v (cuts %d), want ErrAmbiguous", err, r.proxy.cutCount())
	}
	found, err := r.db.Applied(ctxT(t), mustPlan(t, direct))
	if err != nil || found != NotFound {
		t.Fatalf("Applied = %s, %v; the COMMIT never reached the server", found, err)
	}
	if n := r.count(t, "SELECT count(*) FROM pg_class WHERE relname = 'lost'"); n != 0 {
		t.Fatalf("the table of a job that did not commit exists")
	}

	job := plainJob("j-sink", "lost", bigBatch(t, 50))
	r.proxy.arm(cutBeforeCommit)
	err = r.sinkApply(t, job)
	if err == nil || errors.Is(err, ErrAmbiguous) || errors.Is(err, engine.ErrCannotApply) {
		t.Fatalf("Sink.Apply: %v, want a settled, retryable failure", err)
	}
	if st := r.sink.Stats(); r.proxy.cutCount() != 2 || st.AmbiguousLost != 1 || st.AmbiguousLanded != 0 || st.Failed != 1 {
		t.Fatalf("cuts %d, stats %+v; want 2 cuts, one lost ambiguous commit", r.proxy.cutCount(), st)
	}
	if err := r.sinkApply(t, job); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if n := r.count(t, "SELECT count(*) FROM lost"); n != 50 {
		t.Fatalf("%d rows, want 50", n)
	}
}
