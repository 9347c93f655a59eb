package kafka

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// testHost is the test's side of the ingest port, keeping what the
// engine keeps: it acks a unit by committing its offsets (max-merged)
// and recording its rows, answers a unit whose offsets are all covered
// without recording it again, and refuses one that covers some of its
// offsets but not all (the engine would store those rows twice).
type testHost struct {
	t         *testing.T
	mu        sync.Mutex
	committed segment.Offsets
	rows      map[tp][]int64 // offsets of the rows recorded, per partition
	ids       []int64        // the "id" column's values, when there is one
	units     int
	// onUnit, if set, runs before the n-th unit (1-based) is looked at;
	// an error it returns is the answer.
	onUnit func(n int, u engine.Unit) error
	// afterCommit, if set, runs after the n-th recorded unit is
	// committed; an error is the answer (committed, not acked: a crash).
	afterCommit func(n int) error
	// delay is how long a unit takes to commit, before the host looks at
	// it: its offsets are not in the view meanwhile, as in the engine.
	delay atomic.Int64 // nanoseconds
}

func newHost(t *testing.T) *testHost { return &testHost{t: t, rows: map[tp][]int64{}} }

func (h *testHost) ingest(ctx context.Context, u engine.Unit) error {
	time.Sleep(time.Duration(h.delay.Load()))
	h.mu.Lock()
	defer h.mu.Unlock()
	h.units++
	if h.onUnit != nil {
		if err := h.onUnit(h.units, u); err != nil {
			return err
		}
	}
	if ctx.Err() != nil {
		h.t.Errorf("ingest called with an ended context: the source must detach it")
	}
	if got := segment.FingerprintOf(u.Schema); got != u.Key.Schema || u.Key.Validate() != nil || u.Offsets.Validate() != nil {
		h.t.Errorf("unit key %v (schema %x), offsets %v: invalid", u.Key, got, u.Offsets)
	}
	if h.committed.Covers(u.Offsets) {
		return nil
	}
	for _, o := range u.Offsets {
		if cur, ok := h.committed.Get(o.Key); ok && o.Value <= cur {
			h.t.Errorf("unit offsets %v: %q at %d is covered (%d) while others are not", u.Offsets, o.Key, o.Value, cur)
			return engine.ErrInvalidUnit
		}
	}
	h.committed = segment.MaxMerge(h.committed, u.Offsets)
	for _, b := range u.Batches {
		parts := column[*array.Int32](h.t, b, ColPartition)
		offs := column[*array.Int64](h.t, b, ColOffset)
		for i := range int(b.NumRows()) {
			p := tp{topicOf(h.t, u), parts.Value(i)}
			h.rows[p] = append(h.rows[p], offs.Value(i))
		}
		if idx := b.Schema().FieldIndices("id"); len(idx) == 1 {
			h.ids = append(h.ids, b.Column(idx[0]).(*array.Int64).Int64Values()...)
		}
	}
	if h.afterCommit != nil {
		return h.afterCommit(h.units)
	}
	return nil
}

// topicOf is the topic of u's offset keys ("kafka/{name}/{topic}/{p}").
func topicOf(t *testing.T, u engine.Unit) string {
	t.Helper()
	k := u.Offsets[0].Key
	rest := strings.TrimPrefix(k, "kafka/")
	i, j := strings.IndexByte(rest, '/'), strings.LastIndexByte(rest, '/')
	if i < 0 || j <= i {
		t.Fatalf("offset key %q names no partition", k)
	}
	return rest[i+1 : j]
}

func column[A arrow.Array](t *testing.T, b arrow.RecordBatch, name string) A {
	t.Helper()
	idx := b.Schema().FieldIndices(name)
	if len(idx) != 1 {
		t.Fatalf("no column %q in %v", name, b.Schema())
	}
	a, ok := b.Column(idx[0]).(A)
	if !ok {
		t.Fatalf("column %q is %s", name, b.Column(idx[0]).DataType())
	}
	return a
}

// offsetsOf returns, per partition, the offsets recorded, and fails on
// one recorded twice.
func (h *testHost) offsetsOf() map[tp][]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[tp][]int64{}
	for p, offs := range h.rows {
		s := slices.Clone(offs)
		slices.Sort(s)
		for i := 1; i < len(s); i++ {
			if s[i] == s[i-1] {
				h.t.Errorf("topic %q partition %d offset %d ingested twice", p.topic, p.partition, s[i])
			}
		}
		out[p] = s
	}
	return out
}

func (h *testHost) offsets() segment.Offsets {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.committed)
}

// cluster is a kfake cluster of brokers with topic's partitions.
func cluster(t *testing.T, brokers int, topic string, partitions int32, opts ...kfake.Opt) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(brokers), kfake.SeedTopics(partitions, topic)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// produce writes n JSON records {"id": first+i, "n": "…"} round-robin
// over partitions, keyed by their id; a value of nil is a tombstone.
func produce(t *testing.T, c *kfake.Cluster, topic string, first, n int, value func(id int) []byte) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range n {
		id := first + i
		v := []byte(fmt.Sprintf(`{"id": %d, "name": "record %d"}`, id, id))
		if value != nil {
			v = value(id)
		}
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(id)), Value: v}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func admin(t *testing.T, c *kfake.Cluster) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// testConfig reads topic from c with small units, so that a test's
// records make many of them, and a logger into logs.
func testConfig(c *kfake.Cluster, topic string, logs *logbuf.Buffer) Config {
	return Config{Name: "events", Brokers: c.ListenAddrs(), Topics: []string{topic}, SinkRef: "lake",
		UnitBytes: 4 << 10, BufferBytes: 64 << 10, InFlight: 3, Metadata: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		// A fetch waits at most this for records: partitions added while
		// one waits are fetched with the next.
		ClientOpts: []kgo.Opt{kgo.FetchMaxWait(200 * time.Millisecond)}}
}

// runUntil runs src on the host's offsets until cond holds
// (brokertest.RunUntil).
func runUntil(t *testing.T, src *Source, h *testHost, cond func() bool) error {
	t.Helper()
	offsets := h.offsets()
	return brokertest.RunUntil(t, func(ctx context.Context) error { return src.Run(ctx, h.ingest, offsets) }, cond,
		func() string { return fmt.Sprintf("%d units recorded", h.units) })
}

// recorded counts the rows recorded.
func (h *testHost) recorded() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.rowsLocked()
}

// rowsLocked counts the rows recorded. REQUIRES: mu held (onUnit).
func (h *testHost) rowsLocked() int {
	n := 0
	for _, offs := range h.rows {
		n += len(offs)
	}
	return n
}
