package kafka

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/logbuf"
)

// commitLog records the offset commits a cluster is sent: per member,
// each partition's last (the tests' topics are single).
type commitLog struct {
	mu    sync.Mutex
	first string                     // the member of the first commit
	last  map[string]map[int32]int64 // per member, per partition
}

func watchCommits(c *kfake.Cluster) *commitLog {
	l := &commitLog{last: map[string]map[int32]int64{}}
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.first == "" {
			l.first = r.MemberID
		}
		if l.last[r.MemberID] == nil {
			l.last[r.MemberID] = map[int32]int64{}
		}
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				l.last[r.MemberID][p.Partition] = p.Offset
			}
		}
		return nil, nil, false // the cluster commits it
	})
	return l
}

// firstMember returns the member of the first commit and its last
// commit per partition.
func (l *commitLog) firstMember() (string, map[int32]int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.first, maps.Clone(l.last[l.first])
}

// seedView sets h's offsets view of topic's partitions (source
// "events"): the WAL a daemon recovered.
func seedView(h *testHost, topic string, at map[int32]int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for p, n := range at {
		h.committed = h.committed.Advance(offsetKey("events", tp{topic, p}), uint64(n))
	}
}

// commitGroup commits at to group g's offsets of topic.
func commitGroup(t *testing.T, adm *kadm.Client, g, topic string, at map[int32]int64) {
	t.Helper()
	var offs kadm.Offsets
	for p, n := range at {
		offs.Add(kadm.Offset{Topic: topic, Partition: p, At: n, LeaderEpoch: -1})
	}
	rs, err := adm.CommitOffsets(context.Background(), g, offs)
	if err == nil {
		err = rs.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
}

// Two daemons — two sources on separate hosts, each its own offsets
// view (WAL) — in one group. The first ingests the topic's four
// partitions alone for a while (acking, committing to the group), then
// the second joins and takes some of them over while the first's host
// refuses units (records are left unread). Each partition it takes
// resumes from the group's committed offset — the first daemon's last
// commit, made after its acks (in the revoke, before the group hands
// the partition on) — not from its own empty view and start:, which
// would read the first daemon's records again (earliest) or skip those
// it had not read yet (latest). No record is acked by both, and
// together they acked every record. The first daemon's view starts at
// offset 0 of every partition, so that it reads them all whatever
// start: says.
func TestAPartitionHandedToAnotherDaemonResumesFromTheGroupsCommit(t *testing.T) {
	for _, start := range []string{StartEarliest, StartLatest} {
		t.Run("start="+start, func(t *testing.T) {
			c := cluster(t, 1, "events", 4)
			commits := watchCommits(c)
			produce(t, c, "events", 0, 2000, nil)
			adm := admin(t, c)
			h1, h2 := newHost(t), newHost(t)
			seedView(h1, "events", map[int32]int64{0: 0, 1: 0, 2: 0, 3: 0})
			var logs1, logs2 logbuf.Buffer
			cfg1 := groupConfig(c, "events", "loaders", h1, &logs1)
			cfg2 := groupConfig(c, "events", "loaders", h2, &logs2)
			cfg1.Start, cfg2.Start = start, start
			var hold1 atomic.Bool
			h1.onUnit = func(int, engine.Unit) error {
				if hold1.Load() {
					return fmt.Errorf("%w: the first daemon is held", engine.ErrResourceExhausted)
				}
				return nil
			}
			a := startMember(t, cfg1, h1)
			waitFor(t, func() string { return "the first daemon ingests and commits to the group: " + logs1.String() }, func() bool {
				first, last := commits.firstMember()
				return h1.recorded() >= 600 && first != "" && len(last) == 4
			})
			// The first daemon's host refuses units now (backpressure), so
			// that records of the partitions moved are left unread at the
			// handoff — and units of them in flight during it.
			hold1.Store(true)
			produce(t, c, "events", 2000, 2000, nil)
			b := startMember(t, cfg2, h2)
			waitFor(t, func() string {
				return "the second daemon ingests (one resuming at its partitions' end would not): " + logs2.String()
			}, func() bool { return h2.recorded() > 0 })
			hold1.Store(false)
			ends := endOffsets(t, adm, "events")
			waitFor(t, func() string {
				return fmt.Sprintf("the group's committed offsets %v reach the ends %v", committedOffsets(t, adm, "loaders", "events"), ends)
			}, func() bool { return maps.Equal(committedOffsets(t, adm, "loaders", "events"), ends) })
			for _, m := range []*member{a, b} {
				if err := m.stop(t); err != nil {
					t.Error(err)
				}
			}
			if st1, st2 := a.src.Stats(), b.src.Stats(); st1.CommitErrors+st2.CommitErrors != 0 {
				t.Errorf("%d commits to the group failed:\n%s\n%s", st1.CommitErrors+st2.CommitErrors, logs1.String(), logs2.String())
			}
			first, last1 := commits.firstMember()
			r1, r2 := h1.offsetsOf(), h2.offsetsOf() // each fails on an offset its host acked twice
			took := 0
			for p := range int32(4) {
				o1, o2 := r1[tp{"events", p}], r2[tp{"events", p}]
				if len(o1) == 0 {
					t.Errorf("partition %d: the first daemon acked none of it before the second joined", p)
				}
				if len(o2) > 0 {
					took++
					if c1, ok := last1[p]; !ok || o2[0] < c1 {
						t.Errorf("partition %d: the second daemon begins at %d, below the first daemon's (%s) last commit %d (%v): records read again",
							p, o2[0], first, c1, ok)
					}
				}
				both, union := overlap(o1, o2)
				if len(both) > 0 {
					t.Errorf("partition %d: %d records acked by both daemons (offsets %v…)", p, len(both), head(both))
				}
				if int64(len(union)) != ends[p] || len(union) > 0 && (union[0] != 0 || union[len(union)-1] != ends[p]-1) {
					t.Errorf("partition %d: the daemons together acked %d distinct records (offsets %v…), want offsets 0..%d",
						p, len(union), head(union), ends[p]-1)
				}
			}
			if took == 0 || took == 4 {
				t.Errorf("the second daemon took %d of the 4 partitions; the test wants some moved and some kept", took)
			}
		})
	}
}

// overlap returns the offsets in both a and b (each sorted), and their
// union without repeats, sorted.
func overlap(a, b []int64) (both, union []int64) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || i < len(a) && a[i] < b[j]:
			union = append(union, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			union = append(union, b[j])
			j++
		default:
			both, union = append(both, a[i]), append(union, a[i])
			i, j = i+1, j+1
		}
	}
	return both, union
}

