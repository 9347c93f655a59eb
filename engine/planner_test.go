package engine

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// The cut planner (planner.go) on its own, without an Engine: a table per
// cut reason, its checks broken one by one, and properties of every plan.

// testPlanner's sinks: "every" takes a job per segment; any other cuts
// at 1000 bytes or a minute.
var testPlanner = cutPlanner{limits: func(ref string) LaneLimits {
	if ref == "every" {
		return LaneLimits{}
	}
	return LaneLimits{FileBytes: 1000, FlushInterval: time.Minute}
}}

var (
	cutting = SnapshotID{Epoch: 1, Seq: 10} // the segment being cut
	earlier = SnapshotID{Epoch: 1, Seq: 7}  // where the open jobs start
	planNow = 10 * time.Minute

	fx1 = segment.Group{SinkRef: "files", Namespace: "x", Schema: 1}
	fx2 = segment.Group{SinkRef: "files", Namespace: "x", Schema: 2}
	fxc = segment.Group{SinkRef: "files", Namespace: "x", Schema: 1, CDC: true}
	fy1 = segment.Group{SinkRef: "files", Namespace: "y", Schema: 1}
	ex1 = segment.Group{SinkRef: "every", Namespace: "x", Schema: 1}
	ex2 = segment.Group{SinkRef: "every", Namespace: "x", Schema: 2}
	ey1 = segment.Group{SinkRef: "every", Namespace: "y", Schema: 1}
)

// planIn is an input cutting segment cutting at planNow, with a large
// cache, not closing, the valve shut.
func planIn(open []openSummary, groups ...groupParts) cutInput {
	return cutInput{id: cutting, groups: groups, open: open, cacheBytes: 1 << 30, now: planNow}
}

func gp(g segment.Group, parts uint32, bytes int64) groupParts {
	return groupParts{group: g, parts: parts, bytes: bytes}
}

// openAt is an open job from segment earlier.
func openAt(g segment.Group, segments, parts uint32, bytes int64, since time.Duration) openSummary {
	return openSummary{group: g, first: earlier, segments: segments, parts: parts, bytes: bytes, since: since}
}

func opens(o ...openSummary) []openSummary { return o }

func cutOf(g segment.Group, first SnapshotID, segments, parts uint32, r segment.CutReason) segment.Cut {
	return segment.Cut{Group: g, First: refOf(first), Segments: segments, Parts: parts, Reason: r}
}

type planCase struct {
	name string
	in   cutInput
	want []segment.Cut
}

