package sim

import (
	"errors"
	"fmt"
	"strings"
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
	w.res = Result{Seed: w.cfg.Seed, Plan: w.faults.Describe(), World: w.spec.Summary()}
	w.res.Destination = w.destNames()
	for _, p := range w.all() {
		p.startIncarnation()
		p.memoryTicks()
	}
	limit := w.cfg.Iters + max(w.cfg.Iters/2, drainStepsMin)
	for w.sched.Steps() < limit && len(w.oracle.violations) == 0 && w.halted == "" && !w.recorderHalted() {
		if w.sched.Steps() >= w.healAt && w.producing {
			for _, p := range w.all() {
				p.heal()
			}
		}
		if !w.producing && w.sched.Now()-w.healTime > drainTime {
			break
		}
		if !w.producing && w.sched.Steps() >= w.cfg.Iters && w.allConverged() {
			break
		}
		if !w.sched.Step() {
			break
		}
		for _, p := range w.all() {
			p.step()
		}
	}
	w.finish()
	if wallNow != nil {
		w.res.Wall = wallNow().Sub(start)
	}
	return w.res
}

// allConverged: every pipeline of the world converged.
func (w *World) allConverged() bool {
	for _, p := range w.all() {
		if !p.converged() {
			return false
		}
	}
	return true
}

// step runs the world's checks and decisions after one event.
func (w *World) step() {
	w.startDueSources()
	w.checkEngine()
	w.checkZombies()
	switch {
	case w.producing && w.eng != nil && w.killSoon:
		w.res.Crashes++
		w.res.KillsOnly++
		w.note(NoteCrash, w.inc.ID(), "", "kill only (after an fsync error)")
		w.trouble()
		w.endProcess(false)
	case w.producing && w.eng != nil && w.powerSoon && !w.zombiesAnywhere():
		w.res.Crashes++
		w.note(NoteCrash, w.inc.ID(), "", "power loss right after a segment commit")
		w.trouble()
		w.endProcess(true)
	case w.producing && w.eng != nil && (w.crashSoon || w.faults.CrashNow()):
		w.crash()
	}
	w.crashSoon, w.killSoon, w.powerSoon = false, false, false
	if pause, ok := w.faults.ZombieNow(); ok && w.producing && w.eng != nil && w.eng.Ready() && !w.closing && w.engCfg.Disk == nil {
		w.makeZombie(pause)
	}
	w.maybeRestart()
}

// heal ends the fault phase: no more faults or crashes, no new units,
// and every zombie dies.
func (w *World) heal() {
	if w.top == nil {
		w.faults.Heal() // one plan for every pipeline
	}
	w.producing = false
	w.healTime = w.sched.Now()
	for _, z := range w.zombies {
		w.killZombie(z)
	}
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
	if len(w.dests) == 0 {
		return true
	}
	return w.eng.Drained() && len(w.store.Keys(w.layout.SegmentsPrefix())) == 0
}

func (w *World) checkEngine() {
	if w.eng == nil {
		return
	}
	switch err := w.eng.Err(); {
	case errors.Is(err, engine.ErrInvariant): // a class of its own: shrinking keeps it
		w.oracle.fail("engine failed closed on a broken invariant (an engine bug): %v", err)
	case err != nil:
		w.oracle.fail("engine failed closed: %v", err)
	}
	w.checkAlerts(w.eng, false)
	if w.eng.Ready() {
		w.oracle.checkMemory(w.eng)
		w.oracle.checkWAL(w.eng)
	}
}

// checkAlerts: an engine alerts only on what the fault plan corrupted at
// rest — then it must stop that lane, and the run ends there, halted as
// it should be. Any other alert is a violation.
//
// A zombie (fencedOK) alerts once more, as it must: when its successor
// fences it. Every alert the engine holds is checked, not just the last.
func (w *World) checkAlerts(eng *engine.Engine, fencedOK bool) {
	alerts, _ := eng.AlertsSince(0)
	for _, a := range alerts {
		if fencedOK && a.Kind == engine.AlertFenced && errors.Is(a.Err, engine.ErrFenced) {
			continue
		}
		if why, ok := expectedAlert(a.Err, w.first().expected, w.engCfg.Disk != nil, w.disk.Counts()); ok {
			w.first().halted = "halted as it should on " + why + ": " + a.Err.Error()
			continue
		}
		w.oracle.fail("engine alerted (%s): %v", a.Kind, a.Err)
		return
	}
}

