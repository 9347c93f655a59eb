package storage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/recordpath"
)

// ErrUnanswered: a caller stopped waiting for a unit the engine had
// already taken — because the host was killed (then the error also
// matches ErrStopped), or because the caller's context ended. The unit
// may or may not be committed. It was not acked, so the source still owns
// it: it resubmits with the same idempotency key or from the recovered
// offsets, and the engine commits it at most once (docs/DESIGN.md §2.3).
var ErrUnanswered = errors.New("storage: unit unanswered")

// Host is the production wiring of one engine on one Loop, safe for use
// by many goroutines. The engine is single-threaded (docs/DESIGN.md §3): every
// Host method that touches it posts a function to the loop and waits for
// the engine's answer there, so callers never share engine state.
//
// Life cycle: NewHost → Start → Ingest/queries … → Close (graceful) or
// Kill (a crash). A Host runs once; a restart is a new Host (with a new
// Loop and store) that recovers from the object store. Every Host must
// end with Close or Kill, which stop its loop goroutine.
type Host struct {
	loop       *Loop
	eng        *engine.Engine // touched on the loop only
	layout     engine.Layout
	prepare    bool   // a disk WAL: units are encoded for the log off the loop (engine.PrepareUnit)
	closeStore func() // the store's Close, nil if it has none

	startOnce sync.Once
	started   chan struct{} // closed on the loop when engine.Start answers
	startErr  error         // written before started is closed

	stopOnce sync.Once
	exited   chan struct{} // closed when the loop goroutine has returned
}

// HostPorts are the ports a Host adds to its loop's own (clock, rand,
// timers, executor). Store and Disk must complete on the Host's loop
// (NewS3Store(loop, …), NewOSDisk(loop, …)); Disk may be nil in S3 mode,
// which never reads local disk; Sinks nil means nothing is compacted;
// Memory nil means a fixed hint (see engine.Ports).
type HostPorts struct {
	Store  engine.ObjectStore
	Disk   engine.Disk
	Sinks  engine.Sinks
	Memory engine.Memory
}

// NewHost builds an engine with cfg on loop and starts the loop's
// goroutine; the engine itself starts with Start. If the store has a
// Close method (S3Store does), Kill and Close call it.
//
// REQUIRES: loop has not run (the Host owns it from now on: nobody else
// calls Run or Stop).
func NewHost(cfg engine.Config, loop *Loop, hp HostPorts) (*Host, error) {
	store, disk := hp.Store, hp.Disk
	if loop == nil || store == nil {
		panic(fmt.Sprintf("storage: NewHost(loop=%v, store=%v)", loop != nil, store != nil))
	}
	if s, ok := store.(*S3Store); ok && s != nil && s.loop != loop {
		panic("storage: NewHost: the S3 store completes on another loop")
	}
	if d, ok := disk.(*OSDisk); ok && d != nil && d.loop != loop {
		panic("storage: NewHost: the disk completes on another loop")
	}
	loop.mu.Lock()
	running := loop.running || loop.stopped
	loop.mu.Unlock()
	if running {
		panic("storage: NewHost: the loop has already run")
	}
	ports := loop.Ports(store, disk)
	ports.Sinks, ports.Memory = hp.Sinks, hp.Memory
	eng, err := engine.New(cfg, ports)
	if err != nil {
		return nil, fmt.Errorf("storage: host: %w", err)
	}
	h := &Host{
		loop: loop, eng: eng, layout: eng.Layout(), prepare: cfg.Disk != nil,
		started: make(chan struct{}), exited: make(chan struct{}),
	}
	if c, ok := store.(interface{ Close() }); ok {
		h.closeStore = c.Close
	}
	go func() {
		defer close(h.exited)
		_ = loop.Run(context.Background()) // ends with Stop (Close, Kill)
	}()
	return h, nil
}

// Layout returns the engine's key layout (fixed at NewHost; safe from
// any goroutine).
func (h *Host) Layout() engine.Layout { return h.layout }

// Start runs the engine's recovery (docs/DESIGN.md §6.5): epoch claim, fence wait,
// LIST, seals, marker reads; then ingest opens and the orphan sweeper runs in
// the background. It blocks until recovery has finished (nil), failed
// closed (the engine's error, e.g. ErrCorrupt; the host then answers
// every Ingest with ErrClosed until it is closed and restarted), the host
// stopped (ErrStopped) or ctx ended (ctx.Err(); recovery goes on, and a
// later Start waits for the same outcome). Transient store failures do
// not end Start: recovery retries them itself. Calling Start again is
// safe; recovery runs once.
func (h *Host) Start(ctx context.Context) error {
	h.startOnce.Do(func() {
		h.loop.Post(func() {
			h.eng.Start(func(err error) {
				h.startErr = err
				close(h.started)
			})
		})
	})
	select {
	case <-h.started:
		return h.startErr
	case <-h.loop.Done():
	case <-ctx.Done():
	}
	select {
	case <-h.started: // answered just before the stop
		return h.startErr
	default:
	}
	if ctx.Err() != nil {
		return fmt.Errorf("storage: host start: %w", ctx.Err())
	}
	return fmt.Errorf("storage: host start: %w", ErrStopped)
}

