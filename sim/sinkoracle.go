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

// walBound is how many segments may be owned at once while the sink is
// healthy and the engine has run for walSettle. A segment is sealed at
// most every 100 ms (the writer's delay floor), and one is reclaimed
// within reclaimSpan of its commit: its jobs and a bitmap delay, the
// checkpoint delay, and a few store requests in sequence (fence read,
// checkpoint write, marker delete), each of which may take up to the
// store's request lifetime (FenceWait bounds it; a segment whose marker
// write was ambiguous also waits that long before its delete). So at most
// reclaimSpan × 10/s segments, plus the writer's queue and some slack.
const walSettle = 30 * time.Second

func (w *World) walBound() int {
	c := w.engCfg
	reclaimSpan := c.BitmapDelay + c.CheckpointDelay + 2*c.FenceWait + 2*time.Second
	return int(reclaimSpan/(100*time.Millisecond)) + 4*c.QueueCapacity + 16
}

// checkWAL samples the owned segments while the sink is healthy.
func (o *Oracle) checkWAL(eng engineGauges) {
	w := o.w
	if w.dest == nil || w.sched.Now()-w.lastTrouble < walSettle {
		return
	}
	st := eng.Stats()
	live := st.LiveSegments
	w.res.MaxLive = max(w.res.MaxLive, live)
	if live > w.walBound() {
		_, _, cached, cache := eng.Memory()
		o.fail("%d segments owned after %v without sink trouble; bound %d (jobs applied %d, sink failures %d, alerts %d: %v; cache %d/%d)",
			live, walSettle, w.walBound(), st.JobsApplied, st.SinkFailures, st.Alerts, eng.LastAlert(), cached, cache)
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