// expectedAlert says whether an alert is the one a world's faults call
// for, and on what. An alert names what the plan corrupted at rest
// (expected); or, in a disk-WAL world, a log partition halted after the
// disk flipped bits — the engine must never deliver or skip the damaged
// entry — or on a sequence gap after the disk ignored an fsync: an fsync
// failed, the process died before it rolled past it, the next one read
// the failed write back from the page cache (its own fsync of that file
// "succeeded"), and a power loss then took those never-acked bytes. The
// engine cannot tell that gap from lost acked units, so it halts (docs/OPERATING.md,
// "Local-disk WAL", "Limits we know of").
func expectedAlert(err error, expected []string, diskWAL bool, disk DiskCounts) (string, bool) {
	for _, what := range expected {
		if strings.Contains(err.Error(), what) {
			return what, true
		}
	}
	if !diskWAL || !errors.Is(err, engine.ErrCorrupt) || !strings.Contains(err.Error(), "WAL partition") {
		return "", false
	}
	switch {
	case disk.Outcomes[DiskBitFlip] > 0:
		return "a flipped bit in the log", true
	case disk.SyncsIgnored > 0 && strings.Contains(err.Error(), "(a gap)"):
		return "a gap a hidden fsync error left", true
	}
	return "", false
}

// expectAlert notes that an engine alert naming what is due (the fault
// plan made it happen).
func (w *World) expectAlert(what string) { t := w.first(); t.expected = append(t.expected, what) }

// trouble notes a sink fault, a crash or a memory change: the progress
// oracle waits for things to settle after one.
func (w *World) trouble() { w.lastTrouble = w.sched.Now() }

// onSinkApplied: a sink answered an apply — a window to crash in.
func (w *World) onSinkApplied() { w.maybeCrashAtPoint() }

// maybePowerLossAfterCommit: a disk-WAL segment committed — its flushed
// record is not durable yet, and a power loss now must not commit the
// generation again (recovery finds the segment owned or replays it under
// its own snapshot id).
func (w *World) maybePowerLossAfterCommit() {
	if w.faults.PowerLossAfterCommit() && w.producing {
		w.powerSoon = true
	}
}

func (w *World) maybeCrashAtPoint() {
	if w.faults.CrashAtPoint() && w.producing {
		w.crashSoon = true
	}
}

// memoryTicks lets the fault plan change the memory hint now and then.
func (w *World) memoryTicks() {
	w.sched.After(memoryTick, func() {
		if eighths, ok := w.faults.MemoryChange(); ok && w.producing {
			w.memHint = w.spec.MemoryBytes / 8 * eighths
			w.trouble()
		} else if !w.producing {
			w.memHint = w.spec.MemoryBytes
		}
		w.memoryTicks()
	})
}

// worldMemory is the Memory port: the world's current hint.
type worldMemory struct{ w *World }

func (m worldMemory) AvailableBytes() int64 { return m.w.memHint }

// destSinks resolves sink_refs to the world's destinations, each behind
// the fault injector.
type destSinks map[string]engine.Sink

func (d destSinks) Sink(ref string) (engine.Sink, bool) {
	s, ok := d[ref]
	return s, ok
}

func (w *World) finish() {
	if len(w.oracle.violations) == 0 {
		switch {
		case w.halted != "":
			w.res.Halted = w.halted
			for _, p := range w.all() {
				p.oracle.checkSafety()
			}
			w.oracle.checkDestinations(true)
		case !w.allConverged():
			for _, p := range w.all() {
				p.notConverged()
			}
		default:
			for _, p := range w.all() {
				p.oracle.checkFinal(p.eng)
				p.oracle.checkTroubles(p.eng.Troubles())
				p.oracle.checkNoSilentRot()
			}
			if len(w.dests) > 0 {
				w.oracle.checkDestinations(false)
				w.oracle.checkTables()
			}
		}
	}
	for _, p := range w.all() {
		p.endAll()
		if p != w {
			w.res.add(p.res)
		}
	}
	w.res.Marks = w.marks
	w.res.DestMarks = w.destMarks()
	w.res.WorldMarks = w.wmarks
	w.res.Steps = w.sched.Steps()
	w.res.SimTime = w.sched.Now()
	w.res.Faults = w.faults.Injected()
	w.res.Hash = w.trace.Hash()
	w.res.Violations = w.oracle.violations
	w.res.Classes = w.oracle.classes
}

