package sim

import (
	"errors"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Run runs the world: the fault phase, then the quiet phase until the run
// converges, then the final checks. wallNow measures wall time for the
// summary only (the simulation never reads it); pass nil to skip.
func (w *World) Run(wallNow func() time.Time) Result {
	var start time.Time
	if wallNow != nil {
		start = wallNow()
	}
	w.res = Result{Seed: w.cfg.Seed, Plan: w.faults.Describe()}
	if w.dest != nil {
		w.res.Destination = w.dest.Name()
	}
	w.startIncarnation()
	w.memoryTicks()
	healAt := uint64(float64(w.cfg.Iters) * healFraction)
	limit := w.cfg.Iters + uint64(float64(w.cfg.Iters)*drainExtra)
	for w.sched.Steps() < limit && len(w.oracle.violations) == 0 && !w.halted() {
		if w.sched.Steps() >= healAt && w.producing {
			w.heal()
		}
		if !w.producing && w.sched.Steps() >= w.cfg.Iters && w.converged() {
			break
		}
		if !w.sched.Step() {
			break
		}
		w.checkEngine()
		if w.producing && w.eng != nil && (w.crashSoon || w.faults.CrashNow(w.crashRnd)) {
			w.crash()
		}
		w.crashSoon = false
		w.maybeRestart()
	}
	w.finish()
	if wallNow != nil {
		w.res.Wall = wallNow().Sub(start)
	}
	return w.res
}

// heal ends the fault phase: no more faults or crashes, no new units.
func (w *World) heal() {
	w.faults.Heal()
	w.producing = false
}

// converged: the engine is up and idle, no source has work left, and —
// with a destination — everything is applied and the WAL is empty.
func (w *World) converged() bool {
	if w.eng == nil || !w.eng.Ready() || !w.eng.Idle() {
		return false
	}
	for _, s := range w.sources {
		if !s.idle() {
			return false
		}
	}
	if w.dest == nil {
		return true
	}
	return w.eng.Drained() && len(w.store.Keys(w.layout.SegmentsPrefix())) == 0
}

func (w *World) checkEngine() {
	if w.eng == nil {
		return
	}
	if w.eng.Err() != nil {
		w.oracle.fail("engine failed closed: %v", w.eng.Err())
	}
	if w.eng.Ready() {
		w.oracle.checkMemory(w.eng)
		w.oracle.checkWAL(w.eng)
	}
}

// trouble notes a sink fault, a crash or a memory change: the bounded-WAL
// oracle waits for things to settle after one.
func (w *World) trouble() { w.lastTrouble = w.sched.Now() }

// onSinkApplied: a sink answered an apply — a window to crash in.
func (w *World) onSinkApplied() { w.maybeCrashAtPoint() }

func (w *World) maybeCrashAtPoint() {
	if w.producing && w.faults.CrashAtPoint(w.crashRnd) {
		w.crashSoon = true
	}
}

// memoryTicks lets the fault plan change the memory hint now and then.
func (w *World) memoryTicks() {
	w.sched.After(memoryTick, func() {
		if v, ok := w.faults.MemoryChange(w.crashRnd); ok && w.producing {
			w.memHint = v
			w.trouble()
		} else if !w.producing {
			w.memHint = defaultMemory
		}
		w.memoryTicks()
	})
}

// worldMemory is the Memory port: the world's current hint.
type worldMemory struct{ w *World }

func (m worldMemory) AvailableBytes() int64 { return m.w.memHint }

type destSinks struct{ sink engine.Sink }

func (d destSinks) Sink(ref string) (engine.Sink, bool) {
	if ref != "lake" {
		return nil, false
	}
	return d.sink, true
}

func (w *World) finish() {
	if len(w.oracle.violations) == 0 {
		if !w.converged() {
			w.oracle.fail("did not converge within %d steps after the fault phase", w.sched.Steps()-uint64(float64(w.cfg.Iters)*healFraction))
			if w.dest != nil && w.eng != nil {
				st := w.eng.Stats()
				w.oracle.fail("at the end: %d segments owned, %d jobs applied, alerts %d (%v)", st.LiveSegments, st.JobsApplied, st.Alerts, w.eng.LastAlert())
			}
		} else {
			w.oracle.checkFinal(w.eng)
			if w.dest != nil {
				w.oracle.checkDestination()
				w.oracle.checkReclaimed()
			}
		}
	}
	if w.eng != nil {
		w.res.OrphansSwept += w.eng.Stats().OrphansSwept
	}
	w.res.Steps = w.sched.Steps()
	w.res.SimTime = w.sched.Now()
	w.res.Acks = uint64(len(w.oracle.acked))
	w.res.Segments = uint64(len(w.oracle.markers))
	w.res.Faults = w.faults.Injected()
	w.res.Hash = w.trace.Hash()
	w.res.Violations = w.oracle.violations
}

// startIncarnation starts an engine process and its recovery.
func (w *World) startIncarnation() {
	w.inc = w.sched.NewIncarnation()
	inc := w.inc
	ports := engine.Ports{
		Clock:  w.sched.Clock(),
		Rand:   w.root.Split(fmt.Sprintf("engine/%d", inc.ID())),
		Timers: inc.Timers(),
		Exec:   inc.Executor(),
		Store:  recordingStore{ObjectStore: w.store.Client(inc), w: w, inc: inc},
		Disk:   w.disk.Client(inc),
		Memory: worldMemory{w},
	}
	if w.dest != nil {
		ports.Sinks = destSinks{&faultySink{w: w, inner: w.dest.Sink(ports), timers: inc.Timers(), rand: w.sinkRand}}
	}
	eng, err := engine.New(w.engCfg, ports)
	if err != nil {
		w.oracle.fail("engine config: %v", err)
		return
	}
	w.eng, w.recovering, w.recStart, w.rec = eng, true, w.sched.Now(), recoveryStats{}
	w.progress = progress{since: w.sched.Now()}
	eng.Start(func(err error) {
		if err != nil {
			w.oracle.fail("recovery failed closed: %v", err)
			return
		}
		w.onReady(inc)
	})
}

func (w *World) onReady(inc *Incarnation) {
	if inc != w.inc {
		return
	}
	w.recovering = false
	w.trouble() // a new engine starts with whatever backlog built up meanwhile
	if t := w.sched.Now() - w.recStart; t > w.res.WorstRecTime {
		w.res.WorstRecTime = t
	}
	w.res.WorstRecOps = max(w.res.WorstRecOps, w.rec.ops)
	w.oracle.checkRecovery(w.eng, w.rec)
	offsets := w.eng.Offsets()
	for _, s := range w.sources {
		s.onReady(offsets)
	}
}

// crash is SIGKILL: the engine and everything it had in flight vanish;
// the store keeps what landed (and what is still landing), the disk what
// was synced.
func (w *World) crash() {
	w.res.Crashes++
	w.trouble()
	w.endProcess(true)
}

// maybeRestart stops a ready engine gracefully when the plan says so, and
// checks that a close in progress answers within closeBound.
func (w *World) maybeRestart() {
	if w.closing && w.sched.Now()-w.closeStart > closeBound {
		w.oracle.fail("graceful close has not answered after %v", closeBound)
	}
	if !w.producing || w.closing || w.eng == nil || !w.eng.Ready() || !w.faults.RestartNow(w.stopRnd) {
		return
	}
	w.res.Restarts++
	w.trouble()
	w.closing, w.closeStart = true, w.sched.Now()
	inc := w.inc
	w.eng.Close(func(err error) {
		if inc != w.inc {
			return
		}
		if err != nil {
			w.oracle.fail("graceful close failed: %v", err)
		}
		if w.awaiting > 0 {
			w.oracle.fail("graceful close answered with %d units unanswered", w.awaiting)
		}
		w.endProcess(false) // a clean exit: the disk keeps everything
	})
}

// endProcess ends the current process (killed, or exited) and schedules
// the next one. Its units in flight are never answered.
func (w *World) endProcess(killed bool) {
	w.res.OrphansSwept += w.eng.Stats().OrphansSwept
	w.inc.Kill()
	if killed {
		w.disk.Crash(w.crashRnd)
	}
	w.eng, w.closing, w.awaiting = nil, false, 0
	for _, s := range w.sources {
		s.onCrash()
	}
	w.sched.After(restartDelay, w.startIncarnation)
}

// submit hands a unit to the current engine, or answers ErrNotReady.
func (w *World) submit(uid UID, in engine.Unit, done func(error)) {
	defer func() {
		for _, b := range in.Batches {
			b.Release()
		}
	}()
	if w.eng == nil || !w.eng.Ready() {
		w.sched.After(time.Millisecond, func() { done(engine.ErrNotReady) })
		return
	}
	w.awaiting++
	inc := w.inc
	w.eng.Submit(in, func(err error) {
		if inc == w.inc {
			w.awaiting--
		}
		if err == nil {
			w.oracle.onAck(uid)
		}
		done(err)
	})
}

// sourceError: expected errors are retried; anything else is a bug.
func (w *World) sourceError(s *source, uid UID, err error) {
	if !expectedErr(err) || errors.Is(err, engine.ErrInvalidUnit) {
		w.oracle.fail("source %s unit %s: unexpected error: %v", s.spec.Name, uid, err)
	}
}

// recordingStore watches an incarnation's requests during recovery.
type recordingStore struct {
	engine.ObjectStore
	w   *World
	inc *Incarnation
}

func (r recordingStore) note(key string, bodyRead bool) {
	if r.w.inc == r.inc && r.w.recovering {
		r.w.rec.ops++
		if bodyRead {
			r.w.rec.bodyReads++
		}
	}
}

func (r recordingStore) isBody(key string) bool {
	_, _, kind, ok := r.w.layout.ParseKey(key)
	return ok && kind == engine.KindBody
}

func (r recordingStore) PutObject(in engine.PutObjectInput, done func(string, error)) {
	r.note(in.Key, false)
	if _, _, kind, ok := r.w.layout.ParseKey(in.Key); ok && kind == engine.KindBitmap {
		r.w.maybeCrashAtPoint() // during the bitmap write
	}
	r.ObjectStore.PutObject(in, done)
}

func (r recordingStore) GetObject(in engine.GetObjectInput, done func([]byte, engine.ObjectInfo, error)) {
	r.note(in.Key, r.isBody(in.Key))
	r.ObjectStore.GetObject(in, done)
}

func (r recordingStore) HeadObject(key string, done func(engine.ObjectInfo, error)) {
	r.note(key, false)
	r.ObjectStore.HeadObject(key, done)
}

func (r recordingStore) ListObjects(prefix, token string, done func(engine.ListPage, error)) {
	r.note(prefix, false)
	r.ObjectStore.ListObjects(prefix, token, done)
}

func (r recordingStore) DeleteObject(key string, done func(error)) {
	r.note(key, false)
	r.ObjectStore.DeleteObject(key, func(err error) {
		if err == nil {
			r.w.maybeCrashAtPoint() // between the deletes of a reclaim
		}
		done(err)
	})
}

func (r recordingStore) CreateMultipartUpload(key string, done func(string, error)) {
	r.note(key, false)
	r.ObjectStore.CreateMultipartUpload(key, done)
}

func (r recordingStore) UploadPart(key, id string, n int32, body []byte, done func(string, error)) {
	r.note(key, false)
	r.ObjectStore.UploadPart(key, id, n, body, done)
}

func (r recordingStore) CompleteMultipartUpload(key, id string, parts []engine.CompletedPart, done func(error)) {
	r.note(key, false)
	r.ObjectStore.CompleteMultipartUpload(key, id, parts, done)
}

func (r recordingStore) AbortMultipartUpload(key, id string, done func(error)) {
	r.note(key, false)
	r.ObjectStore.AbortMultipartUpload(key, id, done)
}

func (r recordingStore) ListMultipartUploads(prefix, km, um string, done func(engine.UploadsPage, error)) {
	r.note(prefix, false)
	r.ObjectStore.ListMultipartUploads(prefix, km, um, done)
}
