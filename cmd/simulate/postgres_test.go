package main

import (
	"cmp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/faults"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks/postgres"
)

// pgWorldJob is a small world delivering to Postgres — a busy plain
// stream, a trickle, and a CDC source changing four keys out of order —
// under every fault of the "all" profile but those that end a run early.
func pgWorldJob(t *testing.T, seed uint64) job {
	t.Helper()
	spec := sim.SmallSpec("postgres")
	spec.Sources = spec.Sources[:3] // events, pageviews, orders: no HTTP source
	spec.Sources[2].Keys = 4
	plan, err := faults.Named("all", sim.NewRand(seed))
	if err != nil {
		t.Fatal(err)
	}
	plan.Rate[faults.SinkRefuse], plan.Rate[faults.CorruptAtRest] = 0, 0
	return job{seed: seed, iters: 60_000, profile: "all", spec: spec, plan: plan}
}

// runPGWorld runs the job's world, its Postgres destination wrapped by
// wrap (nil: as is).
func runPGWorld(j job, wrap func(*pgDest) sim.Destination) sim.Result {
	cfg, _ := j.config()
	if wrap != nil {
		cfg.Destinations = map[string]sim.DestinationFactory{"postgres": func(w *sim.World, ref string) sim.Destination {
			return wrap(newPGDest(w, ref).(*pgDest))
		}}
	}
	return sim.NewWorld(cfg).Run(time.Now)
}

// A Postgres world passes every oracle, the table oracle included, and
// its sink meets its rare paths: ambiguous commits settled both ways,
// outages, lookups that fail, replays that commit nothing, and CDC
// changes that arrive after newer ones.
func TestPostgresWorld(t *testing.T) {
	res := runPGWorld(pgWorldJob(t, 3), nil)
	if res.Err() != nil {
		t.Fatalf("%s\n%s", summary(res), strings.Join(res.Violations, "\n"))
	}
	for _, m := range []string{markPGAmbiguousLanded, markPGAmbiguousLost, markPGOutage, markPGLookupFailed, markPGZombieCommit,
		markPGReplayNoop, markPGOutOfOrder} {
		if res.DestMarks[m] == 0 {
			t.Errorf("mark %s not reached: %v", m, res.DestMarks)
		}
	}
}

// A value the server rejects refuses the job for good: the sink answers
// engine.ErrCannotApply, the engine halts the lane and alerts naming the
// job, and the run ends there as it should, its safety checks passed.
func TestPostgresRefusalHalts(t *testing.T) {
	j := pgWorldJob(t, 3)
	j.plan.Rate[faults.SinkRefuse] = 0.01
	res := runPGWorld(j, nil)
	switch {
	case res.Err() != nil:
		t.Fatalf("%s\n%s", summary(res), strings.Join(res.Violations, "\n"))
	case !strings.Contains(res.Halted, "refused job"):
		t.Fatalf("not halted on a refused job: %q", res.Halted)
	case res.DestMarks[markPGRefused] != 1:
		t.Fatalf("%d refusals counted", res.DestMarks[markPGRefused])
	}
}

// tampered is a Postgres destination whose tables something damages
// just before the table oracle reads them.
type tampered struct {
	*pgDest
	damage func(d *pgDest, acked sim.Acked)
}

func (t tampered) CheckTables(a sim.Acked) []string {
	t.damage(t.pgDest, a)
	return t.pgDest.CheckTables(a)
}

// The world's table oracle fires on a model that lost a plain row, or
// where an older change overwrote an identity's newest one.
func TestPostgresWorldTableOracle(t *testing.T) {
	for _, c := range []struct {
		name   string
		damage func(d *pgDest, acked sim.Acked)
		want   string
	}{
		{"a row lost", func(d *pgDest, _ sim.Acked) {
			tb := d.model.Table("events")
			tb.Rows = tb.Rows[1:]
		}, "destination lake tables: table events lacks row"},
		{"an older change applied last", func(d *pgDest, a sim.Acked) {
			changes := ackedChanges(a, "orders")
			slices.SortFunc(changes, func(x, y change) int {
				return cmp.Or(strings.Compare(x.identity, y.identity), cmp.Compare(x.order, y.order))
			})
			older := changes[len(changes)-2] // the last identity's second newest change
			d.model.Table("orders").State[older.identity] = postgres.RowState{Order: older.order, Deleted: older.deleted, Values: older.values}
		}, "the acknowledged changes applied once in token order make it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res := runPGWorld(pgWorldJob(t, 3), func(d *pgDest) sim.Destination { return tampered{d, c.damage} })
			if !strings.Contains(strings.Join(res.Violations, "\n"), c.want) {
				t.Fatalf("violations %q, want one saying %q", res.Violations, c.want)
			}
		})
	}
}