// notConverged reports a pipeline that did not converge in time.
func (w *World) notConverged() {
	if w.converged() {
		return
	}
	t := w.first()
	w.oracle.fail("did not converge within %d steps (%v) after the fault phase", w.sched.Steps()-t.healAt, (w.sched.Now() - t.healTime).Round(time.Second))
	if len(w.dests) > 0 && w.eng != nil {
		st := w.eng.Stats()
		w.oracle.fail("at the end: %d segments owned, %d jobs applied, alerts %d (%v)", st.LiveSegments, st.JobsApplied, st.Alerts, w.eng.LastAlert())
	}
}

// endAll ends a pipeline's run: its engines' marks counted, its
// results filled in, its prefix coroutines stopped.
func (w *World) endAll() {
	if w.eng != nil {
		w.endMarks(w.eng)
	}
	for _, z := range w.zombies {
		w.endMarks(z.eng)
	}
	w.res.Acks = uint64(len(w.oracle.acked))
	w.res.Segments = uint64(len(w.oracle.markers))
	// A prefix source still suspended in a call would keep its coroutine,
	// and the world it references, alive for good.
	for _, src := range w.sources {
		src.stopPrefix()
	}
}

// add sums a further pipeline's counts into the world's result; its
// marks are summed into the world's as its engines end (endMarks).
func (r *Result) add(o Result) {
	r.Acks += o.Acks
	r.Crashes += o.Crashes
	r.KillsOnly += o.KillsOnly
	r.Restarts += o.Restarts
	r.Zombies += o.Zombies
	r.Segments += o.Segments
	r.MaxLive = max(r.MaxLive, o.MaxLive)
	r.OrphansSwept += o.OrphansSwept
	r.WorstRecOps = max(r.WorstRecOps, o.WorstRecOps)
	r.WorstRecTime = max(r.WorstRecTime, o.WorstRecTime)
}

// endMarks adds an engine's coverage marks and swept orphans to the
// world's, once.
func (w *World) endMarks(eng *engine.Engine) {
	if eng == nil {
		return
	}
	w.first().marks.Add(eng.Marks())
	w.res.OrphansSwept += eng.Stats().OrphansSwept
}

