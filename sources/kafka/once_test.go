package kafka

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/internal/logbuf"
)

// runOnce runs a once source on the host's offsets until Run returns on
// its own (runUntil fails the test after 30 s), and returns the source.
func runOnce(t *testing.T, cfg Config, h *testHost) *Source {
	t.Helper()
	cfg.Once = true
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := runUntil(t, src, h, func() bool { return false }); err != nil {
		t.Fatalf("once Run: %v", err)
	}
	return src
}

// wantRows fails unless the host recorded n rows, each partition's
// offsets once.
func wantRows(t *testing.T, h *testHost, n int) {
	t.Helper()
	got := 0
	for _, offs := range h.offsetsOf() { // fails on an offset twice
		got += len(offs)
	}
	if got != n {
		t.Fatalf("%d rows recorded; want %d", got, n)
	}
}

// A once Run reads every partition up to its high watermark at start
// and returns; a second takes exactly the records produced since, a
// third none, and one whose partitions are empty returns at once.
func TestOnceReadsUpToTheHighWatermarksAtStart(t *testing.T) {
	const topic = "once.events"
	c := cluster(t, 1, topic, 3)
	produce(t, c, topic, 0, 600, nil)
	var logs logbuf.Buffer
	cfg := testConfig(c, topic, &logs)
	h := newHost(t)
	runOnce(t, cfg, h)
	wantRows(t, h, 600)
	produce(t, c, topic, 600, 150, nil)
	if st := runOnce(t, cfg, h).Stats(); st.RecordsAcked != 150 {
		t.Errorf("second once run: stats %+v; want the 150 records produced since", st)
	}
	wantRows(t, h, 750)
	if st := runOnce(t, cfg, h).Stats(); st.RecordsAcked != 0 || st.UnitsAcked != 0 {
		t.Errorf("a once run with nothing new: stats %+v; want nothing", st)
	}
	empty := cluster(t, 1, "once.empty", 2)
	if st := runOnce(t, testConfig(empty, "once.empty", &logs), newHost(t)).Stats(); st.UnitsAcked != 0 {
		t.Errorf("a once run over empty partitions: stats %+v", st)
	}
}

// A transactional producer's commit markers take the last offsets below
// the high watermarks; they are no rows, yet a once Run must pass them
// and end — with ReadCommitted, and without.
func TestOnceEndsAfterTransactionMarkers(t *testing.T) {
	for _, committed := range []bool{false, true} {
		t.Run(fmt.Sprintf("read committed %v", committed), func(t *testing.T) {
			topic := "once.txn"
			c := cluster(t, 1, topic, 2, kfake.AllowAutoTopicCreation())
			produceTxn(t, c, topic, 0, 40)
			produceTxn(t, c, topic, 40, 20)
			var logs logbuf.Buffer
			cfg := testConfig(c, topic, &logs)
			cfg.ReadCommitted = committed
			h := newHost(t)
			runOnce(t, cfg, h)
			wantRows(t, h, 60)
			if !strings.Contains(logs.String(), "once: every partition found at start is acked") {
				t.Errorf("no once end in the log:\n%s", logs.String())
			}
		})
	}
}

// produceTxn writes n records in one committed transaction.
func produceTxn(t *testing.T, c *kfake.Cluster, topic string, first, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("once-test"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		v := fmt.Appendf(nil, `{"id": %d}`, first+i)
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
}

// A once source refuses a consumer group.
func TestOnceRefusesAGroup(t *testing.T) {
	_, err := New(Config{Name: "events", Brokers: []string{"localhost:9092"}, Topics: []string{"t"}, SinkRef: "lake",
		Group: "g", Once: true})
	if err == nil || !strings.Contains(err.Error(), `group "g": a once run reads every partition`) {
		t.Fatalf("New with Once and a Group: %v; want it refused", err)
	}
}
