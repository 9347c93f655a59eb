package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

// simulate -timeline FILE draws one run as a self-contained HTML page
// (timeline_render.go). What it draws comes from the run itself, watched
// from the side by a sim.Tap, so the run — and its trace hash — is the
// one a run without -timeline has:
//
//   - the trace: process starts, kills, pauses and resumes
//     (inc.*), commit markers landing and segment deletes (store.apply of
//     *.seg.commit keys, attributed to the process that issued them
//     through store.issue), disk crashes, corruption at rest;
//   - the world's notes (sim.Note), for what the trace does not record:
//     why a process ended (crash, restart, zombie), ACKs, sink applies,
//     and each oracle violation at the step it fired;
//   - the fault plan's counters (faults.Injector.Counts), read after every
//     decision the world asks of it: each fault injected, by kind, at the
//     step it was decided.

// tlCat is what a mark on the timeline is.
type tlCat uint8

const (
	catStart tlCat = iota
	catCrash
	catRestart
	catZombie
	catResume
	catKill
	catFault
	catCommit
	catReclaim
	catAck
	catApply
	catDiskCrash
	catCorrupt
	catViolation
	catCount
)

// tlMark is one thing that happened, on one lane.
type tlMark struct {
	at     time.Duration
	step   uint64
	lane   string // "inc/N", "store", "disk", "sink/REF", "sinks"
	cat    tlCat
	kind   string // a fault's kind; a crash's manner
	detail string
}

// tlInc is one engine process lifetime.
type tlInc struct {
	id     uint64
	start  time.Duration
	end    time.Duration // meaningful if ended
	ended  bool
	pauses []span // frozen spans (a zombie); an open one ends at the run's end
	zombie bool
}

type span struct{ from, to time.Duration }

// timeline collects one run; it is the run's sim.Tap.
type timeline struct {
	step  uint64
	now   time.Duration
	incs  []*tlInc
	marks []tlMark
	// markerReqs maps a pending commit-marker or segment-delete request
	// to the process that issued it.
	markerReqs map[uint64]uint64
	// sinkLane is where sink faults go: the lone sink's lane, or "sinks".
	sinkLane string
	// diskLane: the world has a disk (a disk WAL or a Parquet directory).
	diskLane bool
}

func newTimeline(spec sim.WorldSpec) *timeline {
	t := &timeline{markerReqs: map[uint64]uint64{}, sinkLane: "sinks", diskLane: spec.Engine.Disk != nil}
	if len(spec.Sinks) == 1 {
		t.sinkLane = "sink/" + spec.Sinks[0].Ref
	}
	return t
}

func (t *timeline) add(lane string, cat tlCat, kind, detail string) {
	t.marks = append(t.marks, tlMark{at: t.now, step: t.step, lane: lane, cat: cat, kind: kind, detail: detail})
}

func incLane(id uint64) string { return "inc/" + fmt.Sprint(id) }

// Step implements sim.Tap.
func (t *timeline) Step(n uint64, at time.Duration) { t.step, t.now = n, at }

// Event implements sim.Tap: the trace events the page draws.
func (t *timeline) Event(at time.Duration, k sim.Kind, f []sim.Field) {
	t.now = at
	switch k {
	case sim.KindIncarnationStart:
		id := fieldU(f, "inc")
		t.incs = append(t.incs, &tlInc{id: id, start: at})
		t.add(incLane(id), catStart, "", "")
	case sim.KindIncarnationKill:
		if inc := t.inc(fieldU(f, "inc")); inc != nil {
			inc.end, inc.ended = at, true
			t.closePause(inc, at)
		}
		t.add(incLane(fieldU(f, "inc")), catKill, "", "")
	case sim.KindIncarnationPause:
		if inc := t.inc(fieldU(f, "inc")); inc != nil {
			inc.zombie = true
			inc.pauses = append(inc.pauses, span{from: at, to: -1})
		}
	case sim.KindIncarnationResume:
		if inc := t.inc(fieldU(f, "inc")); inc != nil {
			t.closePause(inc, at)
		}
		t.add(incLane(fieldU(f, "inc")), catResume, "", fmt.Sprintf("%d held events run", fieldU(f, "held")))
	case sim.KindStoreIssue:
		key := fieldS(f, "key")
		if strings.HasSuffix(key, ".seg.commit") {
			t.markerReqs[fieldU(f, "req")] = fieldU(f, "inc")
		}
	case sim.KindStoreApply:
		t.storeApply(f)
	case sim.KindStoreDone, sim.KindStoreDrop:
		delete(t.markerReqs, fieldU(f, "req"))
	case sim.KindDiskCrash:
		t.diskLane = true
		t.add("disk", catDiskCrash, "", fmt.Sprintf("dir ops kept %d, lost %d", fieldU(f, "dirops_kept"), fieldU(f, "dirops_lost")))
	case sim.KindCorruptAtRest:
		t.add("store", catCorrupt, "", fieldS(f, "key"))
	}
}

// storeApply marks a commit marker landing (a commit) or a marker's
// delete (a reclaim: the marker goes last of a segment's keys).
func (t *timeline) storeApply(f []sim.Field) {
	key := fieldS(f, "key")
	if !strings.HasSuffix(key, ".seg.commit") || fieldU(f, "err") != 0 {
		return
	}
	by := ""
	if inc, ok := t.markerReqs[fieldU(f, "req")]; ok {
		by = fmt.Sprintf(" (issued by engine #%d)", inc)
	}
	switch sim.Op(fieldU(f, "op")) {
	case sim.OpPut:
		t.add("store", catCommit, "", key+by)
	case sim.OpDelete:
		t.add("store", catReclaim, "", key+by)
	}
}