func (w *World) destNames() string {
	var out []string
	for _, k := range w.spec.Sinks {
		out = append(out, k.Ref+"="+k.Kind)
	}
	return strings.Join(out, ",")
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
		Disk:   w.data.Client(inc),
		Memory: worldMemory{w},
	}
	if len(w.dests) > 0 {
		sp := SinkPorts{Ports: ports, Blocking: inc.Blocking(w.root.Split(fmt.Sprintf("blocking/%d", inc.ID())), w.blockingCfg)}
		// The destinations live in the world's store and on the machine's
		// disk, outside every data directory, whichever store this
		// pipeline's WAL is in (pipeline.go).
		if lake := w.first().store; w.store != lake {
			sp.Store = recordingStore{ObjectStore: lake.Client(inc), w: w, inc: inc}
		}
		sp.Disk = w.disk.Client(inc)
		sinks := destSinks{}
		for _, k := range w.spec.Sinks {
			if d, ok := w.dests[k.Ref]; ok {
				_, own := d.(OwnFaults)
				sinks[k.Ref] = &faultySink{w: w, inner: d.Sink(sp), timers: inc.Timers(), own: own, ref: k.Ref}
			}
		}
		ports.Sinks = sinks
	}
	w.maybeCorruptAtRest()
	eng, err := engine.New(w.engCfg, ports)
	if err != nil {
		w.oracle.fail("engine config: %v", err)
		return
	}
	w.eng, w.recovering, w.recStart, w.rec = eng, true, w.sched.Now(), recoveryStats{}
	w.progress = progress{since: w.sched.Now()}
	eng.Start(func(err error) {
		if errors.Is(err, engine.ErrRecoveryGaveUp) {
			// The process exits non-zero naming why (cmd/skipprd); its
			// supervisor — the world — starts another.
			w.endProcess(false)
			return
		}
		if errors.Is(err, engine.ErrInvariant) {
			w.oracle.fail("recovery failed closed on a broken invariant (an engine bug): %v", err)
			return
		}
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
	for _, s := range w.sources {
		s.onReady(w.eng.Offset)
	}
}

// crash is SIGKILL: the engine and everything it had in flight vanish;
// the store keeps what landed (and what is still landing), the disk what
// was synced — unless a zombie still runs on it, in which case only the
// process dies (the machine stays up).
func (w *World) crash() {
	w.res.Crashes++
	w.trouble()
	powerLoss := !w.zombiesAnywhere() && !w.killOnly()
	if w.tapping() {
		how := "kill only"
		if powerLoss {
			how = "power loss"
		}
		w.note(NoteCrash, w.inc.ID(), "", how)
	}
	w.endProcess(powerLoss)
}

// killOnly decides whether this crash spares the machine (WorldSpec.
// KillOnly), from a stream of its own: the world's other draws stay put.
func (w *World) killOnly() bool {
	if w.spec.KillOnly == 0 {
		return false
	}
	if !w.root.Split(fmt.Sprintf("kill-only/%d", w.inc.ID())).Chance(w.spec.KillOnly) {
		return false
	}
	w.res.KillsOnly++
	return true
}

// maybeRestart stops a ready engine gracefully when the plan says so, and
// checks that a close in progress answers within closeBound.
func (w *World) maybeRestart() {
	if w.closing && w.sched.Now()-w.closeStart > closeBound {
		w.oracle.fail("graceful close has not answered after %v", closeBound)
	}
	if !w.faults.RestartNow() || !w.producing || w.closing || w.eng == nil || !w.eng.Ready() {
		return
	}
	w.res.Restarts++
	w.note(NoteRestart, w.inc.ID(), "", "graceful stop")
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
func (w *World) endProcess(powerLoss bool) {
	if powerLoss {
		w.first().powerLoss(w) // every process on the machine dies
		return
	}
	w.endMarks(w.eng)
	w.inc.Kill()
	w.handOver()
}

// handOver forgets the current process and schedules the next one: the
// sources see their units in flight go unanswered.
func (w *World) handOver() {
	w.eng, w.closing, w.awaiting, w.killOnRetry = nil, false, 0, nil
	for _, s := range w.sources {
		s.onCrash()
	}
	w.sched.After(restartDelay, w.startIncarnation)
}

// submit hands unit uid to the current engine, or answers ErrNotReady;
// an ACK counts for uid. It releases in's batches.
func (w *World) submit(uid UID, in engine.Unit, done func(error)) {
	w.submitRecords([]UID{uid}, in, done)
}

// submitRecords is submit for a unit of several records (a broker
// source's fetch, uids in order): an ACK counts for each of them.
func (w *World) submitRecords(uids []UID, in engine.Unit, done func(error)) {
	w.submitUnit(uids[0], in, uids, done)
	for _, b := range in.Batches {
		b.Release()
	}
}

// submitUnit hands in to the current engine, or answers ErrNotReady; the
// caller keeps its references to in's batches. An ACK counts for the
// oracle here for each of acks; with none, the caller decides (what the
// client saw).
func (w *World) submitUnit(uid UID, in engine.Unit, acks []UID, done func(error)) {
	if w.eng == nil || !w.eng.Ready() {
		w.sched.After(time.Millisecond, func() { done(engine.ErrNotReady) })
		return
	}
	if in, ok := w.prepare(uid, in); ok {
		defer func() {
			for _, b := range in.Batches {
				b.Release()
			}
		}()
		w.submitTo(uid, in, acks, done)
		return
	}
	w.submitTo(uid, in, acks, done)
}

// prepare encodes every other unit of a disk-WAL world for the log
// before it is submitted, as the production host does off its loop
// (engine.PrepareUnit), so both ways into the log are run. The prepared
// batches are the caller's to release.
func (w *World) prepare(uid UID, in engine.Unit) (engine.Unit, bool) {
	if w.spec.Engine.Disk == nil || uid%2 != 0 {
		return in, false
	}
	p, err := engine.PrepareUnit(in)
	if err != nil {
		w.oracle.fail("unit %s: PrepareUnit: %v", uid, err)
		return in, false
	}
	return p, true
}

func (w *World) submitTo(uid UID, in engine.Unit, acks []UID, done func(error)) {
	w.awaiting++
	inc := w.inc
	w.eng.Submit(in, func(err error) {
		if inc == w.inc {
			w.awaiting--
		}
		for _, a := range acks {
			if err == nil {
				w.oracle.onAck(a) // a zombie's acks count too
				if w.tapping() {
					w.note(NoteAck, inc.ID(), "", a.String())
				}
			}
		}
		w.retryAnswered(uid, err)
		done(err)
	})
}

// sourceError: expected errors are retried; anything else is a bug.
func (w *World) sourceError(s *source, uid UID, err error) {
	if !expectedErr(err) || errors.Is(err, engine.ErrInvalidUnit) {
		w.oracle.fail("source %s unit %s: unexpected error: %v", s.spec.Name, uid, err)
	}
}
