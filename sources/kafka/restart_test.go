package kafka

import (
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// A broker restart mid-stream. kfake persists a cluster's logs, groups
// and committed offsets in a directory (kfake.DataDir) and reloads them
// when a cluster is started on it again: closing the cluster and
// starting a new one on the same directory and port (kfake.Ports) is a
// broker process restarting — its connections drop, nothing answers
// for a while, and then a broker with the same log answers at the same
// address. Every record is ingested once, direct and in a group (where
// the restarted coordinator has forgotten the member: it joins again
// and resumes from the offsets view).
func TestABrokerRestartLosesNothing(t *testing.T) {
	for _, group := range []string{"", "loaders"} {
		t.Run("group="+group, func(t *testing.T) {
			dir := t.TempDir()
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "events"), kfake.DataDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			port := portOf(t, c.ListenAddrs()[0])
			for i := 0; i < 1500; i += 50 {
				produce(t, c, "events", i, 50, nil) // small batches: small fetches
			}
			var logs logbuf.Buffer
			h := newHost(t)
			closed := make(chan int, 1)
			h.onUnit = func(n int, u engine.Unit) error {
				if n == 5 {
					c.Close() // before the source fetched the rest
					closed <- h.rowsLocked()
				}
				return nil
			}
			cfg := groupConfig(c, "events", group, h, &logs)
			cfg.BufferBytes = 4 << 10
			cfg.ClientOpts = append(cfg.ClientOpts, kgo.FetchMaxBytes(2<<10), kgo.FetchMaxPartitionBytes(1<<10))
			m := startMember(t, cfg, h)
			var at int
			select {
			case at = <-closed:
			case <-time.After(30 * time.Second):
				t.Fatal("no fifth unit within 30 s")
			}
			time.Sleep(500 * time.Millisecond) // the broker is down
			c, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(port), kfake.DataDir(dir))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(c.Close)
			produce(t, c, "events", 1500, 500, nil)
			waitFor(t, func() string { return "every record after the restart" }, func() bool { return h.recorded() >= 2000 })
			if err := m.stop(t); err != nil {
				t.Fatal(err)
			}
			if at >= 1500 {
				t.Errorf("%d rows before the restart: the test wants it mid-stream", at)
			}
			ends := endOffsets(t, admin(t, c), "events")
			total := int64(0)
			for _, e := range ends {
				total += e
			}
			if total != 2000 {
				t.Fatalf("the restarted broker holds %d records, want 2000: its log was not reloaded", total)
			}
			wantAll(t, h, "events", ends)
		})
	}
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
