package sim

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Oracles of compaction: memory, a bounded WAL, reclaim, and
// exactly-once delivery to the destination in commit order.

// memWatch remembers the last memory reading of the current engine:
// admission and the cache may sit above a budget that just shrank
// (nothing held is ever dropped), but may never grow while above it. An
// engine's first reading is its baseline: recovery restores whatever the
// disk WAL's log holds — the last process kept it within its budget, but
// the memory hint may have shrunk since — and drops none of it.
type memWatch struct {
	eng          engineGauges // whose readings these are
	held, cached int64
	cacheMin     int64 // the smallest body cache budget seen (0: none yet)
}

// engineGauges is what the compaction oracles read of a running engine.
type engineGauges interface {
	Memory() (held, admission, cached, cache int64)
	Progress() (live int, applied, alerts, sinkFailures uint64)
	LastAlert() error
	Segments() []engine.Segment
	OpenJobs() []engine.OpenJob
}

func (o *Oracle) checkMemory(eng engineGauges) {
	held, admission, cached, cache := eng.Memory()
	m := &o.w.memWatch
	if m.eng != eng {
		m.eng, m.held, m.cached = eng, held, cached
	}
	if held > admission && held > m.held {
		o.fail("admission grew to %d bytes over its budget of %d", held, admission)
	}
	if cached > cache && cached > m.cached {
		o.fail("body cache grew to %d bytes over its budget of %d", cached, cache)
	}
	m.held, m.cached = held, cached
	if m.cacheMin == 0 || cache < m.cacheMin {
		m.cacheMin = cache
	}
}

// The bounded-WAL oracles.
//
// Bound: the engine refuses units while its WAL backlog (owned segments
// plus snapshots on their way) is at LiveSegmentsMax, so the segments it
// owns never exceed that — at every step, whatever the sink or the store
// does. Recovery owns what the log holds, which the previous incarnation
// kept within the same limit. A hard bound, not a rate estimate: it cannot
// flap with latencies.
//
// Progress: while the engine is up, owns segments and the sink has been
// healthy for progressWindow, compaction must apply something within that
// window. It is generous — a job's body read and sink write each retry up
// to engine.AttemptsMax times under latency spikes — so it fires only on a
// stall (a lane starved or stuck), never on a slow store.
const progressWindow = 5 * time.Minute

// progress is what the progress oracle remembers of the current engine.
type progress struct {
	applied uint64        // jobs applied when last seen
	since   time.Duration // when applied last changed (or the engine started, or owned nothing)
}

// checkWAL runs at every step while the engine is ready.
func (o *Oracle) checkWAL(eng engineGauges) {
	w := o.w
	if len(w.dests) == 0 {
		return
	}
	live, applied, alerts, sinkFailures := eng.Progress()
	w.res.MaxLive = max(w.res.MaxLive, live)
	if live > w.engCfg.LiveSegmentsMax {
		o.fail("%d segments owned, above LiveSegmentsMax %d", live, w.engCfg.LiveSegmentsMax)
	}
	o.checkValve(eng)
	now, p := w.sched.Now(), &w.progress
	if applied != p.applied || live == 0 || alerts > 0 {
		p.applied, p.since = applied, now
		return
	}
	if stall := now - max(p.since, w.lastTrouble); stall > progressWindow {
		o.fail("compaction applied nothing for %v with %d segments owned and the sink healthy (jobs applied %d, sink failures %d)",
			stall, live, applied, sinkFailures)
		p.since = now
	}
}

// checkValve: no lane's open job pins more owned segments than the WAL
// pressure valve's threshold — the segment that would take it past is
// cut there (engine cut.go), so a lane waiting to fill a file never holds
// the log.
func (o *Oracle) checkValve(eng engineGauges) {
	valve, _ := o.w.engCfg.Valve()
	segs := eng.Segments()
	for _, j := range eng.OpenJobs() {
		i, _ := slices.BinarySearchFunc(segs, j.First, func(s engine.Segment, id engine.SnapshotID) int { return s.ID.Compare(id) })
		if pinned := len(segs) - i; pinned > valve {
			o.fail("the open job of %s/%s pins %d owned segments from %s, above the valve's %d", j.SinkRef, j.Namespace, pinned, j.First, valve)
			return
		}
	}
}

// checkReclaimed: after convergence no segment object of the pipeline is left.
func (o *Oracle) checkReclaimed() {
	for _, key := range o.w.store.Keys(o.w.layout.SegmentsPrefix()) {
		o.fail("after convergence the WAL still holds %s", key)
		return
	}
}