func runPlanCases(t *testing.T, cases []planCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := testPlanner.decide(tc.in); !slices.Equal(got, tc.want) {
				t.Errorf("cuts\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// with returns in changed by f (a case's variation on planIn).
func with(in cutInput, f func(*cutInput)) cutInput {
	f(&in)
	return in
}

func TestPlannerEvery(t *testing.T) {
	runPlanCases(t, []planCase{
		{"new lane", planIn(nil, gp(ex1, 3, 10)),
			[]segment.Cut{cutOf(ex1, cutting, 1, 3, segment.CutEvery)}},
		{"open job after a restart, nothing new", planIn(opens(openAt(ex1, 2, 4, 10, planNow))),
			[]segment.Cut{cutOf(ex1, earlier, 2, 4, segment.CutEvery)}},
		{"open job and this segment's PARTs", planIn(opens(openAt(ex1, 2, 4, 10, planNow)), gp(ex1, 3, 10)),
			[]segment.Cut{cutOf(ex1, earlier, 3, 7, segment.CutEvery)}},
		{"lanes in canonical order", planIn(opens(openAt(ey1, 1, 1, 10, planNow)), gp(ex1, 1, 10)),
			[]segment.Cut{cutOf(ex1, cutting, 1, 1, segment.CutEvery), cutOf(ey1, earlier, 1, 1, segment.CutEvery)}},
		{"a lane with limits waits", planIn(nil, gp(fx1, 3, 10)), nil},
	})
}

func TestPlannerSize(t *testing.T) {
	small := func(in *cutInput) { in.cacheBytes = 2000 } // jobBytesMax 500
	runPlanCases(t, []planCase{
		{"this segment reaches file bytes", planIn(nil, gp(fx1, 2, 1000)),
			[]segment.Cut{cutOf(fx1, cutting, 1, 2, segment.CutSize)}},
		{"open job and this segment reach it", planIn(opens(openAt(fx1, 1, 1, 600, planNow)), gp(fx1, 1, 400)),
			[]segment.Cut{cutOf(fx1, earlier, 2, 2, segment.CutSize)}},
		{"a byte short", planIn(opens(openAt(fx1, 1, 1, 600, planNow)), gp(fx1, 1, 399)), nil},
		{"a quarter of the cache is less", with(planIn(opens(openAt(fx1, 1, 1, 500, planNow))), small),
			[]segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutSize)}},
		{"a byte short of a quarter of the cache", with(planIn(opens(openAt(fx1, 1, 1, 499, planNow))), small), nil},
		{"no cache: a job of one byte", with(planIn(nil, gp(fx1, 1, 1)), func(in *cutInput) { in.cacheBytes = 0 }),
			[]segment.Cut{cutOf(fx1, cutting, 1, 1, segment.CutSize)}},
	})
}

func TestPlannerInterval(t *testing.T) {
	runPlanCases(t, []planCase{
		{"oldest PART waited the interval", planIn(opens(openAt(fx1, 2, 3, 10, planNow-time.Minute))),
			[]segment.Cut{cutOf(fx1, earlier, 2, 3, segment.CutInterval)}},
		{"and this segment's PARTs go with it", planIn(opens(openAt(fx1, 2, 3, 10, planNow-time.Minute)), gp(fx1, 1, 10)),
			[]segment.Cut{cutOf(fx1, earlier, 3, 4, segment.CutInterval)}},
		{"a nanosecond short", planIn(opens(openAt(fx1, 2, 3, 10, planNow-time.Minute+1))), nil},
		{"size comes first", planIn(opens(openAt(fx1, 2, 3, 1000, planNow-time.Minute))),
			[]segment.Cut{cutOf(fx1, earlier, 2, 3, segment.CutSize)}},
		{"a new lane has waited nothing", planIn(nil, gp(fx1, 1, 10)), nil},
	})
}

func TestPlannerValve(t *testing.T) {
	valveAt := func(before SnapshotID) func(*cutInput) {
		return func(in *cutInput) { in.valve, in.valveBefore = true, before }
	}
	full := valveAt(SnapshotID{Epoch: ^uint64(0), Seq: ^uint64(0)})
	old := openAt(fx1, 1, 1, 10, planNow)
	runPlanCases(t, []planCase{
		{"open job older than the boundary", with(planIn(opens(old)), valveAt(SnapshotID{Epoch: 1, Seq: 8})),
			[]segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutValve)}},
		{"open job at the boundary", with(planIn(opens(old)), valveAt(earlier)), nil},
		{"valve shut", with(planIn(opens(old)), func(in *cutInput) { in.valveBefore = SnapshotID{Epoch: 1, Seq: 8} }), nil},
		{"a full WAL: no job may pin this segment", with(planIn(nil, gp(fx1, 2, 10)), full),
			[]segment.Cut{cutOf(fx1, cutting, 1, 2, segment.CutValve)}},
		{"interval comes first", with(planIn(opens(openAt(fx1, 1, 1, 10, 0))), full),
			[]segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutInterval)}},
	})
}

