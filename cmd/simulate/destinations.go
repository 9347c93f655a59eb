package main

import (
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/sinks"
)

// destinations are the sinks a simulated world may deliver to; each seed
// picks one (sim.Config.Destinations).
var destinations = []sim.DestinationFactory{
	func(*sim.World) sim.Destination { return &memoryDest{m: sinks.NewMemory()} },
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
