package main

import (
	"context"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sources/natsjs"
	"github.com/skipprd/skipprd/storage"
)

// natsSource reads a NATS JetStream stream.
type natsSource struct {
	name string
	spec *natsSourceSpec
	src  *natsjs.Source
}

// natsSource builds a nats source; its server is reached when it runs,
// after recovery (an unreachable server is logged and retried).
func (d *daemon) natsSource(s sourceSpec) (source, error) {
	n := s.NATS
	src, err := natsjs.New(natsjs.Config{Name: s.Name, URL: n.URL, Stream: n.Stream, Subjects: n.Subjects,
		Namespace: n.Namespace, SinkRef: s.Sink, Format: n.Format, Start: n.Start, OnGap: n.OnGap, Logger: d.log})
	if err != nil {
		return nil, fmt.Errorf("source %q: %w", s.Name, err)
	}
	return &natsSource{name: s.Name, spec: n, src: src}, nil
}

func (n *natsSource) run(ctx context.Context, host *storage.Host, _ segment.Offsets) error {
	// Its units are whatever a fetch returned, not the same when it reads
	// again: it resumes only once the units a disk WAL replayed from its
	// log have committed, or it would read theirs again in other units.
	offsets, err := host.ResumeOffsets(ctx)
	if err != nil {
		return nil // only ctx ends the wait
	}
	return n.src.Run(ctx, host.Ingest, offsets)
}

func (n *natsSource) stats() (uint64, uint64) {
	st := n.src.Stats()
	return st.MessagesIngested, st.MessagesAcked
}

func (n *natsSource) describe() []any {
	return []any{"source", n.name, "kind", sourceNATS, "url", n.spec.URL, "stream", n.spec.Stream}
}
