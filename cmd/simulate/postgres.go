package main

import (
	"context"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks/postgres"
)

// pgDest is a Postgres database in the world: a postgres.Model — its
// tables and applied-jobs table — that outlives incarnations, driven by
// the real postgres.Sink of each incarnation over that incarnation's
// Blocking port. Its contents are the jobs that actually committed,
// digested as they commit (Model.OnCommit), in commit order; its tables
// are checked row by row after convergence (pgcheck.go).
//
// Faults (sim.OwnFaults) are the world's sink faults, drawn once per
// transaction that reaches COMMIT (Model.Decide): a sink error fails it —
// definitely, or with an answer that says the outcome is unknown
// (FailAmbiguous) — or takes the server down for a while (Model.Down: an
// outage of simulated time that fails every call, lookups included); an
// ambiguous sink fault commits and answers that the outcome is unknown,
// now and then because the server went down during the COMMIT, so that
// the sink's lookup fails too; a refusal is a value the server rejects
// (engine.ErrCannotApply). Without sink faults in the plan, every
// transaction commits.
type pgDest struct {
	w     *sim.World
	ref   string
	model *postgres.Model
	rand  *sim.Rand
	segOf map[string]jobOrigin
	// jobs are the committed jobs in commit order.
	// INVARIANT: their ids are model.AppliedJobs(), in order.
	jobs      []sim.DestJob
	err       error
	sinks     []*postgres.Sink // one per incarnation, for their Stats
	downUntil time.Duration    // the server is down before this time
	marks     pgMarks
	// newest is, per CDC table, the highest order token committed for
	// each identity: a change that commits below it arrived out of order.
	newest map[string]map[string]uint64
}

// pgMarks counts what the destination sees of the sink's rare paths.
type pgMarks struct {
	outage, lookupFailed, zombieCommit, replayNoop, outOfOrder uint64
}

// Fault shapes: the share of failures that are ambiguous, of failures
// that take the server down, and of ambiguous commits during which it
// goes down (in quarters); how long an outage lasts.
const (
	pgFailAmbiguousQuarters = 2
	pgFailOutageQuarters    = 1
	pgCommitOutageQuarters  = 1
	pgOutageMin             = 100 * time.Millisecond
	pgOutageMax             = 20 * time.Second
)

func newPGDest(w *sim.World, ref string) sim.Destination {
	d := &pgDest{w: w, ref: ref, model: postgres.NewModel(), rand: w.DestRand("postgres/" + ref),
		segOf: map[string]jobOrigin{}, newest: map[string]map[string]uint64{}}
	d.model.Decide = d.decide
	d.model.Down = d.down
	d.model.OnCommit = d.committed
	return d
}

func (d *pgDest) Name() string { return "postgres" }

// OwnFaults implements sim.OwnFaults.
func (d *pgDest) OwnFaults() {}

func (d *pgDest) Sink(p sim.SinkPorts) engine.Sink {
	s := postgres.NewSink(pgDB{d}, p.Blocking)
	d.sinks = append(d.sinks, s)
	return noteSegment{d.segOf, s}
}

// decide is the fate of one transaction at its COMMIT.
func (d *pgDest) decide(tx *postgres.Tx) postgres.Outcome {
	switch d.w.SinkFault(tx.JobID) {
	case sim.SinkOK:
		return postgres.Commit
	case sim.SinkRefuse:
		return postgres.Refuse
	case sim.SinkAmbiguous:
		if d.rand.Intn(4) < pgCommitOutageQuarters {
			d.goDown()
		}
		return postgres.CommitAmbiguous
	}
	// A failure: ambiguous or not, and in either case now and then
	// because the server went down (then the lookup fails too).
	ambiguous := d.rand.Intn(4) < pgFailAmbiguousQuarters
	if d.rand.Intn(4) < pgFailOutageQuarters {
		d.goDown()
	}
	if ambiguous {
		return postgres.FailAmbiguous
	}
	return postgres.Fail
}

// goDown starts an outage now (or prolongs the current one).
func (d *pgDest) goDown() {
	d.downUntil = max(d.downUntil, d.w.Now()+d.rand.Duration(pgOutageMin, pgOutageMax))
}

func (d *pgDest) down() bool {
	if d.w.Now() >= d.downUntil {
		return false
	}
	d.marks.outage++
	return true
}