func TestPlannerClose(t *testing.T) {
	closing := func(in *cutInput) { in.closing = true }
	runPlanCases(t, []planCase{
		{"an open job", with(planIn(opens(openAt(fx1, 1, 1, 10, planNow))), closing),
			[]segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutClose)}},
		{"a new lane", with(planIn(nil, gp(fy1, 2, 10)), closing),
			[]segment.Cut{cutOf(fy1, cutting, 1, 2, segment.CutClose)}},
		{"every lane", with(planIn(opens(openAt(fy1, 1, 1, 10, planNow)), gp(fx1, 2, 10), gp(fy1, 1, 10)), closing),
			[]segment.Cut{cutOf(fx1, cutting, 1, 2, segment.CutClose), cutOf(fy1, earlier, 2, 2, segment.CutClose)}},
		{"the valve comes first", with(planIn(opens(openAt(fx1, 1, 1, 10, planNow))), func(in *cutInput) {
			in.closing, in.valve, in.valveBefore = true, true, cutting
		}), []segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutValve)}},
		{"not closing", planIn(opens(openAt(fx1, 1, 1, 10, planNow))), nil},
	})
}

func TestPlannerShape(t *testing.T) {
	runPlanCases(t, []planCase{
		{"schema changes", planIn(opens(openAt(fx1, 1, 1, 10, planNow)), gp(fx2, 2, 10)),
			[]segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutShape), cutOf(fx2, cutting, 1, 2, segment.CutShape)}},
		{"CDC-ness changes", planIn(opens(openAt(fx1, 1, 1, 10, planNow)), gp(fxc, 2, 10)),
			[]segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutShape), cutOf(fxc, cutting, 1, 2, segment.CutShape)}},
		{"two schemas new at once", planIn(nil, gp(fx2, 2, 10), gp(fx1, 3, 10)),
			[]segment.Cut{cutOf(fx1, cutting, 1, 3, segment.CutShape), cutOf(fx2, cutting, 1, 2, segment.CutShape)}},
		{"the open group goes on beside a new one", planIn(opens(openAt(fx1, 1, 1, 10, planNow)), gp(fx2, 2, 10), gp(fx1, 3, 10)),
			[]segment.Cut{cutOf(fx1, earlier, 2, 4, segment.CutShape), cutOf(fx2, cutting, 1, 2, segment.CutShape)}},
		{"shape before every", planIn(nil, gp(ex1, 1, 10), gp(ex2, 1, 10)),
			[]segment.Cut{cutOf(ex1, cutting, 1, 1, segment.CutShape), cutOf(ex2, cutting, 1, 1, segment.CutShape)}},
		{"other lanes wait", planIn(opens(openAt(fy1, 1, 1, 10, planNow)), gp(fx1, 1, 10), gp(fx2, 1, 10), gp(fy1, 1, 10)),
			[]segment.Cut{cutOf(fx1, cutting, 1, 1, segment.CutShape), cutOf(fx2, cutting, 1, 1, segment.CutShape)}},
	})
}

