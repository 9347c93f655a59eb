package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sinks/iceberg"
)

// iceDest is an Iceberg catalog and warehouse in the world: an
// iceberg.Model — tables, snapshots, pins — that outlives incarnations,
// driven by the real iceberg.Sink of each incarnation over its Blocking
// port, with the data files written through the incarnation's store (a
// bucket warehouse) or disk (a folder), as production writes them.
//
// Faults (sim.OwnFaults) are the world's sink faults, drawn once per
// catalog request that writes (create, evolve, append, expire): a sink
// error fails it — definitely, or with no answer — or takes the catalog
// down for a while; an ambiguous sink fault lands the request and loses
// its answer; a refusal is drawn as a plain failure (a catalog refuses
// no job: refusals come from the schema, as Reconcile decides). Besides
// them, another pipeline commits to a table first now and then
// (conflictPermille per write): a snapshot, or for an Evolve a column of
// its own, so the sink's pinned request conflicts and rebases.
//
// Contents are the jobs whose files the tables' current snapshots list,
// read back from the store or disk and decoded; the oracles on top:
// no compaction id in two snapshots of a table's whole log, every
// listed file present, and the retained snapshots bounded.
type iceDest struct {
	w       *sim.World
	ref     string
	model   *iceberg.Model
	rand    *sim.Rand
	segOf   map[string]jobOrigin
	onStore bool
	keep    int // Retention.KeepLast
	small   iceberg.SmallFiles
	// conflictPermille is the chance a write meets another writer's
	// commit first.
	conflictPermille int
	sinks            []*iceberg.Sink
	downUntil        time.Duration
	marks            iceMarks
}

// iceMarks counts what the destination sees.
type iceMarks struct {
	outage, foreign uint64
}

// iceBucket is the simulated warehouse bucket's name in file URIs (the
// world has one store; keys are what matter).
const iceBucket = "sim-lake"

func newIceDest(w *sim.World, ref string) sim.Destination {
	r := w.DestRand("iceberg/" + ref)
	d := &iceDest{w: w, ref: ref, rand: r, segOf: map[string]jobOrigin{}, onStore: r.Chance(0.5),
		keep: 1 + r.Intn(8), conflictPermille: r.Intn(200)}
	// A world's job files are small: look often, rewrite a few at a
	// time, now and then bounded by bytes to a couple of files; a merged
	// file stops being small at 64–512 KiB, a few tiers up, as a lake's
	// does at 32 MiB (else every row is rewritten once per tier for ever,
	// and rewrites are most of a world's time).
	min := 3 + r.Intn(6)
	d.small = iceberg.SmallFiles{Every: min * (1 + r.Intn(2)), MinFiles: min, SmallBytes: 64 << 10 << r.Intn(4), MaxBytes: 1 << 30}
	if r.Chance(0.25) {
		d.small.MaxBytes = 4 << 10
	}
	base := "file:///sim/" + ref
	if d.onStore {
		base = "s3://" + iceBucket + "/" + ref
	}
	d.model = iceberg.NewModel(base)
	d.model.Decide = d.decide
	d.model.Down = d.down
	d.model.NowMs = w.WallUnixMs
	return d
}

func (d *iceDest) Name() string { return "iceberg" }

// OwnFaults implements sim.OwnFaults.
func (d *iceDest) OwnFaults() {}

func (d *iceDest) Sink(p sim.SinkPorts) engine.Sink {
	var files iceberg.Files
	if d.onStore {
		files = iceberg.NewObjectFiles(sinks.NewParquetObjects(p.Store, p.Exec, ""), iceBucket, d.ref)
	} else {
		files = iceberg.NewDirFiles(sinks.NewParquetDir(p.Disk, p.Exec, p.Rand, d.ref), "/sim/"+d.ref)
	}
	s := iceberg.NewSink(iceberg.Config{Catalog: d.model, Namespace: "skipprd", SinkRef: d.ref, Files: files,
		Retention: iceberg.Retention{KeepLast: d.keep}, SmallFiles: d.small, Blocking: p.Blocking, Exec: p.Exec, Clock: p.Clock})
	d.sinks = append(d.sinks, s)
	return noteSegment{d.segOf, s}
}

// decide is the fate of one catalog request.
func (d *iceDest) decide(op iceberg.Op, id iceberg.Ident) iceberg.Outcome {
	if op == iceberg.OpLoad {
		return iceberg.OK // reads fail only in an outage
	}
	switch d.w.SinkFault(op.String() + " " + id.String()) {
	case sim.SinkAmbiguous:
		return iceberg.Ambiguous
	case sim.SinkFail, sim.SinkRefuse:
		if d.rand.Intn(4) == 0 {
			d.goDown()
		}
		if d.rand.Chance(0.5) {
			return iceberg.FailAmbiguous
		}
		return iceberg.Fail
	}
	if op != iceberg.OpCreate && d.rand.Intn(1000) < d.conflictPermille {
		d.marks.foreign++
		return iceberg.Conflict
	}
	return iceberg.OK
}

