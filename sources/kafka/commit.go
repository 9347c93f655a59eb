package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// commitTimeout bounds one commit to the group.
const commitTimeout = 10 * time.Second

// committer commits the offsets of acked units to the consumer group:
// for lag tools, and for the member a partition is handed to next, which
// resumes from the higher of its host's offsets view and this commit
// (group.go) — so an offset is noted only once the host holds the
// records before it (acked, or in the offsets view on assignment). It
// is best effort and never holds ingest up: workers only note their
// acks (acked); one goroutine (run) commits what is noted, the latest
// offset per partition, one commit at a time, and a failed commit is
// logged, counted and tried again with the next. A commit missed only
// widens what the next owner reads again.
//
// INVARIANT (send): only offsets of partitions the run owns are
// committed — and, by the revoke callback (flush), those being revoked,
// before the group hands them on.
type committer struct {
	r    *run
	poke chan struct{} // one pending wake-up of run

	mu      sync.Mutex
	pending map[tp]int64 // per partition, the next offset acked and not yet committed

	sendMu sync.Mutex // one commit at a time: a revoke's flush waits for run's
}

func newCommitter(r *run) *committer {
	return &committer{r: r, poke: make(chan struct{}, 1), pending: map[tp]int64{}}
}

// acked notes the next offsets of an acked unit's partitions.
func (c *committer) acked(next map[tp]int64) {
	c.mu.Lock()
	for p, n := range next {
		c.pending[p] = max(c.pending[p], n)
	}
	c.mu.Unlock()
	c.wake()
}

// forget drops what is noted of parts.
func (c *committer) forget(parts []tp) {
	c.mu.Lock()
	for _, p := range parts {
		delete(c.pending, p)
	}
	c.mu.Unlock()
}

// run commits what is noted whenever there is some, until ctx ends;
// then once more, within commitTimeout.
//
// A commit in flight when ctx ends is cut short, not failed: its
// offsets are noted again and the last commit sends them.
func (c *committer) run(ctx context.Context) {
	for {
		select {
		case <-c.poke:
		case <-ctx.Done():
		}
		if ctx.Err() != nil { // checked first: select picks at random among ready cases
			last, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
			_ = c.send(last, c.r.cl, nil)
			cancel()
			return
		}
		if c.send(ctx, c.r.cl, nil) != nil && c.r.s.cfg.Sleep(ctx, retryMax) == nil {
			c.wake() // what failed is noted again: try it again after the pause
		}
	}
}

func (c *committer) wake() {
	select {
	case c.poke <- struct{}{}:
	default:
	}
}

// flush commits what is noted of parts, being revoked.
func (c *committer) flush(ctx context.Context, cl *kgo.Client, parts []tp) {
	if len(parts) > 0 {
		_ = c.send(ctx, cl, parts) // logged and counted
	}
}

// send commits the noted offsets of parts, or (nil) of every partition
// the run owns. A failure is logged and counted, and its offsets are
// noted again unless newer ones were. A commit of every partition cut
// short by ctx's end (the run stopping) is not a failure: its offsets
// are noted again, for run's last commit.
func (c *committer) send(ctx context.Context, cl *kgo.Client, parts []tp) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	offs := c.take(parts)
	if len(offs) == 0 {
		return nil
	}
	sendCtx, cancel := context.WithTimeout(ctx, commitTimeout)
	defer cancel()
	err := commitSync(sendCtx, cl, offs)
	s := c.r.s
	switch {
	case err == nil:
		s.commits.Add(1)
		return nil
	case parts == nil && ctx.Err() != nil:
		s.cfg.Logger.Debug("kafka source: a commit to the group was cut short by the run stopping; its last commit sends it",
			"source", s.cfg.Name, "group", s.cfg.Group, "partitions", len(offs), "error", err)
	default:
		s.commitErrors.Add(1)
		s.cfg.Logger.Warn("kafka source: cannot commit acked offsets to the group (ingest goes on; a member taking the partition over would read again from the last commit)",
			"source", s.cfg.Name, "group", s.cfg.Group, "partitions", len(offs), "error", err)
	}
	if parts == nil {
		c.mu.Lock()
		for p, n := range offs {
			if _, newer := c.pending[p]; !newer {
				c.pending[p] = n
			}
		}
		c.mu.Unlock()
	}
	return err
}

// take removes and returns the noted offsets of parts, or (nil) of the
// partitions owned.
func (c *committer) take(parts []tp) map[tp]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[tp]int64{}
	for p, n := range c.pending {
		if parts == nil && c.r.owns(p) || parts != nil && slices.Contains(parts, p) {
			out[p] = n
			delete(c.pending, p)
		}
	}
	return out
}

// commitSync commits offs to cl's group and returns the first error, of
// the request or of a partition.
func commitSync(ctx context.Context, cl *kgo.Client, offs map[tp]int64) error {
	m := map[string]map[int32]kgo.EpochOffset{}
	for p, n := range offs {
		if m[p.topic] == nil {
			m[p.topic] = map[int32]kgo.EpochOffset{}
		}
		m[p.topic][p.partition] = kgo.EpochOffset{Epoch: -1, Offset: n}
	}
	var rerr error
	cl.CommitOffsetsSync(ctx, m, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			rerr = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil && rerr == nil {
					rerr = fmt.Errorf("topic %q partition %d: %w", t.Topic, p.Partition, err)
				}
			}
		}
	})
	return rerr
}
