package main

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sources/objects"
)

// runPrefixWorld runs seed 4's world (it has a prefix source) without
// faults, its prefix source built by f.
func runPrefixWorld(t *testing.T, f sim.PrefixFactory) sim.Result {
	t.Helper()
	j, err := drawJob(4, 30000, "none")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range j.spec.Sources {
		found = found || s.Prefix
	}
	if !found {
		t.Fatal("seed 4's world has no prefix source any more: pick another seed")
	}
	cfg, _ := j.config()
	cfg.Prefix = f
	return sim.NewWorld(cfg).Run(time.Now)
}

// A world with the real objects source passes, and leaves no coroutine
// behind (a suspended one would keep the whole world in memory).
func TestPrefixSourceWorld(t *testing.T) {
	before := runtime.NumGoroutine()
	if res := runPrefixWorld(t, prefixSource); res.Err() != nil {
		t.Fatal(res.Err())
	}
	if after := runtime.NumGoroutine(); after > before {
		t.Fatalf("%d goroutines before the world, %d after: a prefix source's coroutine outlived it", before, after)
	}
}

// hiding is a store that never lists one object.
type hiding struct {
	objects.Store
	key string
}

func (h hiding) List(ctx context.Context) ([]objects.Object, error) {
	l, err := h.Store.List(ctx)
	var out []objects.Object
	for _, o := range l {
		if o.Key != h.key {
			out = append(out, o)
		}
	}
	return out, err
}

// The world catches a source that skips an object (the run never
// converges: the object is never done) and one that ingests an object
// under an offset other than the objects source's.
func TestPrefixSourceOracles(t *testing.T) {
	skipping := func(name, prefix, ns, sink string) sim.PrefixRunner {
		return prefixSourceOver(name, prefix, ns, sink, func(s objects.Store) objects.Store { return hiding{s, "0000000003.parquet"} })
	}
	misplaced := func(name, prefix, ns, sink string) sim.PrefixRunner {
		inner := prefixSource(name, prefix, ns, sink)
		return func(b sim.Blocking, offsets segment.Offsets) error { return inner(offsetShifter{b}, offsets) }
	}
	for _, c := range []struct {
		name string
		f    sim.PrefixFactory
		want string
	}{
		{"skips an object", skipping, "did not converge"},
		{"wrong offset", misplaced, "ingested with offset"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runPrefixWorld(t, c.f)
			if !strings.Contains(strings.Join(res.Violations, "\n"), c.want) {
				t.Fatalf("violations %q, want one saying %q", res.Violations, c.want)
			}
		})
	}
}

// offsetShifter ingests every unit one past its offset.
type offsetShifter struct{ sim.Blocking }

func (o offsetShifter) Ingest(u engine.Unit) error {
	u.Offsets = segment.Offsets{{Key: u.Offsets[0].Key, Value: u.Offsets[0].Value + 1}}
	return o.Blocking.Ingest(u)
}
