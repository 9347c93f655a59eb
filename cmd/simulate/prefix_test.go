package main

import (
	"context"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sources/objects"
)

// prefixWorld is seed 4's world (it has a prefix source) under profile,
// its prefix source made to drop objects of every format, of several
// chunks, some of them unreadable — or, with old, the one-row-group
// Parquet objects of the worlds recorded before formats were drawn —
// and to poll (seed 4 draws a once source: onceWorld makes it one).
func prefixWorld(t *testing.T, profile string, iters uint64, old bool) job {
	t.Helper()
	j, err := drawJob(4, iters, profile)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for i := range j.spec.Sources {
		s := &j.spec.Sources[i]
		if !s.Prefix {
			continue
		}
		found = true
		s.Once, s.OnceEvery = false, 0
		s.Formats, s.ChunkBytes, s.CorruptPermille = sim.FormatsMixed, 2048, 80
		if old {
			s.Formats, s.ChunkBytes, s.CorruptPermille = "", 0, 0
		}
	}
	if !found {
		t.Fatal("seed 4's world has no prefix source any more: pick another seed")
	}
	// One pipeline: these tests break the one prefix source they set up,
	// and a further pipeline's would break first.
	j.spec.Pipelines = nil
	return j
}

// runPrefixWorld runs the world, its prefix source built by f.
func runPrefixWorld(j job, f sim.PrefixFactory) sim.Result {
	cfg, _ := j.config()
	cfg.Prefix = f
	return sim.NewWorld(cfg).Run(time.Now)
}

// A world with the real objects source passes — objects of every format,
// cut into several units, unreadable ones skipped, as well as the
// objects of the worlds recorded before — and leaves no coroutine behind
// (a suspended one would keep the whole world in memory).
//
// Not parallel: the goroutine count is only this test's while no other
// runs (parallel tests start once every other test has ended).
func TestPrefixSourceWorld(t *testing.T) {
	before := runtime.NumGoroutine()
	res := runPrefixWorld(prefixWorld(t, "none", 30000, false), prefixSource)
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	for _, m := range []string{sim.MarkPrefixJSONL, sim.MarkPrefixCSV, sim.MarkPrefixRowGroups, sim.MarkPrefixMidObject, sim.MarkPrefixSkipped} {
		if res.WorldMarks[m] == 0 {
			t.Errorf("no %s (marks %v)", m, res.WorldMarks)
		}
	}
	if res := runPrefixWorld(prefixWorld(t, "none", 30000, true), prefixSource); res.Err() != nil {
		t.Fatal(res.Err())
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before the worlds, %d after: a prefix source's coroutine outlived one", before, after)
	}
}

// With crashes, objects are resumed mid-way from the recovered offsets.
func TestPrefixSourceResumes(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	res := runPrefixWorld(prefixWorld(t, "crash", 60000, false), prefixSource)
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	if res.Crashes == 0 || res.WorldMarks[sim.MarkPrefixResumed] == 0 {
		t.Fatalf("%d crashes, no object resumed mid-way (marks %v)", res.Crashes, res.WorldMarks)
	}
}

// With a floor (order keys), several objects in flight and objects it
// cannot read, the floor rises over the ones it skipped, and the world
// passes: the sweep's worlds meet that too rarely to require it.
func TestPrefixFloorOverSkippedObjects(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	j := prefixWorld(t, "crash", 60000, false)
	for i := range j.spec.Sources {
		if s := &j.spec.Sources[i]; s.Prefix {
			s.OrderKeys, s.Settle, s.InFlight = true, 100*time.Millisecond, 4
		}
	}
	res := runPrefixWorld(j, prefixSource)
	if res.Err() != nil {
		t.Fatal(res.Err())
	}
	for _, m := range []string{sim.MarkPrefixFloor, sim.MarkPrefixFloorSkipped, sim.MarkPrefixParallel} {
		if res.WorldMarks[m] == 0 {
			t.Errorf("mark %s not reached: %v", m, res.WorldMarks)
		}
	}
}

// hiding is a store that never lists the objects named from.
type hiding struct {
	objects.Store
	from string
}

func (h hiding) List(ctx context.Context, after string) (objects.Page, error) {
	p, err := h.Store.List(ctx, after)
	var out []objects.Object
	for _, o := range p.Objects {
		if !strings.HasPrefix(o.Key, h.from) {
			out = append(out, o)
		}
	}
	p.Objects = out
	return p, err
}

// garbling is a store whose objects named from on read as garbage.
type garbling struct {
	objects.Store
	from string
}

func (g garbling) Open(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	if !strings.HasPrefix(key, g.from) {
		return g.Store.Open(ctx, key, off)
	}
	return io.NopCloser(strings.NewReader(strings.Repeat("{\n", 1<<16))), nil
}

func (g garbling) ReaderAt(ctx context.Context, key string, size int64) (objects.ReadAtCloser, error) {
	if !strings.HasPrefix(key, g.from) {
		return g.Store.ReaderAt(ctx, key, size)
	}
	return garbage{}, nil
}

type garbage struct{}

func (garbage) ReadAt(p []byte, _ int64) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func (garbage) Close() error { return nil }

// renaming is a store that lists every object named .json as .jsonl, so
// that the source ingests what it could not have (an unknown extension).
type renaming struct{ objects.Store }

func (r renaming) List(ctx context.Context, after string) (objects.Page, error) {
	p, err := r.Store.List(ctx, after)
	for i := range p.Objects {
		if strings.HasSuffix(p.Objects[i].Key, ".json") {
			p.Objects[i].Key += "l"
		}
	}
	return p, err
}