func (t *timeline) closePause(inc *tlInc, at time.Duration) {
	if n := len(inc.pauses); n > 0 && inc.pauses[n-1].to < 0 {
		inc.pauses[n-1].to = at
	}
}

func (t *timeline) inc(id uint64) *tlInc {
	if id >= 1 && id <= uint64(len(t.incs)) && t.incs[id-1].id == id {
		return t.incs[id-1]
	}
	return nil
}

// current is the lane of the newest process (process faults go there).
func (t *timeline) current() string {
	if len(t.incs) == 0 {
		return "inc/0"
	}
	return incLane(t.incs[len(t.incs)-1].id)
}

// Note implements sim.Tap.
func (t *timeline) Note(n sim.Note) {
	t.now, t.step = n.At, n.Step
	switch n.Kind {
	case sim.NoteCrash:
		t.add(incLane(n.Inc), catCrash, n.Detail, "")
	case sim.NoteRestart:
		t.add(incLane(n.Inc), catRestart, "", n.Detail)
	case sim.NoteZombie:
		t.add(incLane(n.Inc), catZombie, "", n.Detail)
	case sim.NoteAck:
		t.add(incLane(n.Inc), catAck, "", "unit "+n.Detail)
	case sim.NoteApply:
		t.add("sink/"+n.Lane, catApply, "", "job "+n.Detail)
	case sim.NoteViolation:
		t.add("", catViolation, "", n.Detail)
	}
}

// fault marks a fault the plan injected, on the lane it hit.
func (t *timeline) fault(k faults.Kind) {
	lane := "store"
	switch k {
	case faults.Crash, faults.CrashPoint, faults.Restart, faults.Zombie, faults.MemoryHint,
		faults.SourceRewind, faults.FsyncErrorKill, faults.CommitPowerLoss:
		lane = t.current()
	case faults.FsyncError, faults.DiskWriteError, faults.DiskFull, faults.BitFlip, faults.SlowIO:
		lane, t.diskLane = "disk", true
	case faults.SinkError, faults.SinkAmbiguous, faults.SinkOutage, faults.SinkRefuse:
		lane = t.sinkLane
	}
	t.add(lane, catFault, k.String(), "")
}

func fieldU(f []sim.Field, name string) uint64 {
	for _, x := range f {
		if x.Name == name {
			return x.U
		}
	}
	return 0
}

func fieldS(f []sim.Field, name string) string {
	for _, x := range f {
		if x.Name == name {
			return x.S
		}
	}
	return ""
}

// tapFaults is the job's fault plan with the timeline watching its
// counters: after every decision, each kind whose count rose is a fault
// injected now. It forwards every call unchanged (and the optional
// ReadCorrupter), so the world draws exactly what it draws without it.
type tapFaults struct {
	*faults.Injector
	tl   *timeline
	seen [faults.NumKinds]uint64
}

func (f *tapFaults) sync() {
	now := f.Injector.Counts()
	for k := range faults.NumKinds {
		for ; f.seen[k] < now[k]; f.seen[k]++ {
			f.tl.fault(k)
		}
	}
}

func (f *tapFaults) Decide(op sim.Op, key string, now time.Duration, r *sim.Rand) (sim.Outcome, time.Duration) {
	o, d := f.Injector.Decide(op, key, now, r)
	f.sync()
	return o, d
}

func (f *tapFaults) CorruptRead(key string) (int64, bool) {
	p, ok := f.Injector.CorruptRead(key)
	f.sync()
	return p, ok
}

func (f *tapFaults) DecideSink(now time.Duration) sim.SinkOutcome {
	o := f.Injector.DecideSink(now)
	f.sync()
	return o
}

func (f *tapFaults) CrashNow() bool     { ok := f.Injector.CrashNow(); f.sync(); return ok }
func (f *tapFaults) RestartNow() bool   { ok := f.Injector.RestartNow(); f.sync(); return ok }
func (f *tapFaults) CrashAtPoint() bool { ok := f.Injector.CrashAtPoint(); f.sync(); return ok }
func (f *tapFaults) CorruptAtRest() (int64, bool) {
	p, ok := f.Injector.CorruptAtRest()
	f.sync()
	return p, ok
}

func (f *tapFaults) ZombieNow() (time.Duration, bool) {
	d, ok := f.Injector.ZombieNow()
	f.sync()
	return d, ok
}

func (f *tapFaults) KillAfterFsyncError() (time.Duration, bool) {
	d, ok := f.Injector.KillAfterFsyncError()
	f.sync()
	return d, ok
}

func (f *tapFaults) MemoryChange() (int64, bool) {
	p, ok := f.Injector.MemoryChange()
	f.sync()
	return p, ok
}
func (f *tapFaults) Rewind() (uint64, bool) { n, ok := f.Injector.Rewind(); f.sync(); return n, ok }

// DiskFaults wraps the plan's disk decisions the same way.
func (f *tapFaults) DiskFaults() sim.DiskFaults {
	inner := f.Injector.DiskFaults()
	if inner == nil {
		return nil
	}
	return sim.DiskFaultsFunc(func(op sim.DiskOp, path string, r *sim.Rand) (sim.DiskOutcome, time.Duration) {
		o, d := inner.Decide(op, path, r)
		f.sync()
		return o, d
	})
}

var (
	_ sim.Faults        = (*tapFaults)(nil)
	_ sim.ReadCorrupter = (*tapFaults)(nil)
)

// writeTimeline renders out's run, recorded by tl, to path.
func writeTimeline(path string, out outcome, tl *timeline) error {
	page, note := renderTimeline(out, tl)
	if err := os.WriteFile(path, page, 0o644); err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	fmt.Printf("timeline: wrote %s (%d bytes%s)\n", path, len(page), note)
	return nil
}