// Ingest submits a unit and blocks until the engine answers it:
//
//   - nil: the unit is committed (both its segment's body and commit
//     marker are in the store) and acked. Recovery will find it.
//   - an engine error: the unit is not committed and the engine holds
//     nothing of it (engine.ErrNotReady before Start has finished,
//     engine.ErrResourceExhausted, engine.ErrInvalidUnit, engine.ErrClosed
//     once Close began or the engine failed closed; see engine.Submit).
//   - ErrUnanswered: the host stopped (also ErrStopped) or ctx ended
//     (also ctx.Err()) after the engine had taken the unit: outcome
//     unknown, see ErrUnanswered. While such a unit is still pending in a
//     live engine, resubmitting it shares its answer, and a unit at other
//     offsets for the same offset key gets engine.ErrResourceExhausted.
//   - ErrStopped or ctx.Err() without ErrUnanswered: the host stopped or
//     ctx ended before the engine took the unit; it was never submitted.
//
// Ownership: Ingest keeps its own reference to u's batches (Retain) until
// the engine has taken them — the engine retains what it accepts — so the
// caller may Release its references as soon as Ingest returns, whatever
// it returned. The Batches, Offsets and Sidecar.Rows slices are copied;
// the bytes they point to (sidecar identities, Arrow buffers) must not be
// modified afterwards.
func (h *Host) Ingest(ctx context.Context, u engine.Unit) error {
	recordpath.Spine()
	u, err := h.borrow(u)
	if err != nil {
		return fmt.Errorf("storage: ingest: %w", err)
	}
	release := func() {
		for _, b := range u.Batches {
			b.Release()
		}
	}
	answer, err := callLoop(ctx, h.loop, func(done func(error)) {
		recordpath.Spine()
		h.eng.Submit(u, recordpath.Answer(done)) // retains the batches it accepts
		release()
	}, release)
	if err != nil {
		return fmt.Errorf("storage: ingest: %w", err)
	}
	return answer
}

// borrow returns the unit the loop will submit, its references the
// Ingest call's own: u borrowed, or (disk WAL) u encoded for the log on
// the caller's goroutine — the costliest step of a submission, kept off
// the loop every unit goes through.
func (h *Host) borrow(u engine.Unit) (engine.Unit, error) {
	if !h.prepare {
		return borrowUnit(u), nil
	}
	p, err := engine.PrepareUnit(u)
	if err != nil {
		return u, err
	}
	return cloneMeta(p), nil // its batches are new: no reference to take
}

// borrowUnit copies the slices of u that the engine keeps and takes a
// reference to each batch; the caller's references stay the caller's.
func borrowUnit(u engine.Unit) engine.Unit {
	u = cloneMeta(u)
	u.Batches = slices.Clone(u.Batches)
	for _, b := range u.Batches {
		b.Retain()
	}
	return u
}

// cloneMeta copies u's offsets and sidecar rows, which the engine keeps.
func cloneMeta(u engine.Unit) engine.Unit {
	u.Offsets = slices.Clone(u.Offsets)
	if u.Sidecar != nil {
		sc := *u.Sidecar
		sc.Rows = slices.Clone(sc.Rows)
		u.Sidecar = &sc
	}
	return u
}

// The queries below (Offsets, Stats, Segments) run on the loop while the
// host runs; after Close or Kill they return the state the engine was
// left in (for Kill: as of the crash — the offsets and segments it had
// seen committed, never anything uncommitted). They fail only when ctx
// ends first.

// Offsets returns the engine's offsets view: the max-merge of every owned
// segment's source offsets (idempotency keys are the key store's, not
// here). After a recovery, replayable sources resume from it.
func (h *Host) Offsets(ctx context.Context) (segment.Offsets, error) {
	return query(ctx, h, func() segment.Offsets { return h.eng.Offsets() })
}

