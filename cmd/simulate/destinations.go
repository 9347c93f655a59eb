package main

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
)

// destinations are the sinks a simulated world may deliver to, by the
// kind name a world spec gives; DrawWorld picks one or two per world.
var destinations = map[string]sim.DestinationFactory{
	"memory": func(*sim.World, string) sim.Destination {
		return &memoryDest{m: sinks.NewMemory(), byID: map[string]int{}}
	},
	"parquet-objects": func(w *sim.World, ref string) sim.Destination {
		return &objectsDest{w: w, prefix: ref, segOf: map[string]jobOrigin{}}
	},
	"parquet-dir": func(w *sim.World, ref string) sim.Destination {
		return &dirDest{w: w, root: ref, segOf: map[string]jobOrigin{}}
	},
	"postgres": newPGDest,
	"iceberg":  newIceDest,
}

// memoryDest is the in-memory sink: it knows the order it applied jobs in.
// It digests each job as it is first applied (what the sink holds is what
// it was given), then lets the sink release the rows: a long run does not
// keep every row in memory.
type memoryDest struct {
	m    *sinks.Memory
	jobs []sim.DestJob
	byID map[string]int // job ID → index in jobs
	err  error
}

func (d *memoryDest) Name() string { return "memory" }

func (d *memoryDest) Sink(p sim.SinkPorts) engine.Sink { return digestFirst{d, d.m.Sink(p.Timers)} }

// digestFirst digests a job the first time its ID is applied.
type digestFirst struct {
	d     *memoryDest
	inner engine.Sink
}

func (s digestFirst) Apply(job *engine.Job, done func(error)) {
	d := s.d
	s.inner.Apply(job, done) // applies at once (sinks.Memory), answers later
	if _, seen := d.byID[job.ID]; seen {
		return
	}
	j := sim.DestJob{ID: job.ID, Namespace: job.Namespace, Origin: job.Origin, Segment: job.Segment, Order: len(d.jobs)}
	for _, sl := range job.Slices {
		var cdc []segment.CDCRow
		if sl.Sidecar != nil {
			cdc = sl.Sidecar.Rows
		}
		if err := digestSlices(&j.Digest, sl.Batches, []*segment.Sidecar{{Rows: cdc}}); err != nil && d.err == nil {
			d.err = fmt.Errorf("job %s: %w", job.ID, err)
		}
	}
	d.byID[job.ID] = len(d.jobs)
	d.jobs = append(d.jobs, j)
	d.m.ReleaseJob(job.ID)
}

func (d *memoryDest) Contents() ([]sim.DestJob, error) { return d.jobs, d.err }

// digestSlices digests a memory job's rows: its batches, each slice's
// sidecar rows spread over that slice's batches in order.
func digestSlices(d *sim.RowDigest, batches []arrow.RecordBatch, sidecars []*segment.Sidecar) error {
	var cdc []segment.CDCRow
	for _, sc := range sidecars {
		if sc != nil {
			cdc = append(cdc, sc.Rows...)
		}
	}
	if len(cdc) == 0 {
		cdc = nil
	}
	for _, b := range batches {
		n := int(b.NumRows())
		var rows []segment.CDCRow
		if cdc != nil {
			if len(cdc) < n {
				return fmt.Errorf("sidecars hold fewer rows than the batches")
			}
			rows, cdc = cdc[:n], cdc[n:]
		}
		if err := d.AddBatch(b, rows); err != nil {
			return err
		}
	}
	return nil
}

// jobOrigin is which log's segment a job came from.
type jobOrigin struct {
	origin  segment.Origin
	segment engine.SnapshotID
}

// noteSegment remembers which segment of which pipeline a job id came
// from: the object or file name holds only the id, and the oracle keys
// jobs by pipeline and segment. The first apply of an id is noted; a
// second pipeline's job under the same id (the ids of builds before WAL
// identities) would leave its rows unaccounted for, which the oracle
// reports as missing.
type noteSegment struct {
	segOf map[string]jobOrigin
	inner engine.Sink
}

func (n noteSegment) Apply(j *engine.Job, done func(error)) {
	if _, ok := n.segOf[j.ID]; !ok {
		n.segOf[j.ID] = jobOrigin{j.Origin, j.Segment}
	}
	n.inner.Apply(j, done)
}

// objectsDest is Parquet on the simulated object store: the real
// ParquetObjects sink over each incarnation's store client. Its contents
// are read back from the store's truth and decoded; a bucket cannot tell
// the order jobs were applied in.
type objectsDest struct {
	w      *sim.World
	prefix string
	segOf  map[string]jobOrigin
}

func (d *objectsDest) Name() string { return "parquet-objects" }

func (d *objectsDest) Sink(p sim.SinkPorts) engine.Sink {
	return noteSegment{d.segOf, sinks.NewParquetObjects(p.Store, p.Exec, d.prefix)}
}