func TestPlannerIntervalEnd(t *testing.T) {
	for _, tc := range []struct {
		name, sink string
		want       time.Duration
	}{
		{"a sink with limits: since + flush interval", "files", 5*time.Second + time.Minute},
		{"a sink taking a job per segment: at once", "every", 5 * time.Second},
	} {
		if got := testPlanner.intervalEnd(tc.sink, 5*time.Second); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestPlannerChecks breaks decide's REQUIRES and its result's checks one
// by one: each is reported through the hook, and decide then returns no
// cuts.
func TestPlannerChecks(t *testing.T) {
	ok := planIn(opens(openAt(fx1, 2, 2, 10, planNow)), gp(fy1, 1, 10))
	inputs := []struct {
		name, invariant string
		f               func(*cutInput)
	}{
		{"negative cache budget", "cache budget ≥ 0", func(in *cutInput) { in.cacheBytes = -1 }},
		{"group of no PART", "a segment's group holds ≥ 1 PART", func(in *cutInput) { in.groups = []groupParts{gp(fy1, 0, 10)} }},
		{"group of negative bytes", "bytes ≥ 0: files/y", func(in *cutInput) { in.groups = []groupParts{gp(fy1, 1, -1)} }},
		{"open job of no segment", "an open job holds ≥ 1 PART per segment", func(in *cutInput) { in.open[0].segments = 0 }},
		{"open job of fewer PARTs than segments", "1 PARTs in 2 segments", func(in *cutInput) { in.open[0].parts = 1 }},
		{"open job of negative bytes", "-1 bytes", func(in *cutInput) { in.open[0].bytes = -1 }},
		{"open job from the segment cut", "from before the segment cut", func(in *cutInput) { in.open[0].first = cutting }},
		{"open job from the future", "an open job waits from no later than now: files/x", func(in *cutInput) { in.open[0].since = in.now + 1 }},
		{"two open jobs in a lane", "one open job per lane", func(in *cutInput) {
			in.open = append(in.open, openAt(fx2, 1, 1, 10, planNow))
		}},
	}
	for _, tc := range inputs {
		t.Run(tc.name, func(t *testing.T) {
			var c capture
			p := testPlanner
			p.inv = c.hook()
			in := ok
			in.open = slices.Clone(ok.open)
			tc.f(&in)
			if cuts := p.decide(in); cuts != nil {
				t.Errorf("decide returned %v on a broken input", cuts)
			}
			c.want(t, tc.invariant)
		})
	}
	results := []struct {
		name, invariant string
		cuts            []segment.Cut
	}{
		{"out of order", "cuts in canonical order", []segment.Cut{cutOf(fy1, cutting, 1, 1, segment.CutClose), cutOf(fx1, cutting, 1, 1, segment.CutClose)}},
		{"two of a group", "one per group", []segment.Cut{cutOf(fx1, earlier, 1, 1, segment.CutClose), cutOf(fx1, cutting, 1, 1, segment.CutClose)}},
		{"of no segment", "a cut holds ≥ 1 PART per segment", []segment.Cut{cutOf(fx1, cutting, 0, 1, segment.CutClose)}},
		{"of fewer PARTs than segments", "1 PARTs in 2 segments", []segment.Cut{cutOf(fx1, earlier, 2, 1, segment.CutClose)}},
		{"without a reason", "reason reason(0)", []segment.Cut{cutOf(fx1, cutting, 1, 1, 0)}},
		{"from a later segment", "first 000000000001-000000000011", []segment.Cut{cutOf(fx1, SnapshotID{Epoch: 1, Seq: 11}, 1, 1, segment.CutClose)}},
	}
	for _, tc := range results {
		t.Run("cuts "+tc.name, func(t *testing.T) {
			var c capture
			p := testPlanner
			p.inv = c.hook()
			if p.checkCuts(cutting, tc.cuts) {
				t.Errorf("checkCuts held of %v", tc.cuts)
			}
			c.want(t, tc.invariant)
		})
	}
	t.Run("no hook: panic", func(t *testing.T) {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "cache budget ≥ 0") {
				t.Errorf("recovered %v; want the broken invariant", r)
			}
		}()
		testPlanner.decide(with(ok, func(in *cutInput) { in.cacheBytes = -1 }))
	})
}

// TestPlannerChecksDoNotAllocate: a check that holds costs its
// comparisons (assert.go, "Cost").
func TestPlannerChecksDoNotAllocate(t *testing.T) {
	in := planIn(opens(openAt(fx1, 2, 2, 10, planNow), openAt(fy1, 1, 1, 10, planNow)), gp(fx1, 1, 10), gp(ex1, 1, 10))
	cuts := testPlanner.decide(with(in, func(in *cutInput) { in.closing = true }))
	if len(cuts) != 3 {
		t.Fatalf("closing cut %v; want every lane", cuts)
	}
	if n := testing.AllocsPerRun(100, func() {
		testPlanner.checkInput(in)
		testPlanner.checkCuts(in.id, cuts)
	}); n != 0 {
		t.Errorf("the planner's checks allocate %v times when they hold", n)
	}
}