func (r renaming) Open(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	if rc, err := r.Store.Open(ctx, key, off); err == nil || !strings.HasSuffix(key, ".jsonl") {
		return rc, err
	}
	return r.Store.Open(ctx, strings.TrimSuffix(key, "l"), off)
}

// over wraps the real source's store, its Blocking port or its options.
func over(store func(objects.Store) objects.Store, port func(sim.Blocking) sim.Blocking, opt func(*sim.PrefixOptions)) sim.PrefixFactory {
	return func(o sim.PrefixOptions) sim.PrefixRunner {
		if opt != nil {
			opt(&o)
		}
		if store == nil {
			store = func(s objects.Store) objects.Store { return s }
		}
		inner := prefixSourceOver(o, store)
		if port == nil {
			return inner
		}
		return ported{inner, port}
	}
}

type ported struct {
	sim.PrefixRunner
	port func(sim.Blocking) sim.Blocking
}

func (p ported) Run(b sim.Blocking, offsets segment.Offsets) error {
	return p.PrefixRunner.Run(p.port(b), offsets)
}

// The world catches a source that skips an object (the run never
// converges: the object is never done), one that ingests under an offset
// other than its rows' end, one that drops a unit's first row or all its
// rows, one that skips an object it could have read, one that ingests
// one it could not, one that stops on an object it cannot read, and one
// that ignores the offsets it resumes from.
func TestPrefixSourceOracles(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	for _, c := range []struct {
		name    string
		profile string
		f       sim.PrefixFactory
		want    string
	}{
		{"skips an object", "none", over(func(s objects.Store) objects.Store { return hiding{s, "0000000002."} }, nil, nil), "did not converge"},
		{"wrong offset", "none", over(nil, func(b sim.Blocking) sim.Blocking { return offsetShifter{b} }, nil), "ingested with offset"},
		{"drops a row", "none", over(nil, func(b sim.Blocking) sim.Blocking { return rowDropper{b} }, nil), "rows skipped, split or sent twice"},
		{"sends no rows", "none", over(nil, func(b sim.Blocking) sim.Blocking { return emptier{b} }, nil), "a unit whose rows cannot be read (0 runs)"},
		{"skips a readable object", "none", over(func(s objects.Store) objects.Store { return garbling{s, ""} }, nil, nil),
			"the world dropped"},
		{"ingests an unreadable object", "none", over(func(s objects.Store) objects.Store { return renaming{s} }, nil, nil),
			"names no object it can ingest"},
		{"stops on an unreadable object", "none", over(nil, nil, func(o *sim.PrefixOptions) { o.Skip = false }), "prefix source obj4 stopped"},
		{"forgets its offsets", "crash", forgetful, "rows skipped, split or sent twice"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runPrefixWorld(prefixWorld(t, c.profile, 60000, false), c.f)
			if !strings.Contains(strings.Join(res.Violations, "\n"), c.want) {
				t.Fatalf("violations %q, want one saying %q", res.Violations, c.want)
			}
		})
	}
}

// forgetful runs the source as if nothing had been ingested before.
func forgetful(o sim.PrefixOptions) sim.PrefixRunner { return amnesiac{prefixSource(o)} }

type amnesiac struct{ sim.PrefixRunner }

func (a amnesiac) Run(b sim.Blocking, _ segment.Offsets) error { return a.PrefixRunner.Run(b, nil) }

// offsetShifter ingests every unit one past its offset.
type offsetShifter struct{ sim.Blocking }

func (o offsetShifter) Ingest(u engine.Unit) error {
	u.Offsets = segment.Offsets{{Key: u.Offsets[0].Key, Value: u.Offsets[0].Value + 1}}
	return o.Blocking.Ingest(u)
}

// rowDropper ingests every unit of two rows or more without its first.
type rowDropper struct{ sim.Blocking }

func (r rowDropper) Ingest(u engine.Unit) error {
	if len(u.Batches) == 0 || u.Batches[0].NumRows() < 2 {
		return r.Blocking.Ingest(u)
	}
	b := u.Batches[0].NewSlice(1, u.Batches[0].NumRows())
	defer b.Release()
	u.Batches = append([]arrow.RecordBatch{b}, u.Batches[1:]...)
	return r.Blocking.Ingest(u)
}

// emptier ingests every unit without its rows.
type emptier struct{ sim.Blocking }

func (e emptier) Ingest(u engine.Unit) error {
	u.Batches = nil
	return e.Blocking.Ingest(u)
}

// The floor oracle catches a floor over objects not done: every unit
// carries one above every object's name, the source's own dropped.
func TestPrefixFloorOracle(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	j := prefixWorld(t, "none", 60000, false)
	for i := range j.spec.Sources {
		if s := &j.spec.Sources[i]; s.Prefix {
			s.OrderKeys, s.Settle = true, 100*time.Millisecond
		}
	}
	res := runPrefixWorld(j, over(nil, func(b sim.Blocking) sim.Blocking { return floorRaiser{b} }, nil))
	if want := "under it is not done"; !strings.Contains(strings.Join(res.Violations, "\n"), want) {
		t.Fatalf("violations %q, want one saying %q", res.Violations, want)
	}
}

// floorRaiser ingests every unit with a floor above every object.
type floorRaiser struct{ sim.Blocking }

func (f floorRaiser) Ingest(u engine.Unit) error {
	var plain segment.Offsets
	for _, o := range u.Offsets {
		if !segment.IsFloor(o.Key) {
			plain = append(plain, o)
		}
	}
	fam, _, _ := strings.Cut(strings.TrimPrefix(plain[0].Key, "objects/"), "/")
	u.Offsets = plain.Advance(segment.FloorKey("objects/"+fam+"/", "9999999999"), 1)
	return f.Blocking.Ingest(u)
}