func (d *objectsDest) Contents() ([]sim.DestJob, error) {
	var out []sim.DestJob
	for _, key := range d.w.Store().Keys(d.prefix + "/") {
		body, _ := d.w.Store().Object(key)
		j, err := parquetJob(key, d.prefix, body, d.segOf)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// dirDest is Parquet in a folder of the simulated disk: the real
// ParquetDir sink over each incarnation's disk client. Its contents are
// the final files the folder holds (temp files start with a dot).
type dirDest struct {
	w     *sim.World
	root  string
	segOf map[string]jobOrigin
}

func (d *dirDest) Name() string { return "parquet-dir" }

func (d *dirDest) Sink(p sim.SinkPorts) engine.Sink {
	return noteSegment{d.segOf, sinks.NewParquetDir(p.Disk, p.Exec, p.Rand, d.root)}
}

func (d *dirDest) Contents() ([]sim.DestJob, error) {
	var out []sim.DestJob
	for _, p := range d.w.Disk().Paths() {
		if !strings.HasPrefix(p, d.root+"/") || !strings.HasSuffix(p, ".parquet") || strings.HasPrefix(path.Base(p), ".") {
			continue
		}
		body, _ := d.w.Disk().File(p)
		j, err := parquetJob(p, d.root, body, d.segOf)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, nil
}

// parquetJob decodes one job's file: {prefix}/{namespace}/…/{id}.parquet.
func parquetJob(name, prefix string, body []byte, segOf map[string]jobOrigin) (sim.DestJob, error) {
	id := strings.TrimSuffix(path.Base(name), ".parquet")
	ns := strings.SplitN(strings.TrimPrefix(name, prefix+"/"), "/", 2)[0]
	o, ok := segOf[id]
	if !ok {
		return sim.DestJob{}, fmt.Errorf("%s: no job %s was ever applied", name, id)
	}
	j := sim.DestJob{ID: id, Namespace: ns, Origin: o.origin, Segment: o.segment, Order: -1}
	if err := digestParquet(&j.Digest, body); err != nil {
		return sim.DestJob{}, fmt.Errorf("%s: %w", name, err)
	}
	return j, nil
}

// digestParquet decodes a Parquet file and digests its rows: uid, row,
// payload, and the CDC columns where they are not null.
func digestParquet(d *sim.RowDigest, b []byte) error {
	return digestParquetAs(d, b, func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		rec.Retain()
		return rec, nil
	})
}

// digestParquetAs is digestParquet with each record first turned into a
// lake record by as (which returns a record the caller releases).
func digestParquetAs(d *sim.RowDigest, b []byte, as func(arrow.RecordBatch) (arrow.RecordBatch, error)) error {
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return err
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return err
	}
	defer tbl.Release()
	tr := array.NewTableReader(tbl, 1<<20)
	defer tr.Release()
	for tr.Next() {
		rec, err := as(tr.RecordBatch())
		if err != nil {
			return err
		}
		err = digestRecord(d, rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return tr.Err()
}

// digestParquetRuns digests a Parquet file's rows as digestParquetAs
// does, the first counts[0] into ds[0], the next counts[1] into ds[1]
// and so on; the file must hold exactly their sum.
func digestParquetRuns(b []byte, as func(arrow.RecordBatch) (arrow.RecordBatch, error), counts []int64, ds []*sim.RowDigest) error {
	var total, seen, in int64 // in: rows digested into run k
	for _, n := range counts {
		total += n
	}
	k := 0
	err := digestParquetAs(&sim.RowDigest{}, b, func(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
		r, err := as(rec)
		if err != nil {
			return nil, err
		}
		defer r.Release()
		for off := int64(0); off < r.NumRows(); {
			for k < len(counts) && in == counts[k] {
				k, in = k+1, 0
			}
			if k == len(counts) {
				return nil, fmt.Errorf("it holds more rows than the %d of the files it stands for", total)
			}
			take := min(counts[k]-in, r.NumRows()-off)
			part := r.NewSlice(off, off+take)
			err := digestRecord(ds[k], part)
			part.Release()
			if err != nil {
				return nil, err
			}
			off, in, seen = off+take, in+take, seen+take
		}
		return r.NewSlice(0, 0), nil // digested above
	})
	if err == nil && seen != total {
		err = fmt.Errorf("it holds %d rows, the files it stands for %d", seen, total)
	}
	return err
}

// digestRecord digests one record of a destination file: the unit
// schema's columns and the optional ones a unit may carry (found by
// name, sim.UnitColumns), then the optional _cdc_op, _cdc_identity,
// _cdc_order columns, all three or none.
func digestRecord(d *sim.RowDigest, rec arrow.RecordBatch) error {
	cols, err := sim.UnitColumns(rec)
	if err != nil {
		return err
	}
	col := func(name string) arrow.Array {
		if idx := rec.Schema().FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	ops, ok1 := col("_cdc_op").(*array.String)
	ids, ok2 := col("_cdc_identity").(*array.Binary)
	orders, ok3 := col("_cdc_order").(*array.Uint64)
	if ok1 != ok2 || ok2 != ok3 {
		return fmt.Errorf("CDC columns %v", rec.Schema())
	}
	for i := range int(rec.NumRows()) {
		d.AddCols(cols, i)
		if ops != nil && ops.IsValid(i) {
			d.AddChange(ops.Value(i), ids.Value(i), orders.Value(i))
		}
	}
	return nil
}
