package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Oracles of compaction (issue 4): memory, a bounded WAL, reclaim, and
// exactly-once delivery to the destination in commit order.

// memWatch remembers the last memory reading: admission and the cache
// may sit above a budget that just shrank (nothing held is ever dropped),
// but may never grow while above it.
type memWatch struct {
	held, cached int64
}

// engineGauges is what the compaction oracles read of a running engine.
type engineGauges interface {
	Memory() (held, admission, cached, cache int64)
	Stats() engine.Stats
	LastAlert() error
}

func (o *Oracle) checkMemory(eng engineGauges) {
	held, admission, cached, cache := eng.Memory()
	m := &o.w.mem
	if held > admission && held > m.held {
		o.fail("admission grew to %d bytes over its budget of %d", held, admission)
	}
	if cached > cache && cached > m.cached {
		o.fail("body cache grew to %d bytes over its budget of %d", cached, cache)
	}
	m.held, m.cached = held, cached
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
	if w.dest == nil {
		return
	}
	st := eng.Stats()
	live := st.LiveSegments
	w.res.MaxLive = max(w.res.MaxLive, live)
	if live > w.engCfg.LiveSegmentsMax {
		o.fail("%d segments owned, above LiveSegmentsMax %d", live, w.engCfg.LiveSegmentsMax)
	}
	now, p := w.sched.Now(), &w.progress
	if st.JobsApplied != p.applied || live == 0 || st.Alerts > 0 {
		p.applied, p.since = st.JobsApplied, now
		return
	}
	if stall := now - max(p.since, w.lastTrouble); stall > progressWindow {
		o.fail("compaction applied nothing for %v with %d segments owned and the sink healthy (jobs applied %d, sink failures %d)",
			stall, live, st.JobsApplied, st.SinkFailures)
		p.since = now
	}
}

// checkReclaimed: after convergence no segment object is left.
func (o *Oracle) checkReclaimed() {
	for _, key := range o.w.store.Keys(o.w.layout.SegmentsPrefix()) {
		o.fail("after convergence the WAL still holds %s", key)
		return
	}
}

// checkDestination: every committed unit's rows are in the destination
// exactly once, nothing else is, and within each namespace the rows follow
// commit order; a destination that knows its apply order applied each
// namespace's jobs in segment order.
func (o *Oracle) checkDestination() {
	jobs, err := o.w.dest.Contents()
	if err != nil {
		o.fail("read destination %s: %v", o.w.dest.Name(), err)
		return
	}
	o.w.res.Applied = uint64(len(jobs))
	slices.SortFunc(jobs, func(a, b DestJob) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return compareIDs(a.Segment, b.Segment)
	})
	got := map[string][]UID{}
	for _, j := range jobs {
		got[j.Namespace] = appendRuns(got[j.Namespace], j.UIDs)
	}
	want := o.committedByNamespace()
	for _, ns := range sortedKeys(want, got) {
		if !slices.Equal(got[ns], want[ns]) {
			o.fail("namespace %s: destination holds %s, committed %s", ns, describeUIDs(got[ns]), describeUIDs(want[ns]))
		}
	}
	o.checkApplyOrder(jobs)
}

// appendRuns appends a job's units: consecutive rows of one unit count
// once.
func appendRuns(dst []UID, uids []int64) []UID {
	for i, u := range uids {
		if i == 0 || uids[i-1] != u {
			dst = append(dst, UID(u))
		}
	}
	return dst
}

// committedByNamespace lists the committed units of each namespace in
// commit order (segment id, then position in the segment).
func (o *Oracle) committedByNamespace() map[string][]UID {
	out := map[string][]UID{}
	for _, seg := range o.order {
		for _, uid := range seg.uids {
			ns := o.w.sources[uid.source()].spec.Name
			out[ns] = append(out[ns], uid)
		}
	}
	return out
}

func (o *Oracle) checkApplyOrder(jobs []DestJob) {
	last := map[string]DestJob{}
	byOrder := slices.Clone(jobs)
	slices.SortFunc(byOrder, func(a, b DestJob) int { return a.Order - b.Order })
	for _, j := range byOrder {
		if j.Order < 0 {
			return // the destination cannot tell
		}
		if prev, ok := last[j.Namespace]; ok && compareIDs(j.Segment, prev.Segment) < 0 {
			o.fail("namespace %s: segment %s applied after %s", j.Namespace, j.Segment, prev.Segment)
		}
		last[j.Namespace] = j
	}
}

func compareIDs(a, b engine.SnapshotID) int {
	switch {
	case a.Less(b):
		return -1
	case b.Less(a):
		return 1
	}
	return 0
}

func sortedKeys(ms ...map[string][]UID) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	slices.Sort(keys)
	return keys
}

func describeUIDs(u []UID) string {
	if len(u) <= 6 {
		return fmt.Sprint(u)
	}
	return fmt.Sprintf("%d units [%s %s %s … %s]", len(u), u[0], u[1], u[2], u[len(u)-1])
}
