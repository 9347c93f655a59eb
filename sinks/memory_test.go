package sinks

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/arrowgen"
	"github.com/skipprd/skipprd/sim"
)

func TestMemoryAppliesOnceInFirstApplyOrder(t *testing.T) {
	w := newSimWorld(t, 1, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	defer m.Release()
	sink := m.Sink(w.inc.Timers())
	plain, cdc := newFixture(t, plainSpec), newFixture(t, cdcSpec)
	for _, job := range []*engine.Job{cdc.job, plain.job, cdc.job, cdc.job, plain.job} {
		if err := w.apply(sink, job); err != nil {
			t.Fatalf("apply %s: %v", job.ID, err)
		}
	}
	got := m.Applied()
	if len(got) != 2 || got[0].ID != cdc.job.ID || got[1].ID != plain.job.ID {
		t.Fatalf("applied %v, want [%s %s]", ids(got), cdc.job.ID, plain.job.ID)
	}
	for i, f := range []fixture{cdc, plain} {
		a := got[i]
		if a.SinkRef != f.job.SinkRef || a.Namespace != f.job.Namespace || a.Segment != f.job.Segment {
			t.Fatalf("applied %+v, want the job's sink, namespace and segment", a)
		}
		checkBatches(t, a.Batches, f.job)
		if len(a.Sidecars) != len(f.job.Slices) {
			t.Fatalf("%d sidecars for %d slices", len(a.Sidecars), len(f.job.Slices))
		}
	}
	if got[1].Sidecars[0] != nil || got[1].Sidecars[1] != nil {
		t.Fatal("a plain job's slices got sidecars")
	}
}

func ids(jobs []AppliedJob) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// checkBatches compares the applied batches with the job's, in order.
func checkBatches(t *testing.T, got []arrow.RecordBatch, job *engine.Job) {
	t.Helper()
	var want []arrow.RecordBatch
	for _, s := range job.Slices {
		want = append(want, s.Batches...)
	}
	if len(got) != len(want) {
		t.Fatalf("%d batches applied, the job has %d", len(got), len(want))
	}
	for i := range want {
		if !arrowgen.ExactEqual(got[i], want[i]) {
			t.Fatalf("batch %d differs:\ngot  %v\nwant %v", i, got[i], want[i])
		}
	}
}

// The answer never comes inside Apply (applyChecked fails the test if it
// does), and it comes from the incarnation's timers: nothing is answered
// until the world steps.
func TestMemoryAnswersLater(t *testing.T) {
	w := newSimWorld(t, 2, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	defer m.Release()
	f := newFixture(t, plainSpec)
	answered := false
	applyChecked(t, m.Sink(w.inc.Timers()), f.job, func(err error) { answered = true })
	if answered {
		t.Fatal("answered before the world stepped")
	}
	w.drain()
	if !answered {
		t.Fatal("never answered")
	}
}

// A process killed after Apply never hears back, yet the job is applied;
// the next incarnation's replay is a no-op that answers nil.
func TestMemoryKilledIncarnationLosesTheAnswerNotTheApply(t *testing.T) {
	w := newSimWorld(t, 3, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	defer m.Release()
	f := newFixture(t, cdcSpec)
	answered := false
	applyChecked(t, m.Sink(w.inc.Timers()), f.job, func(error) { answered = true })
	w.inc.Kill()
	w.drain()
	if answered {
		t.Fatal("a killed incarnation got its answer")
	}
	if got := m.Applied(); len(got) != 1 || got[0].ID != f.job.ID {
		t.Fatalf("applied %v, want the job applied once", ids(got))
	}
	next := w.sched.NewIncarnation()
	if err := w.apply(m.Sink(next.Timers()), f.job); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if got := m.Applied(); len(got) != 1 {
		t.Fatalf("applied %v after the replay, want one job", ids(got))
	}
}

// Sidecars are deep copies: the engine may reuse the body the identities
// were decoded from once the job is done.
func TestMemoryKeepsCDCSidecars(t *testing.T) {
	w := newSimWorld(t, 4, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	defer m.Release()
	f := newFixture(t, cdcSpec)
	if err := w.apply(m.Sink(w.inc.Timers()), f.job); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, s := range f.job.Slices {
		want = append(want, sidecarString(s.Sidecar))
		for _, r := range s.Sidecar.Rows {
			for i := range r.Identity {
				r.Identity[i] = 'X' // the body is reused
			}
		}
	}
	got := m.Applied()[0]
	for i, sc := range got.Sidecars {
		if s := sidecarString(sc); s != want[i] || strings.Contains(s, "X") {
			t.Fatalf("slice %d sidecar %s, want %s", i, s, want[i])
		}
	}
}

func sidecarString(sc *segment.Sidecar) string {
	var b bytes.Buffer
	for _, r := range sc.Rows {
		fmt.Fprintf(&b, "%v/%s/%d ", r.Kind, r.Identity, r.Order)
	}
	return b.String()
}

// Memory retains the batches past the engine's release of the slices, and
// Release gives every byte back.
func TestMemoryRetainsUntilRelease(t *testing.T) {
	w := newSimWorld(t, 5, sim.StoreConfig{}, sim.DiskConfig{})
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	f := newFixture(t, plainSpec)
	job := &engine.Job{ID: "retained", SinkRef: "lake", Namespace: "events"}
	for _, s := range f.job.Slices {
		// Re-decode each slice from the allocator under watch.
		job.Slices = append(job.Slices, copySlice(t, s, mem))
	}
	m := NewMemory()
	if err := w.apply(m.Sink(w.inc.Timers()), job); err != nil {
		t.Fatal(err)
	}
	for _, s := range job.Slices {
		s.Release() // as the engine does after done
	}
	if mem.CurrentAlloc() == 0 {
		t.Fatal("Memory did not retain the batches")
	}
	checkBatches(t, m.Applied()[0].Batches, f.job)
	m.Release()
	mem.AssertSize(t, 0)
	if got := m.Applied()[0].Batches; got != nil {
		t.Fatalf("batches still listed after Release: %d", len(got))
	}
	if err := w.apply(m.Sink(w.inc.Timers()), job); err != nil || len(m.Applied()) != 1 {
		t.Fatalf("replay after Release: %v, %d jobs", err, len(m.Applied()))
	}
}

// copySlice is s with its batches re-decoded from mem (an IPC round trip).
func copySlice(t *testing.T, s *segment.Slice, mem memory.Allocator) *segment.Slice {
	t.Helper()
	// Decoded slices reference the segment body in place; copy every
	// column into mem so the allocator sees what is retained.
	out := &segment.Slice{Entry: s.Entry, Schema: s.Schema, Sidecar: s.Sidecar}
	for _, b := range s.Batches {
		cols := make([]arrow.Array, b.NumCols())
		for i, c := range b.Columns() {
			cp, err := array.Concatenate([]arrow.Array{c}, mem)
			if err != nil {
				t.Fatal(err)
			}
			cols[i] = cp
		}
		out.Batches = append(out.Batches, array.NewRecordBatch(s.Schema, cols, b.NumRows()))
		for _, c := range cols {
			c.Release() // the batch holds them
		}
	}
	return out
}

// memoryHolding is a memory sink in a world of seed that holds one
// applied plain job.
func memoryHolding(t *testing.T, seed uint64) (*simWorld, *Memory, fixture) {
	t.Helper()
	w := newSimWorld(t, seed, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	t.Cleanup(m.Release)
	f := newFixture(t, plainSpec)
	if err := w.apply(m.Sink(w.inc.Timers()), f.job); err != nil {
		t.Fatal(err)
	}
	return w, m, f
}

// A job ID names one content; a replay with another is an engine bug and
// must be loud.
func TestMemoryPanicsOnAReplayWithOtherContent(t *testing.T) {
	w, m, f := memoryHolding(t, 6)
	other := *f.job
	other.Slices = other.Slices[:1]
	defer func() {
		if p := recover(); p == nil || !strings.Contains(fmt.Sprint(p), f.job.ID) {
			t.Fatalf("replay with other content: recovered %v, want a panic naming the job", p)
		}
	}()
	m.Sink(w.inc.Timers()).Apply(&other, func(error) {})
}

// Another log's job under an id the sink holds (a collision): refused
// with ErrIDCollision, nothing of it kept, the first job untouched.
func TestMemoryRefusesAnotherJobUnderTheSameID(t *testing.T) {
	w, m, f := memoryHolding(t, 8)
	other := *f.job
	other.Content = "another log's job"
	other.Origin = segment.Origin{WAL: segment.WALID{9}, Pipeline: "b"}
	err := w.apply(m.Sink(w.inc.Timers()), &other)
	if !errors.Is(err, engine.ErrCannotApply) || !errors.Is(err, engine.ErrIDCollision) || !strings.Contains(err.Error(), f.job.ID) {
		t.Fatalf("a job of another content under id %s: %v, want ErrCannotApply and ErrIDCollision naming the id", f.job.ID, err)
	}
	if got := m.Applied(); len(got) != 1 || got[0].Content != f.job.Content {
		t.Fatalf("after the collision the sink holds %d jobs (content %v), want the first one only", len(got), got)
	}
}

func TestSetResolvesSinkRefs(t *testing.T) {
	w := newSimWorld(t, 7, sim.StoreConfig{}, sim.DiskConfig{})
	m := NewMemory()
	lake := m.Sink(w.inc.Timers())
	set := Set{"lake": lake, "nil": nil}
	var _ engine.Sinks = set
	if s, ok := set.Sink("lake"); !ok || s != lake {
		t.Fatal("lake not resolved")
	}
	for _, ref := range []string{"warehouse", "nil", ""} {
		if _, ok := set.Sink(ref); ok {
			t.Fatalf("%q resolved", ref)
		}
	}
}