// Where each assigned partition resumes: the higher of the host's
// offsets view and the group's committed offset — a committed offset
// below the view's is ignored (no rewind: this daemon's WAL holds more),
// one above it is taken (another daemon's WAL holds the records between),
// and start: applies with neither. A view offset above the group's is
// committed to the group on the assignment, before any unit is acked
// (the host refuses units until the test saw that commit).
func TestAnAssignmentResumesFromTheHigherOfTheViewAndTheGroup(t *testing.T) {
	c := cluster(t, 1, "events", 4)
	produce(t, c, "events", 0, 2000, nil)
	adm := admin(t, c)
	commitGroup(t, adm, "loaders", "events", map[int32]int64{0: 100, 1: 400, 2: 250})
	h := newHost(t)
	seedView(h, "events", map[int32]int64{0: 400, 1: 100})
	var refuse atomic.Bool
	refuse.Store(true)
	h.onUnit = func(int, engine.Unit) error {
		if refuse.Load() {
			return fmt.Errorf("%w: held until the view's offset is committed", engine.ErrResourceExhausted)
		}
		return nil
	}
	var logs logbuf.Buffer
	m := startMember(t, groupConfig(c, "events", "loaders", h, &logs), h)
	waitFor(t, func() string {
		return fmt.Sprintf("partition 0's view offset 400 committed to the group on the assignment: %v; %s",
			committedOffsets(t, adm, "loaders", "events"), logs.String())
	}, func() bool { return committedOffsets(t, adm, "loaders", "events")[0] == 400 })
	refuse.Store(false)
	ends := endOffsets(t, adm, "events")
	waitFor(t, func() string { return "the group's committed offsets reach the ends" },
		func() bool { return maps.Equal(committedOffsets(t, adm, "loaders", "events"), ends) })
	if err := m.stop(t); err != nil {
		t.Fatal(err)
	}
	got := h.offsetsOf()
	for p, from := range map[int32]int64{0: 400, 1: 400, 2: 250, 3: 0} {
		offs := got[tp{"events", p}]
		if int64(len(offs)) != ends[p]-from || len(offs) > 0 && (offs[0] != from || offs[len(offs)-1] != ends[p]-1) {
			t.Errorf("partition %d: %d rows recorded (offsets %v…), want offsets %d..%d once each", p, len(offs), head(offs), from, ends[p]-1)
		}
	}
	if n := strings.Count(logs.String(), "resumes from the group's committed offset"); n != 2 {
		t.Errorf("%d partitions logged as resuming from the group's offset, want 2 (1 and 2):\n%s", n, logs.String())
	}
}