// TestPlannerProperties states what is true of every plan, on random
// inputs: cuts in canonical order, each ending one lane's open job with
// exactly its PARTs (the open job's and this segment's of its group); no
// lane left with two open jobs, nor any lane open while closing; a lane
// is cut exactly when one of the reasons holds of it, and for the reason
// it names.
func TestPlannerProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		p, in := drawPlan(t)
		cuts := p.decide(in)
		for i, c := range cuts {
			if i > 0 && cuts[i-1].Group.Compare(c.Group) >= 0 {
				t.Fatalf("cut %d of %s after %s: not canonical", i, c.Group, cuts[i-1].Group)
			}
			if want := wantCut(in, c.Group, c.Reason); c != want {
				t.Fatalf("cut %v; want it to hold the lane's PARTs of its group: %v", c, want)
			}
		}
		for _, k := range modelLanes(in) {
			checkLaneAfter(t, p, in, k, cuts)
		}
	})
}

// checkLaneAfter: lane k ends the segment with at most one open job (none
// while closing), and it is cut iff a reason holds (shape if it has two
// groups, else the first of every, size, interval, valve, close).
func checkLaneAfter(t *rapid.T, p cutPlanner, in cutInput, k laneKey, cuts []segment.Cut) {
	var left, all []segment.Group
	if o := modelOpen(in, k); o != nil {
		all = append(all, o.group)
	}
	for _, g := range modelGroups(in, k) {
		if !slices.Contains(all, g.group) {
			all = append(all, g.group)
		}
	}
	var reasons []segment.CutReason
	for _, g := range all {
		i := slices.IndexFunc(cuts, func(c segment.Cut) bool { return c.Group == g })
		if i < 0 {
			left = append(left, g)
			continue
		}
		reasons = append(reasons, cuts[i].Reason)
	}
	if len(left) > 1 || in.closing && len(left) > 0 {
		t.Fatalf("lane %v left with open jobs %v (closing %v)", k, left, in.closing)
	}
	want := modelReason(p, in, k, all)
	if len(left) > 0 && want != 0 || len(left) == 0 && slices.ContainsFunc(reasons, func(r segment.CutReason) bool { return r != want }) {
		t.Fatalf("lane %v cut %v, left %v; want every group cut for %v", k, reasons, left, want)
	}
}

// modelReason is why lane k, with groups all, is cut: the first reason
// of DESIGN §8.1 that holds; 0 if none.
func modelReason(p cutPlanner, in cutInput, k laneKey, all []segment.Group) segment.CutReason {
	if len(all) > 1 {
		return segment.CutShape
	}
	c := wantCut(in, all[0], 0)
	var bytes int64
	since := in.now
	if o := modelOpen(in, k); o != nil {
		bytes, since = o.bytes, o.since
	}
	for _, g := range modelGroups(in, k) {
		bytes += g.bytes
	}
	l := p.limits(k.sinkRef)
	switch {
	case l.FileBytes == 0:
		return segment.CutEvery
	case bytes >= l.FileBytes || bytes >= max(in.cacheBytes/4, 1):
		return segment.CutSize
	case in.now-since >= l.FlushInterval:
		return segment.CutInterval
	case in.valve && c.First.Compare(refOf(in.valveBefore)) < 0:
		return segment.CutValve
	case in.closing:
		return segment.CutClose
	}
	return 0
}

// wantCut is the cut of group g for reason r: the lane's open job if it
// is of g, and this segment's PARTs of g.
func wantCut(in cutInput, g segment.Group, r segment.CutReason) segment.Cut {
	c := segment.Cut{Group: g, First: refOf(in.id), Reason: r}
	if o := modelOpen(in, laneOf(g)); o != nil && o.group == g {
		c.First, c.Segments, c.Parts = refOf(o.first), o.segments, o.parts
	}
	for _, sg := range in.groups {
		if sg.group == g {
			c.Segments++
			c.Parts += sg.parts
		}
	}
	return c
}

