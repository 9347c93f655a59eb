package natsjs

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// natsURL is the NATS server with JetStream the tests use
// (internal/brokertest).
func natsURL(t *testing.T) string { return brokertest.NATS(t) }

// testStream creates a stream of its own for the test (deleted at its
// end) over subjects "{name}.>", with cfg's limits.
func testStream(t *testing.T, url string, cfg jetstream.StreamConfig) (jetstream.JetStream, string) {
	return brokertest.NATSStream(t, url, "T", cfg)
}

// publish publishes n JSON messages {"id": first+i} on subject.
func publish(t *testing.T, js jetstream.JetStream, subject string, first, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range n {
		if _, err := js.Publish(ctx, subject, fmt.Appendf(nil, `{"id": %d, "note": "message %d"}`, first+i, first+i)); err != nil {
			t.Fatal(err)
		}
	}
}

// testHost acks a unit by committing its offsets (max-merged) and
// recording its rows' sequences and ids; a unit whose offsets are
// covered is acked without recording it again, as the engine does.
type testHost struct {
	t           *testing.T
	mu          sync.Mutex
	committed   segment.Offsets
	seqs, ids   []int64
	units       int
	afterCommit func(n int) error // an error: committed, not acked (a crash)
}

func (h *testHost) ingest(ctx context.Context, u engine.Unit) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.units++
	if segment.FingerprintOf(u.Schema) != u.Key.Schema || u.Key.Validate() != nil || len(u.Offsets) != 1 {
		h.t.Errorf("unit key %v, offsets %v: invalid", u.Key, u.Offsets)
	}
	if h.committed.Covers(u.Offsets) {
		return nil
	}
	h.committed = segment.MaxMerge(h.committed, u.Offsets)
	for _, b := range u.Batches {
		h.seqs = append(h.seqs, column[*array.Int64](h.t, b, ColSequence).Int64Values()...)
		if idx := b.Schema().FieldIndices("id"); len(idx) == 1 {
			h.ids = append(h.ids, b.Column(idx[0]).(*array.Int64).Int64Values()...)
		}
	}
	if h.afterCommit != nil {
		return h.afterCommit(h.units)
	}
	return nil
}

func column[A arrow.Array](t *testing.T, b arrow.RecordBatch, name string) A {
	t.Helper()
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %v", name, b.Schema())
	}
	return b.Column(idx[0]).(A)
}

func (h *testHost) recorded() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.seqs)
}

// sortedIDs returns the ids recorded, sorted, failing on a duplicate.
func (h *testHost) sortedIDs() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	ids := slices.Clone(h.ids)
	slices.Sort(ids)
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			h.t.Errorf("id %d ingested twice", ids[i])
		}
	}
	return ids
}

func testConfig(url, stream string, logs *logbuf.Buffer) Config {
	return Config{Name: "events", URL: url, Stream: stream, SinkRef: "lake", UnitBytes: 2 << 10, BufferBytes: 32 << 10,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
}

// runUntil runs src on the host's offsets until cond holds
// (brokertest.RunUntil).
func runUntil(t *testing.T, src *Source, h *testHost, cond func() bool) error {
	t.Helper()
	h.mu.Lock()
	offsets := slices.Clone(h.committed)
	h.mu.Unlock()
	return brokertest.RunUntil(t, func(ctx context.Context) error { return src.Run(ctx, h.ingest, offsets) }, cond,
		func() string { return fmt.Sprintf("%d rows recorded", h.recorded()) })
}
