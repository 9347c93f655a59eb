package kafka

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// member is a source running on a test host until stopped.
type member struct {
	src    *Source
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

// startMember runs a source of cfg on h, from h's offsets now.
func startMember(t *testing.T, cfg Config, h *testHost) *member {
	t.Helper()
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{src: src, cancel: cancel, done: make(chan error, 1)}
	offsets := h.offsets()
	go func() { m.done <- src.Run(ctx, h.ingest, offsets) }()
	t.Cleanup(func() { m.stop(t) })
	return m
}

// stop ends the member's Run and returns what it returned.
func (m *member) stop(t *testing.T) error {
	m.once.Do(func() {
		m.cancel()
		select {
		case m.err = <-m.done:
		case <-time.After(30 * time.Second):
			m.err = context.DeadlineExceeded
			t.Errorf("a member did not stop within 30 s")
		}
	})
	return m.err
}

// waitFor waits until cond holds, or fails the test after 30 s saying what.
func waitFor(t *testing.T, what func() string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: %s", what())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// groupConfig is testConfig in group g, resuming from h's offsets view,
// with a heartbeat short enough for a rebalance to take well under a
// second.
func groupConfig(c *kfake.Cluster, topic, g string, h *testHost, logs *logbuf.Buffer) Config {
	cfg := testConfig(c, topic, logs)
	cfg.Group, cfg.UnitBytes, cfg.InFlight = g, 2<<10, 2
	cfg.ClientOpts = append(slices.Clone(cfg.ClientOpts), kgo.HeartbeatInterval(50*time.Millisecond))
	cfg.Offsets = func(context.Context) (segment.Offsets, error) { return h.offsets(), nil }
	return cfg
}

// committedOffsets reads group g's committed offsets of topic.
func committedOffsets(t *testing.T, adm *kadm.Client, g, topic string) map[int32]int64 {
	t.Helper()
	rs, err := adm.FetchOffsets(context.Background(), g)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, r := range rs[topic] {
		if r.Err == nil && r.At >= 0 {
			out[p] = r.At
		}
	}
	return out
}

// Two members of one group sharing one offsets view split a topic's
// four partitions — the second joins while the first ingests, so
// partitions move between them mid-stream — and every record is
// ingested once. After the acks the group's committed offsets are the
// acked positions.
func TestGroupMembersSharingAViewSplitPartitions(t *testing.T) {
	c := cluster(t, 1, "events", 4)
	produce(t, c, "events", 0, 2000, nil)
	adm := admin(t, c)
	h := newHost(t)
	var logs logbuf.Buffer
	cfg := groupConfig(c, "events", "loaders", h, &logs)
	a := startMember(t, cfg, h)
	waitFor(t, func() string { return "the first member ingests" }, func() bool { return h.recorded() >= 600 })
	h.delay.Store(int64(100 * time.Millisecond)) // units in flight while partitions move
	b := startMember(t, cfg, h)
	produce(t, c, "events", 2000, 2000, nil)
	waitFor(t, func() string { return "every record is ingested" }, func() bool { return h.recorded() >= 4000 })
	ends := endOffsets(t, adm, "events")
	waitFor(t, func() string {
		return fmt.Sprintf("the group's committed offsets %v reach the acked ends %v", committedOffsets(t, adm, "loaders", "events"), ends)
	}, func() bool { return maps.Equal(committedOffsets(t, adm, "loaders", "events"), ends) })
	sa, sb := a.src.Stats(), b.src.Stats()
	pa, pb := lagParts(sa), lagParts(sb)
	if len(pa) == 0 || len(pb) == 0 || len(pa)+len(pb) != 4 || slices.ContainsFunc(pa, func(p int32) bool { return slices.Contains(pb, p) }) {
		t.Errorf("the members hold partitions %v and %v; want the four split between them", pa, pb)
	}
	if sa.Commits == 0 || sb.Commits == 0 || sa.CommitErrors+sb.CommitErrors != 0 {
		t.Errorf("commits %d and %d, errors %d: want each member committing, without error", sa.Commits, sb.Commits, sa.CommitErrors+sb.CommitErrors)
	}
	if err := a.stop(t); err != nil {
		t.Errorf("first member: %v", err)
	}
	if err := b.stop(t); err != nil {
		t.Errorf("second member: %v", err)
	}
	wantAll(t, h, "events", ends)
}

// A commit to the group in flight when the run stops is cut short, not
// failed: it is not counted as a commit error, and the run's last
// commit sends its offsets. The cluster holds the first commit until
// the member stopped (or 2 s), then answers it with nothing committed.
func TestACommitCutShortByStopIsSentByTheLastCommit(t *testing.T) {
	c := cluster(t, 1, "events", 1)
	produce(t, c, "events", 0, 100, nil)
	held, stopped := make(chan struct{}), make(chan struct{})
	var commits atomic.Int32
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if commits.Add(1) > 1 {
			return nil, nil, false // the cluster commits it
		}
		close(held)
		c.SleepControl(func() {
			select {
			case <-stopped:
			case <-time.After(300 * time.Millisecond):
			}
		})
		return req.(*kmsg.OffsetCommitRequest).ResponseKind(), nil, true // nothing committed
	})
	adm := admin(t, c)
	h := newHost(t)
	var logs logbuf.Buffer
	m := startMember(t, groupConfig(c, "events", "loaders", h, &logs), h)
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatalf("after 30 s no commit to the group: %s", logs.String())
	}
	waitFor(t, func() string { return "every record is acked while the commit is held" }, func() bool { return h.recorded() == 100 })
	err := m.stop(t)
	close(stopped)
	if err != nil {
		t.Fatal(err)
	}
	st := m.src.Stats()
	if st.CommitErrors != 0 || st.Commits == 0 || commits.Load() < 2 {
		t.Errorf("%d commit errors, %d commits, %d commit requests: want the cut commit not counted and sent again at the stop\n%s",
			st.CommitErrors, st.Commits, commits.Load(), logs.String())
	}
	ends := endOffsets(t, adm, "events")
	if got := committedOffsets(t, adm, "loaders", "events"); !maps.Equal(got, ends) || h.recorded() != 100 {
		t.Errorf("the group's committed offsets %v after %d records acked; want the ends %v", got, h.recorded(), ends)
	}
}