func (d *iceDest) goDown() {
	d.downUntil = max(d.downUntil, d.w.Now()+d.rand.Duration(100*time.Millisecond, 20*time.Second))
}

func (d *iceDest) down() bool {
	if d.w.Now() >= d.downUntil {
		return false
	}
	d.marks.outage++
	return true
}

// Contents implements sim.Destination: every job whose files a table's
// current snapshot lists, its rows decoded from them in order.
func (d *iceDest) Contents() ([]sim.DestJob, error) {
	var out []sim.DestJob
	for _, id := range d.model.Tables() {
		mt := d.model.Table(id)
		if err := d.checkTable(id, mt); err != nil {
			return nil, err
		}
		jobs, err := d.tableJobs(id, mt)
		if err != nil {
			return nil, err
		}
		out = append(out, jobs...)
	}
	return out, nil
}

// checkTable holds a table to the protocol's promises: no compaction id
// in two snapshots of its whole log, and retained snapshots bounded by
// the retention, the expiry's slack, and the commits whose expiry was
// skipped (a failed request) or that another writer made.
func (d *iceDest) checkTable(id iceberg.Ident, mt *iceberg.ModelTable) error {
	seen := map[string]int64{}
	for _, s := range mt.Log {
		job := s.Summary[iceberg.SummaryCompactionID]
		if job == "" {
			continue
		}
		if prev, dup := seen[job]; dup {
			return fmt.Errorf("table %s: compaction id %s in snapshots %d and %d", id, job, prev, s.ID)
		}
		seen[job] = s.ID
	}
	var skipped int64
	for _, s := range d.sinks {
		st := s.Stats()
		skipped += st.ExpireFailed + st.MaintainSkipped
	}
	bound := int64(d.keep) + iceberg.ExpireSlack + 1 + skipped + int64(d.marks.foreign)
	if n := int64(len(mt.Snapshots)); n > bound {
		return fmt.Errorf("table %s retains %d snapshots, more than keep %d + slack %d + 1 + %d skipped expiries + %d foreign commits",
			id, n, d.keep, iceberg.ExpireSlack, skipped, d.marks.foreign)
	}
	return nil
}

// tableJobs reads a table's current files back, grouped by the job whose
// snapshot added them; a rewritten file's rows are split back into the
// files it replaced (Model.Rewritten, their order in it) and so on down
// to the jobs' own files.
func (d *iceDest) tableJobs(id iceberg.Ident, mt *iceberg.ModelTable) ([]sim.DestJob, error) {
	bySnap := map[int64]map[string]string{}
	for _, s := range mt.Log {
		bySnap[s.ID] = s.Summary
	}
	var out []sim.DestJob
	var digests []*sim.RowDigest // out[i]'s, while out grows
	index := map[string]int{}
	digestOf := func(f iceberg.ModelFile) (*sim.RowDigest, error) {
		jobID := bySnap[f.Snapshot][iceberg.SummaryCompactionID]
		o, ok := d.segOf[jobID]
		if !ok {
			return nil, fmt.Errorf("table %s: file %s of snapshot %d names job %q, which no sink was ever given", id, f.Path, f.Snapshot, jobID)
		}
		if _, dup := index[jobID]; dup {
			// One file per job (the default spec: the ingest day), so a
			// job's rows never need ordering across files.
			return nil, fmt.Errorf("table %s: job %s has rows in two files (the second: %s)", id, jobID, f.Path)
		}
		index[jobID] = len(out)
		out = append(out, sim.DestJob{ID: jobID, Namespace: id.Name, Origin: o.origin, Segment: o.segment, Order: -1})
		digests = append(digests, &sim.RowDigest{})
		return digests[len(digests)-1], nil
	}
	for _, f := range mt.Files {
		leaves := d.leaves(mt, f)
		ds := make([]*sim.RowDigest, len(leaves))
		counts := make([]int64, len(leaves))
		for k, l := range leaves {
			dg, err := digestOf(l)
			if err != nil {
				return nil, err
			}
			ds[k], counts[k] = dg, l.Rows
		}
		body, err := d.read(f.Path)
		if err != nil {
			return nil, fmt.Errorf("table %s, snapshot %d: %w", id, f.Snapshot, err)
		}
		if err := digestParquetRuns(body, asLakeRecord, counts, ds); err != nil {
			return nil, fmt.Errorf("table %s: file %s: %w", id, f.Path, err)
		}
	}
	for i := range out {
		out[i].Digest = *digests[i]
	}
	return out, nil
}