// ResumeOffsets returns the offsets view once every unit recovery
// replayed from the disk WAL's log has committed (Engine.ReplayPending):
// the offsets the WAL recovered, which a replayable source resumes from.
// It asks every resumePoll; only ctx ends the wait.
func (h *Host) ResumeOffsets(ctx context.Context) (segment.Offsets, error) {
	for {
		pending, err := query(ctx, h, func() int { return h.eng.ReplayPending() })
		if err != nil {
			return nil, err
		}
		if pending == 0 {
			return h.Offsets(ctx)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(resumePoll):
		}
	}
}

// resumePoll: how often ResumeOffsets asks whether replayed units are
// committed; a generation commits within milliseconds to seconds.
const resumePoll = 10 * time.Millisecond

// IdempotencyKeyKnown reports whether the engine may remember an
// idempotency key (engine.Engine.IdempotencyKeyKnown: it holds it, or a
// run's filter admits it).
func (h *Host) IdempotencyKeyKnown(ctx context.Context, key string) (bool, error) {
	return query(ctx, h, func() bool { return h.eng.IdempotencyKeyKnown(key) })
}

// Stats returns a copy of the engine's counters.
func (h *Host) Stats(ctx context.Context) (engine.Stats, error) {
	return query(ctx, h, func() engine.Stats { return h.eng.Stats() })
}

// Origin returns the log's identity: its WAL id and pipeline (zero
// before recovery claimed an epoch).
func (h *Host) Origin(ctx context.Context) (segment.Origin, error) {
	return query(ctx, h, func() segment.Origin { return h.eng.Origin() })
}

// LastAlert returns the engine's most recent alert (a condition an
// operator must look at: an unreadable bitmap, a refused job), or nil.
func (h *Host) LastAlert(ctx context.Context) (error, error) {
	return query(ctx, h, func() error { return h.eng.LastAlert() })
}

// Health is the engine's state for a readiness probe.
type Health struct {
	Ready  bool  // recovery finished, ingest open: not closing, not failed closed
	Failed error // why the engine failed closed; nil if it did not
}

// Health reads the engine's state (engine.Engine.Ready and Err).
func (h *Host) Health(ctx context.Context) (Health, error) {
	return query(ctx, h, func() Health { return Health{Ready: h.eng.Ready(), Failed: h.eng.Err()} })
}

// AlertsSince returns the engine's alerts after seq and how many of them
// its bounded queue dropped (engine.Engine.AlertsSince).
func (h *Host) AlertsSince(ctx context.Context, seq uint64) ([]engine.Alert, uint64, error) {
	type since struct {
		alerts  []engine.Alert
		dropped uint64
	}
	v, err := query(ctx, h, func() since {
		a, d := h.eng.AlertsSince(seq)
		return since{a, d}
	})
	return v.alerts, v.dropped, err
}

// Troubles returns what the engine is failing at and retrying now
// (engine.Engine.Troubles).
func (h *Host) Troubles(ctx context.Context) ([]engine.Trouble, error) {
	return query(ctx, h, func() []engine.Trouble { return h.eng.Troubles() })
}

// TroubleEventsSince returns the engine's trouble events after seq and
// how many its bounded queue dropped (engine.Engine.TroubleEventsSince).
func (h *Host) TroubleEventsSince(ctx context.Context, seq uint64) ([]engine.TroubleEvent, uint64, error) {
	type since struct {
		events  []engine.TroubleEvent
		dropped uint64
	}
	v, err := query(ctx, h, func() since {
		ev, d := h.eng.TroubleEventsSince(seq)
		return since{ev, d}
	})
	return v.events, v.dropped, err
}

// Segments returns the owned (committed) segments in id order. The slice
// is the caller's; the Index values are shared with the engine and must
// be treated as read-only.
func (h *Host) Segments(ctx context.Context) ([]engine.Segment, error) {
	return query(ctx, h, func() []engine.Segment { return h.eng.Segments() })
}

// query runs read on the loop and returns its value. Once the host has
// stopped, read runs on the caller's goroutine after the loop goroutine
// has returned: the engine's state is frozen then, and the goroutine's
// exit orders its last writes before the read.
func query[T any](ctx context.Context, h *Host, read func() T) (T, error) {
	v, err := callLoop(ctx, h.loop, func(done func(T)) { done(read()) }, nil)
	if errors.Is(err, ErrStopped) {
		select {
		case <-h.exited:
			return read(), nil
		case <-ctx.Done():
		}
		err = ctx.Err()
	}
	if err != nil {
		return v, fmt.Errorf("storage: host query: %w", err)
	}
	return v, nil
}