// checkDestinations: each destination holds every job that a counting
// marker of any of the world's pipelines committed for it exactly once,
// row for row (RowDigest: every column, payload and CDC change included),
// and nothing else; one that knows its apply order applied each
// pipeline's namespace in segment order. After a halt (partial is true)
// jobs may be missing, but what is there must be right. Run on the
// world's first pipeline, for all of them.
func (o *Oracle) checkDestinations(partial bool) {
	var applied uint64
	for _, k := range o.w.spec.Sinks {
		dest, ok := o.w.dests[k.Ref]
		if !ok {
			continue
		}
		jobs, err := dest.Contents()
		if err != nil {
			o.fail("read destination %s (%s): %v", k.Ref, dest.Name(), err)
			continue
		}
		applied += uint64(len(jobs))
		o.checkDestination(k.Ref, jobs, partial)
		o.checkApplyOrder(k.Ref, jobs)
		o.markSharedNamespaces(jobs)
	}
	o.w.res.Applied = applied
}

type destKey struct {
	origin    segment.Origin // the committing log: two logs number snapshots alike
	namespace string
	segment   engine.SnapshotID
}

// of names the key's pipeline in a message: its name and WAL id.
func (k destKey) of() string {
	if k.origin.IsZero() {
		return "(no origin)"
	}
	return fmt.Sprintf("%s (WAL %.8s…)", k.origin.Pipeline, k.origin.WAL)
}

// committedJobs returns, per (pipeline, namespace, cutting segment), the
// digests of the jobs every pipeline's counting markers committed for
// sink ref, and the keys in the order first met. A version 3 marker's
// cuts name its jobs: each the rows of its group in the counting markers
// from the cut's First through the cutting one, in order — computed here
// from the markers alone, not from the engine's lanes. A marker before
// spanning jobs is a job per group of it. After a run that converged,
// every PART is in exactly one job, and each cut counts what it holds
// (checkCuts).
func (o *Oracle) committedJobs(ref string, partial bool) (map[destKey][]RowDigest, []destKey) {
	want := map[destKey][]RowDigest{}
	var order []destKey
	add := func(k destKey, d RowDigest) {
		if want[k] == nil {
			order = append(order, k)
		}
		want[k] = append(want[k], d)
	}
	for _, p := range o.w.all() {
		counting := p.oracle.countingMarkers(partial)
		claims := map[pieceKey]int{}
		for i, m := range counting {
			if !m.spanning {
				//engine:orderless — collected per key, compared as sets.
				for jk, d := range m.jobs {
					if jk.sink == ref {
						add(destKey{m.origin, jk.namespace, m.id}, d)
					}
				}
				continue
			}
			for _, c := range m.cuts {
				if c.Group.SinkRef != ref {
					continue
				}
				d, segs, parts := o.cutJob(counting[:i+1], c, claims)
				add(destKey{m.origin, c.Group.Namespace, m.id}, d)
				if !partial && (segs != int(c.Segments) || parts != int(c.Parts)) {
					o.fail("pipeline %s: cut of %s in segment %s counts %d parts in %d segments from %s; the counting markers hold %d parts in %d",
						m.origin.Pipeline, c.Group, m.id, c.Parts, c.Segments, c.First, parts, segs)
				}
			}
		}
		if !partial {
			o.checkClaims(ref, counting, claims)
		}
	}
	return want, order
}

// pieceKey is one group's PARTs in one segment.
type pieceKey struct {
	marker *markerInfo
	job    jobKey
}

// cutJob is the job cut c ends, from the counting markers up to and
// including the cutting one: its digest and what it holds. Each piece it
// takes is counted in claims.
func (o *Oracle) cutJob(markers []*markerInfo, c segment.Cut, claims map[pieceKey]int) (d RowDigest, segs, parts int) {
	k := keyOf(c.Group)
	first := engine.SnapshotID{Epoch: c.First.Epoch, Seq: c.First.Seq}
	for _, m := range markersFrom(markers, first) {
		g, ok := m.groups[k]
		if !ok || !m.spanning {
			continue
		}
		d = d.Then(m.jobs[k])
		segs++
		parts += g.parts
		claims[pieceKey{m, k}]++
	}
	return d, segs, parts
}

// checkClaims: after convergence, every PART of a spanning segment for
// sink ref is in exactly one cut's job — none left waiting, none twice.
func (o *Oracle) checkClaims(ref string, markers []*markerInfo, claims map[pieceKey]int) {
	for _, m := range markers {
		if !m.spanning {
			continue
		}
		keys := slices.SortedFunc(maps.Keys(m.groups), jobKey.compare)
		for _, k := range keys {
			if n := claims[pieceKey{m, k}]; k.sink == ref && n != 1 {
				o.fail("pipeline %s: the PARTs of %s/%s in segment %s are in %d jobs, want 1", m.origin.Pipeline, k.sink, k.namespace, m.id, n)
			}
		}
	}
}

func (a jobKey) compare(b jobKey) int {
	return segment.Group{SinkRef: a.sink, Namespace: a.namespace, Schema: a.schema, CDC: a.cdc}.
		Compare(segment.Group{SinkRef: b.sink, Namespace: b.namespace, Schema: b.schema, CDC: b.cdc})
}

