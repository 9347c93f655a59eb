package main

import (
	"testing"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
)

// A drawn world whose offsets view is smaller than the keys its sources
// leave in it never converges: an objects source with order "any" keeps
// a key per object, and a full view refuses every new one for good
// (seeds 5120, 5196, 5744 and 5774 drew 1,000–5,000 objects against
// limits of 700–2,300). Every pipeline's drawn limit holds at least one
// key per object and per log partition of its sources.
func TestDrawnOffsetsViewHoldsTheSourcesKeys(t *testing.T) {
	seeds := []uint64{5120, 5196, 5744, 5774}
	for s := range uint64(400) {
		seeds = append(seeds, s+1)
	}
	limited := 0
	for _, seed := range seeds {
		spec := sim.DrawWorld(sim.NewRand(seed).Split("world"), destinationKinds())
		check := func(name string, cfg engine.Config, srcs []sim.SourceSpec) {
			if cfg.OffsetsViewMax == 0 {
				return
			}
			limited++
			keys := 0
			for _, s := range srcs {
				switch {
				case s.Prefix:
					keys += int(s.Units) + 1
				case s.Replayable:
					keys += s.Partitions
				}
			}
			if keys > cfg.OffsetsViewMax {
				t.Errorf("seed %d, %s: offsets view of %d keys, its sources leave %d", seed, name, cfg.OffsetsViewMax, keys)
			}
		}
		check("the first pipeline", spec.Engine, spec.Sources)
		for _, p := range spec.Pipelines {
			check(p.Engine.Pipeline, p.Engine, p.Sources)
		}
	}
	if limited == 0 {
		t.Fatal("no world drew a limit: the test checks nothing")
	}
}
