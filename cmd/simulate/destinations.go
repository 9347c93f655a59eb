package main

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
)

// destinations are the sinks a simulated world may deliver to; each seed
// picks one (sim.Config.Destinations).
var destinations = []sim.DestinationFactory{
	func(*sim.World) sim.Destination { return &memoryDest{m: sinks.NewMemory()} },
	func(w *sim.World) sim.Destination {
		return &objectsDest{w: w, prefix: "lake", segOf: map[string]engine.SnapshotID{}}
	},
}

// memoryDest is the in-memory sink: it knows the order it applied jobs in.
type memoryDest struct{ m *sinks.Memory }

func (d *memoryDest) Name() string { return "memory" }

func (d *memoryDest) Sink(p engine.Ports) engine.Sink { return d.m.Sink(p.Timers) }

func (d *memoryDest) Contents() ([]sim.DestJob, error) {
	var out []sim.DestJob
	for i, a := range d.m.Applied() {
		j := sim.DestJob{ID: a.ID, Namespace: a.Namespace, Segment: a.Segment, Order: i}
		for _, b := range a.Batches {
			j.UIDs = append(j.UIDs, b.Column(0).(*array.Int64).Int64Values()...)
		}
		out = append(out, j)
	}
	return out, nil
}

// objectsDest is Parquet on the simulated object store: the real
// ParquetObjects sink over each incarnation's store client. Its contents
// are read back from the store's truth and decoded; a bucket cannot tell
// the order jobs were applied in.
type objectsDest struct {
	w      *sim.World
	prefix string
	segOf  map[string]engine.SnapshotID // job id → segment, noted at Apply
}

func (d *objectsDest) Name() string { return "parquet-objects" }

func (d *objectsDest) Sink(p engine.Ports) engine.Sink {
	return noteSegment{d, sinks.NewParquetObjects(p.Store, p.Exec, d.prefix)}
}

// noteSegment remembers which segment a job id came from: the object key
// holds only the id, and the oracle orders jobs by segment.
type noteSegment struct {
	d     *objectsDest
	inner engine.Sink
}

func (n noteSegment) Apply(j *engine.Job, done func(error)) {
	n.d.segOf[j.ID] = j.Segment
	n.inner.Apply(j, done)
}

func (d *objectsDest) Contents() ([]sim.DestJob, error) {
	var out []sim.DestJob
	for _, key := range d.w.Store().Keys(d.prefix + "/") {
		body, _ := d.w.Store().Object(key)
		uids, err := readUIDs(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		id := strings.TrimSuffix(path.Base(key), ".parquet")
		ns := strings.SplitN(strings.TrimPrefix(key, d.prefix+"/"), "/", 2)[0]
		seg, ok := d.segOf[id]
		if !ok {
			return nil, fmt.Errorf("%s: no job %s was ever applied", key, id)
		}
		out = append(out, sim.DestJob{ID: id, Namespace: ns, Segment: seg, Order: -1, UIDs: uids})
	}
	return out, nil
}

// readUIDs decodes a Parquet file and returns its uid column.
func readUIDs(b []byte) ([]int64, error) {
	rdr, err := file.NewParquetReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer rdr.Close()
	fr, err := pqarrow.NewFileReader(rdr, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		return nil, err
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		return nil, err
	}
	defer tbl.Release()
	idx := tbl.Schema().FieldIndices("uid")
	if len(idx) != 1 {
		return nil, fmt.Errorf("no uid column in %v", tbl.Schema())
	}
	var out []int64
	for _, c := range tbl.Column(idx[0]).Data().Chunks() {
		out = append(out, c.(*array.Int64).Int64Values()...)
	}
	return out, nil
}