// countingMarkers are the markers of this pipeline that count, in id
// order — with, in a run that stopped early (partial), those whose
// validity the run ended before deciding: their jobs may have been
// applied already.
func (o *Oracle) countingMarkers(partial bool) []*markerInfo {
	var out []*markerInfo
	for _, m := range o.order {
		if o.counts(m) || partial && m.validity == validityPending {
			out = append(out, m)
		}
	}
	return out
}

// checkDestination compares a destination's jobs with the counting
// markers' (sink, namespace) contents: per pipeline, namespace and
// segment, one job for each schema (and CDC-ness) its slices have, each
// the rows committed. A destination cannot name a job's schema as the
// segment does (a file format rewrites schemas), so each key's jobs are
// compared as a set of digests.
func (o *Oracle) checkDestination(ref string, jobs []DestJob, partial bool) {
	want, wantOrder := o.committedJobs(ref, partial)
	got := map[destKey][]DestJob{}
	for _, j := range jobs {
		k := destKey{j.Origin, j.Namespace, j.Segment}
		got[k] = append(got[k], j)
	}
	keys := slices.Collect(maps.Keys(got))
	slices.SortFunc(keys, destKey.compare)
	for _, k := range keys {
		o.compareJobs(ref, k, got[k], want[k], partial)
	}
	if partial {
		return
	}
	slices.SortFunc(wantOrder, destKey.compare)
	for _, k := range wantOrder {
		if _, ok := got[k]; !ok {
			o.fail("destination %s lacks namespace %s of segment %s of pipeline %s (%d jobs committed)", ref, k.namespace, k.segment, k.of(), len(want[k]))
		}
	}
}

// markSharedNamespaces marks a destination namespace holding jobs of
// two pipelines: their rows side by side in one table or folder.
func (o *Oracle) markSharedNamespaces(jobs []DestJob) {
	first := map[string]segment.Origin{}
	for _, j := range jobs {
		p, ok := first[j.Namespace]
		if !ok {
			first[j.Namespace] = j.Origin
		} else if p != j.Origin {
			o.w.mark(MarkPipelinesSharedNamespace)
			return
		}
	}
}

func (a destKey) compare(b destKey) int {
	if c := strings.Compare(a.origin.Pipeline, b.origin.Pipeline); c != 0 {
		return c
	}
	if c := bytes.Compare(a.origin.WAL[:], b.origin.WAL[:]); c != 0 {
		return c
	}
	if c := strings.Compare(a.namespace, b.namespace); c != 0 {
		return c
	}
	return a.segment.Compare(b.segment)
}

// compareJobs matches the jobs a destination holds for one namespace of
// one segment with the digests committed: each committed job once, and
// nothing else — all of them unless the run stopped early (partial).
func (o *Oracle) compareJobs(ref string, k destKey, got []DestJob, want []RowDigest, partial bool) {
	left := slices.Clone(want)
	for _, j := range got {
		i := slices.Index(left, j.Digest)
		switch {
		case i >= 0:
			left = slices.Delete(left, i, i+1)
		case len(want) == 0:
			o.fail("destination %s holds job %s (namespace %s, segment %s of pipeline %s) that no counting marker committed", ref, j.ID, k.namespace, k.segment, k.of())
		case slices.Contains(want, j.Digest):
			o.fail("destination %s holds namespace %s of segment %s of pipeline %s twice (job %s again)", ref, k.namespace, k.segment, k.of(), j.ID)
		default:
			o.fail("destination %s job %s (namespace %s, segment %s of pipeline %s): %d rows (digest %016x), committed %s",
				ref, j.ID, k.namespace, k.segment, k.of(), j.Digest.Rows, j.Digest.Sum, digestList(want))
		}
	}
	if !partial && len(left) > 0 && len(left) < len(want) {
		o.fail("destination %s lacks %d of the %d jobs of namespace %s of segment %s of pipeline %s", ref, len(left), len(want), k.namespace, k.segment, k.of())
	}
}

func digestList(ds []RowDigest) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%d rows (digest %016x)", d.Rows, d.Sum)
	}
	return strings.Join(parts, " or ")
}

// checkApplyOrder: a destination that knows its apply order applied each
// pipeline's namespace's jobs in segment order (two pipelines' lanes into
// one namespace are independent).
func (o *Oracle) checkApplyOrder(ref string, jobs []DestJob) {
	type lane struct {
		origin    segment.Origin
		namespace string
	}
	last := map[lane]DestJob{}
	byOrder := slices.Clone(jobs)
	slices.SortFunc(byOrder, func(a, b DestJob) int { return a.Order - b.Order })
	for _, j := range byOrder {
		if j.Order < 0 {
			return // the destination cannot tell
		}
		l := lane{j.Origin, j.Namespace}
		if prev, ok := last[l]; ok && j.Segment.Less(prev.Segment) {
			o.fail("destination %s namespace %s of pipeline %s: segment %s applied after %s", ref, j.Namespace, destKey{origin: j.Origin}.of(), j.Segment, prev.Segment)
		}
		last[l] = j
	}
}
