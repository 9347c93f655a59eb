package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
)

// pipelinesSpec is a small world of three pipelines writing one sink of
// kind dest: the first on the S3 WAL, a second of the same name on a disk
// WAL and a store of its own (a fleet on the default pipeline name), a
// third on the first's store under its own name. All three write the
// plain namespaces events and http; each has a CDC namespace of its own.
func pipelinesSpec(dest string) sim.WorldSpec {
	s := sim.SmallSpec(dest)
	peer := func(n int, name string, own bool, disk bool) sim.PipelineSpec {
		p := sim.PipelineSpec{Engine: s.Engine, Sources: sim.DefaultWorkload(), MemoryBytes: s.MemoryBytes, OwnStore: own}
		p.Engine.Pipeline = name
		if disk {
			d := engine.DefaultDiskWAL()
			d.SegmentBytes, d.BatchBytes = 64<<10, 16<<10
			p.Engine.Disk = d
		}
		for i := range p.Sources {
			if p.Sources[i].CDC {
				p.Sources[i].Name += fmt.Sprintf("_p%d", n)
			}
		}
		return p
	}
	s.Pipelines = []sim.PipelineSpec{peer(2, "sim", true, true), peer(3, "sim3", false, false)}
	return s
}

// runPipelines runs world spec under crashes (kills, power losses of the
// machine) and zombie writers of every pipeline on the S3 WAL, with
// destinations dests.
func runPipelines(t *testing.T, spec sim.WorldSpec, dests map[string]sim.DestinationFactory, seed uint64) sim.Result {
	t.Helper()
	plan, err := faults.Named("crash", sim.NewRand(seed).Split("faults"))
	if err != nil {
		t.Fatal(err)
	}
	plan.Rate[faults.Zombie], plan.PauseMax = 2e-4, 20*time.Second
	plan = plan.Restrict(capabilities(spec))
	inj := faults.NewInjector(plan, sim.NewRand(seed).Split("faults/decide"))
	cfg := sim.Config{Seed: seed, Iters: 60_000, Faults: inj, World: &spec, Destinations: dests, HTTP: httpEndpoint}
	return sim.NewWorld(cfg).Run(time.Now)
}

// Three pipelines, one destination of each kind: every acked row of
// every pipeline lands once (the world's destination oracle, keyed by
// the committing log), the namespaces they share hold jobs of several
// pipelines, a power loss takes down several pipelines' processes, and
// the same seed gives the same trace.
func TestPipelinesShareDestinations(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	if testing.Short() {
		t.Skip("runs four worlds of three pipelines (about 30 s)")
	}
	for _, kind := range []string{"memory", "parquet-objects", "parquet-dir", "postgres"} {
		t.Run(kind, func(t *testing.T) {
			res := runPipelines(t, pipelinesSpec(kind), destinations, 5)
			if res.Err() != nil {
				t.Fatalf("%s\n%s", summary(res), strings.Join(res.Violations, "\n"))
			}
			if res.WorldMarks[sim.MarkPipelinesSharedNamespace] == 0 || res.WorldMarks[sim.MarkPipelinesPowerLoss] == 0 || res.Zombies == 0 {
				t.Fatalf("no shared namespace or machine-wide power loss (%v), or no zombie (%d): the world did not do what it is for\n%s",
					res.WorldMarks, res.Zombies, summary(res))
			}
			if kind != "memory" {
				return
			}
			if again := runPipelines(t, pipelinesSpec(kind), destinations, 5); again.Hash != res.Hash {
				t.Fatalf("same seed, hashes %016x and %016x", res.Hash, again.Hash)
			}
		})
	}
}

// The world fails on the id scheme before WAL identities: a destination
// that keys jobs as every sink did then — the id hashed from the snapshot
// id, sink and ordinals alone, a repeated id taken as applied — loses the
// rows of whichever pipeline applies second, and the destination oracle
// says so.
func TestPipelinesFailOnLegacyIDs(t *testing.T) {
	t.Parallel() // one single-threaded world: runs beside the others once TestSweep is done
	if testing.Short() {
		t.Skip("runs a world of three pipelines")
	}
	dests := map[string]sim.DestinationFactory{"memory": func(w *sim.World, ref string) sim.Destination {
		return &legacyIDDest{Destination: destinations["memory"](w, ref), seen: map[string]bool{}}
	}}
	res := runPipelines(t, pipelinesSpec("memory"), dests, 5)
	if res.Err() == nil || !strings.Contains(strings.Join(res.Violations, "\n"), "lacks") {
		t.Fatalf("a world of three pipelines passed with the old ids: %s\n%v", summary(res), res.Violations)
	}
	t.Logf("caught: %s", res.Violations[0])
}

// legacyIDDest is a destination as sinks were before WAL identities:
// it dedupes on the old compaction id, and a job whose old id it has seen
// is answered as applied without being written.
type legacyIDDest struct {
	sim.Destination
	seen map[string]bool
}

func (d *legacyIDDest) Sink(p sim.SinkPorts) engine.Sink {
	return legacySink{d, d.Destination.Sink(p), p.Timers}
}

type legacySink struct {
	d      *legacyIDDest
	inner  engine.Sink
	timers engine.Timers
}

func (s legacySink) Apply(j *engine.Job, done func(error)) {
	old := legacyCompactionID(j)
	if s.d.seen[old] && !s.d.seen[j.ID] {
		s.timers.AfterFunc(time.Millisecond, func() { done(nil) }) // "already applied"
		return
	}
	s.d.seen[old], s.d.seen[j.ID] = true, true
	s.inner.Apply(j, done)
}

// legacyCompactionID is the id of builds before WAL identities.
func legacyCompactionID(j *engine.Job) string {
	h := sha256.New()
	h.Write([]byte(j.Segment.String() + "\x00" + j.SinkRef + "\x00"))
	for _, s := range j.Slices {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(s.Entry.Ordinal)))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}