// committed digests a transaction that committed: its rows and changes
// in order, as the exactly-once oracle digests the job committed in the
// WAL.
func (d *pgDest) committed(tx *postgres.Tx) {
	o, ok := d.segOf[tx.JobID]
	if !ok && d.err == nil {
		d.err = fmt.Errorf("job %s committed, but no sink was ever given it", tx.JobID)
	}
	j := sim.DestJob{ID: tx.JobID, Namespace: tx.Table, Origin: o.origin, Segment: o.segment, Order: len(d.jobs)}
	if err := digestSlices(&j.Digest, tx.Batches, []*segment.Sidecar{{Rows: tx.Changes}}); err != nil && d.err == nil {
		d.err = fmt.Errorf("job %s: %w", tx.JobID, err)
	}
	d.jobs = append(d.jobs, j)
	if tx.CDC {
		d.noteOrder(tx)
	}
}

// noteOrder counts the changes of tx that arrived after a newer change
// of their identity had committed.
func (d *pgDest) noteOrder(tx *postgres.Tx) {
	newest := d.newest[tx.Table]
	if newest == nil {
		newest = map[string]uint64{}
		d.newest[tx.Table] = newest
	}
	for _, c := range tx.Changes {
		id := string(c.Identity)
		if n, ok := newest[id]; ok && n > c.Order {
			d.marks.outOfOrder++
			continue
		}
		newest[id] = c.Order
	}
}

func (d *pgDest) Contents() ([]sim.DestJob, error) {
	ids := d.model.AppliedJobs()
	if len(ids) != len(d.jobs) {
		return nil, fmt.Errorf("the applied-jobs table holds %d jobs, %d commits were seen", len(ids), len(d.jobs))
	}
	for i, id := range ids {
		if d.jobs[i].ID != id {
			return nil, fmt.Errorf("applied job %d is %s in the applied-jobs table, %s as committed", i, id, d.jobs[i].ID)
		}
	}
	return d.jobs, d.err
}

// Marks implements sim.Marked: the sinks' rare outcomes (their Stats
// over every incarnation) and what the destination saw.
func (d *pgDest) Marks() map[string]uint64 {
	var st postgres.Stats
	for _, s := range d.sinks {
		x := s.Stats()
		st.AmbiguousLanded += x.AmbiguousLanded
		st.AmbiguousLost += x.AmbiguousLost
		st.Refused += x.Refused
	}
	return map[string]uint64{
		markPGAmbiguousLanded: uint64(st.AmbiguousLanded),
		markPGAmbiguousLost:   uint64(st.AmbiguousLost),
		markPGRefused:         uint64(st.Refused),
		markPGOutage:          d.marks.outage,
		markPGLookupFailed:    d.marks.lookupFailed,
		markPGZombieCommit:    d.marks.zombieCommit,
		markPGReplayNoop:      d.marks.replayNoop,
		markPGOutOfOrder:      d.marks.outOfOrder,
	}
}

// pgDB is the model as one incarnation's sink sees it, counting what
// happens to its calls.
type pgDB struct{ d *pgDest }

// Apply implements postgres.DB. A transaction that commits with its ctx
// ended ran after its process died (the Blocking port lets a COMMIT
// already sent land); one that succeeds without committing was a replay.
func (db pgDB) Apply(ctx context.Context, tx *postgres.Tx) (postgres.Found, error) {
	d := db.d
	before := len(d.jobs)
	found, err := d.model.Apply(ctx, tx)
	switch committed := len(d.jobs) > before; {
	case committed && ctx.Err() != nil:
		d.marks.zombieCommit++
	case !committed && err == nil:
		d.marks.replayNoop++
	}
	return found, err
}

// Applied implements postgres.DB.
func (db pgDB) Applied(ctx context.Context, tx *postgres.Tx) (postgres.Found, error) {
	found, err := db.d.model.Applied(ctx, tx)
	if err != nil {
		db.d.marks.lookupFailed++
	}
	return found, err
}

// The postgres destination's coverage marks (coverage.go).
const (
	markPGAmbiguousLanded = "pg-ambiguous-landed"
	markPGAmbiguousLost   = "pg-ambiguous-lost"
	markPGRefused         = "pg-refused"
	markPGOutage          = "pg-outage"
	markPGLookupFailed    = "pg-lookup-failed"
	markPGZombieCommit    = "pg-zombie-commit"
	markPGReplayNoop      = "pg-replay-noop"
	markPGOutOfOrder      = "pg-cdc-out-of-order"
)