// leaves are the jobs' own files whose rows f holds, in order: f itself,
// or for a rewritten file the leaves of the files it replaced.
func (d *iceDest) leaves(mt *iceberg.ModelTable, f iceberg.ModelFile) []iceberg.ModelFile {
	parts, ok := mt.Rewritten[f.Path]
	if !ok {
		return []iceberg.ModelFile{f}
	}
	var out []iceberg.ModelFile
	for _, p := range parts {
		out = append(out, d.leaves(mt, p)...)
	}
	return out
}

// read returns a data file's bytes from the world's store or disk.
func (d *iceDest) read(uri string) ([]byte, error) {
	if d.onStore {
		key := strings.TrimPrefix(uri, "s3://"+iceBucket+"/")
		if b, ok := d.w.Store().Object(key); ok {
			return b, nil
		}
	} else {
		p := d.ref + "/" + strings.TrimPrefix(uri, "file:///sim/"+d.ref+"/")
		if b, _ := d.w.Disk().File(p); b != nil {
			return b, nil
		}
	}
	return nil, fmt.Errorf("data file %s is listed but not there", uri)
}

// asLakeRecord drops _ingested_at — the partition column the sink adds —
// and turns a decimal(20,0) _cdc_order back into the uint64 token, so
// digestRecord reads an Iceberg file as a lake file.
func asLakeRecord(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		col := rec.Column(i)
		switch {
		case f.Name == iceberg.PartitionDefault:
			continue
		case f.Name == sinks.ColumnCDCOrder:
			dec, ok := col.(*array.Decimal128)
			if !ok {
				return nil, fmt.Errorf("column %s is %s, not decimal(20,0)", f.Name, f.Type)
			}
			u := array.NewUint64Builder(memory.DefaultAllocator)
			for j := range dec.Len() {
				if dec.IsNull(j) {
					u.AppendNull()
					continue
				}
				u.Append(decimalToUint64(dec.Value(j)))
			}
			col = u.NewArray()
			defer col.Release()
			f = arrow.Field{Name: f.Name, Type: arrow.PrimitiveTypes.Uint64, Nullable: true}
		}
		fields = append(fields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable})
		cols = append(cols, col)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows()), nil
}

func decimalToUint64(v decimal128.Num) uint64 {
	return v.LowBits() // exact: 0 ≤ v < 2^64, so the high bits are 0
}

// Marks implements sim.Marked.
func (d *iceDest) Marks() map[string]uint64 {
	var st iceberg.Stats
	for _, s := range d.sinks {
		x := s.Stats()
		st.Conflicts += x.Conflicts
		st.ConflictLanded += x.ConflictLanded
		st.AmbiguousLanded += x.AmbiguousLanded
		st.AmbiguousLost += x.AmbiguousLost
		st.FoundSnapshot += x.FoundSnapshot
		st.FoundWatermark += x.FoundWatermark
		st.Expired += x.Expired
		st.Evolutions += x.Evolutions
		st.Rewritten += x.Rewritten
		st.RewriteLanded += x.RewriteLanded
		st.RewriteConflicts += x.RewriteConflicts
		st.RewriteFailed += x.RewriteFailed
		st.RewriteSplit += x.RewriteSplit
	}
	return map[string]uint64{
		markIceConflict:        uint64(st.Conflicts),
		markIceConflictLanded:  uint64(st.ConflictLanded),
		markIceAmbiguousLanded: uint64(st.AmbiguousLanded),
		markIceAmbiguousLost:   uint64(st.AmbiguousLost),
		markIceFoundSnapshot:   uint64(st.FoundSnapshot),
		markIceFoundWatermark:  uint64(st.FoundWatermark),
		markIceExpired:         uint64(st.Expired),
		markIceEvolved:         uint64(st.Evolutions),
		markIceOutage:          d.marks.outage,
		markIceRewritten:       uint64(st.Rewritten),
		markIceRewriteLanded:   uint64(st.RewriteLanded),
		markIceRewriteConflict: uint64(st.RewriteConflicts),
		markIceRewriteFailed:   uint64(st.RewriteFailed),
		markIceRewriteSplit:    uint64(st.RewriteSplit),
	}
}

// The iceberg destination's coverage marks (coverage.go).
const (
	markIceConflict        = "ice-conflict-rebased"
	markIceConflictLanded  = "ice-conflict-found-landed"
	markIceAmbiguousLanded = "ice-ambiguous-landed"
	markIceAmbiguousLost   = "ice-ambiguous-lost"
	markIceFoundSnapshot   = "ice-found-in-snapshot"
	markIceFoundWatermark  = "ice-found-by-watermark"
	markIceExpired         = "ice-expired"
	markIceEvolved         = "ice-schema-evolved"
	markIceOutage          = "ice-outage"
	markIceRewritten       = "ice-rewritten"
	markIceRewriteLanded   = "ice-rewrite-landed"
	markIceRewriteConflict = "ice-rewrite-rebased"
	markIceRewriteFailed   = "ice-rewrite-failed"
	markIceRewriteSplit    = "ice-rewrite-schemas-split"
)