// lagParts lists the partitions a source's stats show it consuming.
func lagParts(st Stats) []int32 {
	var out []int32
	for _, l := range st.Lag {
		out = append(out, l.Partition)
	}
	return out
}

// While the host refuses units for backpressure, a member loses
// partitions to a second one: its units holding them are abandoned
// after the refusal — the revoke does not wait for the backpressure to
// end, or the second member would get nothing until it did — and their
// records of partitions it keeps go back to its buffer. Once the host
// takes units again, every record is ingested once.
func TestARefusedUnitOfARevokedPartitionIsAbandoned(t *testing.T) {
	c := cluster(t, 1, "events", 4)
	produce(t, c, "events", 0, 2000, nil)
	h := newHost(t)
	h.delay.Store(int64(10 * time.Millisecond))
	var refuse atomic.Bool
	h.onUnit = func(n int, _ engine.Unit) error {
		if n == 3 {
			refuse.Store(true)
		}
		if refuse.Load() {
			return fmt.Errorf("%w: injected backpressure", engine.ErrResourceExhausted)
		}
		return nil
	}
	var logs logbuf.Buffer
	cfg := groupConfig(c, "events", "loaders", h, &logs)
	cfg.UnitBytes = 4 << 10 // units of several partitions
	a := startMember(t, cfg, h)
	waitFor(t, func() string { return "the host refuses units" }, refuse.Load)
	b := startMember(t, cfg, h)
	waitFor(t, func() string {
		return "the second member is assigned partitions while units are refused: " + logs.String()
	},
		func() bool { return len(b.src.Stats().Lag) > 0 })
	refuse.Store(false)
	waitFor(t, func() string { return "every record is ingested" }, func() bool { return h.recorded() >= 2000 })
	for _, m := range []*member{a, b} {
		if err := m.stop(t); err != nil {
			t.Error(err)
		}
	}
	wantAll(t, h, "events", endOffsets(t, admin(t, c), "events"))
}