// A failed fetch of the group's committed offsets on an assignment is
// logged and retried, never done without: the partitions then resume
// from the group's offsets (300), not from start: (0) — the host's view
// is empty.
func TestAFailedFetchOfTheGroupsOffsetsIsRetried(t *testing.T) {
	c := cluster(t, 1, "events", 4)
	produce(t, c, "events", 0, 2000, nil)
	adm := admin(t, c)
	commitGroup(t, adm, "loaders", "events", map[int32]int64{0: 300, 1: 300, 2: 300, 3: 300})
	var failed atomic.Int32
	c.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetFetchRequest)
		// The source's fetch asks for every topic of the group; the group
		// consumer's own, for the partitions assigned.
		all := len(r.Groups) == 0 && r.Topics == nil || len(r.Groups) == 1 && r.Groups[0].Topics == nil
		if !all || failed.Load() >= 3 {
			return nil, nil, false
		}
		failed.Add(1)
		resp := r.ResponseKind().(*kmsg.OffsetFetchResponse)
		resp.ErrorCode = kerr.GroupAuthorizationFailed.Code
		for _, g := range r.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.GroupAuthorizationFailed.Code
			resp.Groups = append(resp.Groups, rg)
		}
		return resp, nil, true
	})
	h := newHost(t)
	var logs logbuf.Buffer
	m := startMember(t, groupConfig(c, "events", "loaders", h, &logs), h)
	ends := endOffsets(t, adm, "events")
	// (Not the group's offsets: the test's fetch of them would be failed.)
	waitFor(t, func() string { return "every record after the committed offsets: " + logs.String() },
		func() bool { return h.recorded() >= 2000-4*300 })
	if err := m.stop(t); err != nil {
		t.Fatal(err)
	}
	if failed.Load() != 3 {
		t.Fatalf("%d fetches of the group's offsets failed, want 3 injected", failed.Load())
	}
	if n := strings.Count(logs.String(), "cannot fetch the group's committed offsets"); n != 3 {
		t.Errorf("%d failed fetches logged, want 3:\n%s", n, logs.String())
	}
	got := h.offsetsOf()
	for p, end := range ends {
		offs := got[tp{"events", p}]
		if int64(len(offs)) != end-300 || len(offs) > 0 && (offs[0] != 300 || offs[len(offs)-1] != end-1) {
			t.Errorf("partition %d: %d rows recorded (offsets %v…), want offsets 300..%d once each", p, len(offs), head(offs), end-1)
		}
	}
}