// modelLanes, modelOpen and modelGroups restate, for the properties,
// the planner's view of the lanes (cutInput.lanes, openOf, groupsOf):
// every lane of the input; its open job; its groups in this segment.
func modelLanes(in cutInput) []laneKey {
	var out []laneKey
	for _, o := range in.open {
		out = append(out, laneOf(o.group))
	}
	for _, g := range in.groups {
		out = append(out, laneOf(g.group))
	}
	slices.SortFunc(out, func(a, b laneKey) int { return strings.Compare(a.sinkRef+"/"+a.namespace, b.sinkRef+"/"+b.namespace) })
	return slices.Compact(out)
}

func modelOpen(in cutInput, k laneKey) *openSummary {
	i := slices.IndexFunc(in.open, func(o openSummary) bool { return laneOf(o.group) == k })
	if i < 0 {
		return nil
	}
	return &in.open[i]
}

func modelGroups(in cutInput, k laneKey) (out []groupParts) {
	for _, g := range in.groups {
		if laneOf(g.group) == k {
			out = append(out, g)
		}
	}
	return out
}

// drawPlan draws limits and a valid input over a few sinks, namespaces,
// schemas and CDC-ness.
func drawPlan(t *rapid.T) (cutPlanner, cutInput) {
	limits := map[string]LaneLimits{}
	for _, s := range []string{"a", "b", "c"} {
		l := LaneLimits{FileBytes: rapid.SampledFrom([]int64{0, 100, 1000}).Draw(t, "file bytes "+s)}
		if l.FileBytes > 0 {
			l.FlushInterval = time.Duration(rapid.IntRange(1, 100).Draw(t, "interval "+s)) * time.Second
		}
		limits[s] = l
	}
	group := rapid.Custom(func(t *rapid.T) segment.Group {
		return segment.Group{SinkRef: rapid.SampledFrom([]string{"a", "b", "c"}).Draw(t, "sink"),
			Namespace: rapid.SampledFrom([]string{"x", "y"}).Draw(t, "namespace"),
			Schema:    segment.SchemaFingerprint(rapid.IntRange(1, 2).Draw(t, "schema")), CDC: rapid.Bool().Draw(t, "cdc")}
	})
	in := cutInput{id: SnapshotID{Epoch: 2, Seq: 10}, now: time.Duration(rapid.IntRange(0, 300).Draw(t, "now")) * time.Second,
		cacheBytes: rapid.Int64Range(0, 8000).Draw(t, "cache bytes"), closing: rapid.Bool().Draw(t, "closing"),
		valve: rapid.Bool().Draw(t, "valve"), valveBefore: SnapshotID{Epoch: 2, Seq: rapid.Uint64Range(1, 11).Draw(t, "valve before")}}
	for _, g := range rapid.SliceOfNDistinct(group, 0, 6, func(g segment.Group) segment.Group { return g }).Draw(t, "groups") {
		in.groups = append(in.groups, gp(g, rapid.Uint32Range(1, 5).Draw(t, "parts"), rapid.Int64Range(0, 1500).Draw(t, "bytes")))
	}
	for _, g := range rapid.SliceOfNDistinct(group, 0, 4, laneOf).Draw(t, "open lanes") {
		segs := rapid.Uint32Range(1, 5).Draw(t, "open segments")
		in.open = append(in.open, openSummary{group: g, first: SnapshotID{Epoch: rapid.Uint64Range(1, 2).Draw(t, "first epoch"), Seq: rapid.Uint64Range(1, 9).Draw(t, "first seq")},
			segments: segs, parts: segs + rapid.Uint32Range(0, 5).Draw(t, "open parts"), bytes: rapid.Int64Range(0, 1500).Draw(t, "open bytes"),
			since: in.now - time.Duration(rapid.IntRange(0, int(in.now/time.Second)).Draw(t, "waited"))*time.Second})
	}
	return cutPlanner{limits: func(ref string) LaneLimits { return limits[ref] }}, in
}