// Close shuts down gracefully: ingest closes (later units get
// engine.ErrClosed), every unit already taken is committed and acked (its
// Ingest returns nil), every Ingest the engine took has its answer, then
// the loop stops and the store is closed; no Ingest is left unanswered. It
// returns nil, or the error that made the engine fail closed (its pending
// units were answered with engine.ErrClosed), or engine.ErrClosed if
// recovery had not finished (Close before Start returns nil: the
// engine never ran). If ctx ends first, Close kills the host
// (units not yet committed are left unanswered) and returns ctx.Err();
// if Kill stops the host meanwhile, Close returns ErrStopped. After the
// host stopped, Close returns nil. Close is meant to be called once, and
// never from the loop goroutine (it would wait for itself).
func (h *Host) Close(ctx context.Context) error {
	select {
	case <-h.loop.Done():
		h.Kill() // waits for the loop goroutine
		return nil
	default:
	}
	neverStarted := false
	h.startOnce.Do(func() { neverStarted = true }) // and a later Start posts nothing
	if neverStarted {
		h.Kill() // the engine never ran: it holds nothing
		return nil
	}
	var closeErr error
	// The engine answers Close once it holds nothing, after every answer
	// to a unit it took (engine.answer keeps them in order).
	answer, err := callLoop(ctx, h.loop, func(done func(error)) { h.eng.Close(done) }, nil)
	switch {
	case ctx.Err() != nil && err != nil:
		closeErr = fmt.Errorf("storage: host close: %w", ctx.Err())
	case err != nil: // killed while closing: units may be unanswered
		closeErr = fmt.Errorf("storage: host close: %w", ErrStopped)
	case answer != nil:
		closeErr = fmt.Errorf("storage: host close: %w", answer)
	}
	h.Kill()
	return closeErr
}

// Kill drops the engine mid-flight, as SIGKILL would: the loop stops at
// once (no queued or later completion, timer or ack ever runs again) and
// the store is closed (requests in flight are cancelled; one that already
// reached the store may still take effect there — the crash window
// recovery's fence wait covers). Ingest calls waiting for an answer
// return ErrUnanswered and ErrStopped. Kill returns once no engine code
// runs any more; calling it again is a no-op.
//
// REQUIRES: not called on the loop goroutine (it waits for that
// goroutine to return).
func (h *Host) Kill() {
	h.stopOnce.Do(func() {
		h.loop.Stop()
		if h.closeStore != nil {
			h.closeStore()
		}
	})
	<-h.exited
	h.loop.background.Wait()
}

// Claim states of a function posted by callLoop. The CAS between the
// loop (taking) and the waiter (withdrawing) decides exactly once whether
// the function runs, so a waiter that gives up knows whether the engine
// ever saw its request.
const (
	claimPending int32 = iota
	claimTaken
	claimWithdrawn
)

// callLoop posts start to the loop and waits for the value start passes
// to done, for the loop to stop, or for ctx to end. If it stops waiting
// before the loop took start, start never runs, withdraw (if not nil) is
// called, and the error is ErrStopped or ctx.Err(). If it stops waiting
// after, the error also matches ErrUnanswered.
//
// REQUIRES: not called on the loop goroutine; done is called at most
// once.
func callLoop[T any](ctx context.Context, l *Loop, start func(done func(T)), withdraw func()) (T, error) {
	result := make(chan T, 1)
	var claim atomic.Int32
	l.Post(func() {
		if !claim.CompareAndSwap(claimPending, claimTaken) {
			return
		}
		start(func(v T) {
			select {
			case result <- v:
			default:
				panic("storage: host: done called twice")
			}
		})
	})
	var why error
	select {
	case v := <-result:
		return v, nil
	case <-l.Done():
		why = ErrStopped
	case <-ctx.Done():
		why = ctx.Err()
	}
	var zero T
	select {
	case v := <-result: // answered just before the stop
		return v, nil
	default:
	}
	if claim.CompareAndSwap(claimPending, claimWithdrawn) {
		if withdraw != nil {
			withdraw()
		}
		return zero, why
	}
	return zero, fmt.Errorf("%w: %w", ErrUnanswered, why)
}

// Tape returns the engine's live segments as an operator's view draws
// them (engine.Engine.Tape).
func (h *Host) Tape(ctx context.Context) ([]engine.TapeSegment, error) {
	return query(ctx, h, h.eng.Tape)
}

// FlushDelay is the engine's adaptive flush delay and its bounds.
type FlushDelay struct{ Now, Lower, Upper time.Duration }

// FlushDelay returns the adaptive flush delay now and its bounds.
func (h *Host) FlushDelay(ctx context.Context) (FlushDelay, error) {
	return query(ctx, h, func() FlushDelay {
		now, lo, hi := h.eng.FlushDelay()
		return FlushDelay{now, lo, hi}
	})
}
