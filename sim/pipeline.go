package sim

import (
	"fmt"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// Worlds of several pipelines (WorldSpec.Pipelines): several daemons on
// one machine, each with a data directory and a WAL of its own, writing
// the same destinations — the way a user scales out (docs/DESIGN.md §11),
// and the configuration in which compaction ids unique only within one
// WAL lost rows silently.
//
// Each further pipeline is a World of its own (a peer) holding what one
// daemon has: its engine incarnations and zombies, its sources, its
// oracle, its memory, its data directory (hostDir) and its WAL store —
// the world's store under its own pipeline name, or a store of its own.
// It shares with the first pipeline's World, which runs the loop: the
// scheduler and trace, the fault plan, the disk (a power loss takes down
// every process on the machine), the destinations (built once, against
// the world's store and disk, whichever store a pipeline's WAL is in),
// the expected alerts, and the run's end. Every step runs each pipeline's
// checks and decisions in turn; a pipeline's oracle reports into the
// first one's, its violations prefixed with its name.
//
// The destination oracle is the world's: every job a counting marker of
// any pipeline committed is held once, row for row, keyed by (pipeline,
// namespace, segment) — two pipelines' snapshot ids are the same numbers —
// and a destination's tables hold every acknowledged row of every
// pipeline (Acked spans them all).

// newPeer builds the further pipeline ps of the world top.
func newPeer(top *World, n int, ps PipelineSpec) *World {
	name := ps.Engine.Pipeline
	spec := top.spec
	spec.Engine, spec.Sources, spec.MemoryBytes, spec.KillOnly, spec.Pipelines = ps.Engine, ps.Sources, ps.MemoryBytes, ps.KillOnly, nil
	root := top.root.Split(fmt.Sprintf("pipeline/%d", n))
	w := &World{cfg: top.cfg, spec: spec, root: root, trace: top.trace, sched: top.sched, faults: top.faults, producing: true,
		mem: top.mem, unknownOutcome: map[UID]bool{}, top: top}
	w.engCfg, w.pageSize, w.storeCfg = spec.Engine, spec.PageSize, top.storeCfg
	w.store = top.store
	if ps.OwnStore {
		w.store = NewStore(w.sched, root.Split("store"), top.storeCfg)
		w.store.OnApply = w.onApply
	}
	w.disk = top.disk
	w.data = hostDir{disk: top.disk, dir: peerDir(n)}
	w.label = fmt.Sprintf("%s#%d", name, n)
	top.disk.Prepare(w.data.dir)
	w.layout = engine.NewLayout(w.engCfg.Prefix, w.engCfg.Pipeline)
	w.oracle = newOracle(w)
	w.srcBase = top.sourceCount()
	for i, src := range spec.Sources {
		w.sources = append(w.sources, newSource(w, w.srcBase+i, src))
	}
	w.engCfg.FenceWait = w.fenceWait(top.storeCfg)
	w.memHint, w.sinkRand = spec.MemoryBytes, root.Split("sink")
	w.healAt = top.healAt
	w.blockingCfg = drawBlocking(root.Split("blocking"))
	w.dests = top.dests
	return w
}

// all returns every pipeline of the world, the first one first (the
// slice is shared: do not modify it).
func (w *World) all() []*World {
	t := w.first()
	if len(t.pipelines) != 1+len(t.peers) {
		t.pipelines = append([]*World{t}, t.peers...)
	}
	return t.pipelines
}

// first is the world's first pipeline: the one that runs the loop.
func (w *World) first() *World {
	if w.top != nil {
		return w.top
	}
	return w
}

// sourceCount is how many sources the world's pipelines have so far:
// the next pipeline's first global source index.
func (w *World) sourceCount() int {
	n := 0
	for _, p := range w.all() {
		n += len(p.sources)
	}
	return n
}

// sourceOf returns the source of one of this pipeline's units.
func (w *World) sourceOf(uid UID) *source { return w.sources[uid.source()-w.srcBase] }

// wireShared routes the shared models' hooks to the pipeline each event
// belongs to: the world's store to every pipeline whose WAL is in it
// (each oracle ignores keys outside its layout), the disk by data
// directory.
func (w *World) wireShared() {
	w.store.OnApply = func(op Op, key string) {
		for _, p := range w.all() {
			if p.store == w.store {
				p.onApply(op, key)
			}
		}
	}
	w.disk.OnSync = func(path string, written []byte) {
		if p, own := w.ownerOf(path); p != nil {
			p.oracle.walSynced(own, written)
		}
	}
	w.disk.OnWrite = func(path string) {
		if p, own := w.ownerOf(path); p != nil && strings.HasSuffix(own, ".wal") {
			p.maybeCrashAtPoint() // between a log write and its fsync: torn tails
		}
	}
	w.disk.OnSyncError = func(path string) {
		if p, own := w.ownerOf(path); p != nil {
			p.killAfterFsyncError(own)
		}
	}
}

// ownerOf returns the pipeline whose data directory holds path, and the
// path as that pipeline sees it; nil outside every one.
func (w *World) ownerOf(path string) (*World, string) {
	for _, p := range w.all()[1:] {
		if own, ok := p.data.own(path); ok {
			return p, own
		}
	}
	if own, ok := w.first().data.own(path); ok {
		return w.first(), own
	}
	return nil, ""
}

// powerLoss is the machine going down: every process on it dies — the
// cause's first — then the disk keeps its durable image and a seeded
// share of the rest, then each pipeline's supervisor starts its process
// again. With one pipeline, exactly the crash of worlds before pipelines.
func (w *World) powerLoss(cause *World) {
	order := []*World{cause}
	for _, p := range w.all() {
		if p != cause {
			order = append(order, p)
		}
	}
	var down []*World
	for _, p := range order {
		if p.eng == nil {
			continue // between a crash and its restart: nothing runs
		}
		if p != cause {
			p.res.Crashes++
			p.trouble()
			p.note(NoteCrash, p.inc.ID(), "", "power loss of the machine")
		}
		p.endMarks(p.eng)
		p.inc.Kill()
		down = append(down, p)
	}
	w.disk.Crash(cause.root.Split(fmt.Sprintf("disk-crash/%d", cause.inc.ID())))
	for _, p := range w.all() {
		p.oracle.walAfterCrash()
	}
	if len(down) > 1 {
		w.mark(MarkPipelinesPowerLoss)
	}
	for _, p := range down {
		p.handOver()
	}
}

// zombiesAnywhere reports whether a paused or resumed zombie process of
// any pipeline is alive: a power loss would have to take it too, so
// crashes then spare the machine.
func (w *World) zombiesAnywhere() bool {
	for _, p := range w.all() {
		if len(p.zombies) > 0 {
			return true
		}
	}
	return false
}
