package kafka

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine/segment"
)

// A run in a consumer group (Config.Group): the group assigns the
// partitions; each resumes from the higher of the host's offsets view
// and the group's committed offset.
//
// On an assignment (adjust) the group's committed offsets of the
// partitions assigned are fetched (groupCommitted: retried with a
// backoff, logged, until they are had — never silently done without),
// and every partition is seeked to the higher of its offset in the
// offsets view — the view asked now (Config.Offsets), max-merged with the
// offsets given to Run and those acked since — and its committed offset;
// or to Start with neither. The offsets franz-go fetched are replaced by
// these. The offset chosen is checked against its log as at the start
// of a direct run: a gap or an offset ahead of the log's end ends the
// run. Why the higher: a member commits an offset to the group only
// after the host acked it (its WAL holds the records before it), so a
// committed offset is a lower bound of what some daemon's WAL holds. One
// below the view's is this daemon's own past, ignored (the WAL stays the
// truth: no rewind); one above it means another daemon ingested the
// records between into its own WAL, and they are not read again. A view
// offset above the group's is committed to the group at once, so that a
// member taking the partition later need not read again what this
// daemon holds.
//
// On a revoke (revoked) the partitions are released: the poller takes
// no more of their records, their queued records are dropped, and a
// unit holding some of them is sent no more once every answer to it
// said nothing of it is held (engine.ErrResourceExhausted, ErrNotReady):
// its records of partitions still owned go back to the buffer. A unit
// one answer to which may have been a commit (unknown outcome) is resent
// whole until its answer is final — the only way to learn it — as any
// unit is. The callback returns only once no unit holds a revoked
// partition (or the run ends), so the group hands a partition on only
// after every unit of it this run sent is answered: a member that
// resumes from the same offsets view starts after them. Then the acked
// offsets of the revoked partitions are committed to the group.
//
// A loss (lost: the member was fenced, its session expired) is a revoke
// whose partitions may already be another member's: the same release
// and wait, but nothing is committed, and a unit in flight may still be
// committed after the new owner began — with one offsets view shared,
// its records would then be ingested twice; with one view per host (each
// daemon its own WAL) the new owner reads again what the lost member
// acked after its last commit to the group (doc.go).

// groupOpts are the client options of a run in a group: no autocommit,
// rebalances only between polls (the poller calls AllowRebalance once
// it holds a poll's records), and the callbacks.
func (r *run) groupOpts() []kgo.Opt {
	r.commits = newCommitter(r)
	return []kgo.Opt{
		kgo.ConsumerGroup(r.s.cfg.Group), kgo.ConsumeTopics(r.topics.all()...),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(), kgo.ConsumeResetOffset(kgo.NoResetOffset()),
		kgo.OnPartitionsAssigned(r.assigned), kgo.AdjustFetchOffsetsFn(r.adjust),
		kgo.OnPartitionsRevoked(r.revoked), kgo.OnPartitionsLost(r.lost),
	}
}

// flatten lists the partitions of a franz-go assignment.
func flatten(m map[string][]int32) []tp {
	var out []tp
	for t, ps := range m {
		for _, p := range ps {
			out = append(out, tp{t, p})
		}
	}
	return out
}

func (r *run) assigned(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
	parts := flatten(assigned)
	r.own(parts)
	r.commits.forget(parts) // acks of an earlier ownership are not to be committed now
	r.logParts("kafka source: partitions assigned", parts)
}

// logParts logs msg about parts, if any.
func (r *run) logParts(msg string, parts []tp) {
	if len(parts) > 0 {
		r.s.cfg.Logger.Info(msg, "source", r.s.cfg.Name, "group", r.s.cfg.Group, "partitions", len(parts))
	}
}

// adjust seeks every partition assigned to where it resumes (the higher
// of the offsets view and the group's committed offset, or Start),
// replacing the offsets franz-go fetched from the group. An error makes
// franz-go join again (and ask again); a gap or an offset ahead of the
// log also ends the run.
func (r *run) adjust(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	var parts []tp
	for t, ps := range fetched {
		for p := range ps {
			parts = append(parts, tp{t, p})
		}
	}
	view, err := r.resumeView(ctx)
	if err != nil {
		r.s.cfg.Logger.Warn("kafka source: cannot read the offsets view; the group is joined again", "source", r.s.cfg.Name, "error", err)
		return nil, err
	}
	group, err := r.groupCommitted(ctx, parts)
	if err != nil {
		return nil, errors.Join(err, errNoResume) // ctx or the run ended
	}
	resume := r.higher(resumeAt(view, r.s.cfg.Name, parts), group)
	start, err := r.s.checkResume(ctx, r.adm, resume)
	if _, gap := errors.AsType[*GapError](err); gap {
		r.fail(err)
	} else if _, ahead := errors.AsType[*AheadError](err); ahead {
		r.fail(err)
	}
	if err != nil || start == nil {
		return nil, errors.Join(err, ctx.Err(), errNoResume)
	}
	out := map[string]map[int32]kgo.Offset{}
	ahead := map[tp]int64{} // the view's offsets above the group's
	for _, p := range parts {
		if out[p.topic] == nil {
			out[p.topic] = map[int32]kgo.Offset{}
		}
		out[p.topic][p.partition] = r.seek(p, start)
		if at, ok := start[p]; ok {
			if g, ok := group[p]; !ok || at > g {
				ahead[p] = at
			}
		}
	}
	if len(ahead) > 0 {
		r.commits.acked(ahead) // held in this daemon's WAL (or lost to retention): commit it
	}
	return out, nil
}

// errNoResume: adjust could not settle where the partitions resume.
var errNoResume = errors.New("kafka source: where the assigned partitions resume is not settled")

// higher is where each partition of wal (the offsets view's) or group
// (the committed offsets) resumes: the higher of the two. A committed
// offset above the view's is logged: another daemon ingested the
// records between.
func (r *run) higher(wal, group map[tp]int64) map[tp]int64 {
	out := maps.Clone(wal)
	for p, g := range group {
		w, ok := wal[p]
		if ok && w >= g {
			continue
		}
		out[p] = g
		args := []any{"source", r.s.cfg.Name, "group", r.s.cfg.Group, "topic", p.topic, "partition", p.partition, "committed", g}
		if ok {
			args = append(args, "offsets_view", w)
		}
		r.s.cfg.Logger.Info("kafka source: assigned partition resumes from the group's committed offset, above this host's: "+
			"another member ingested the records before it", args...)
	}
	return out
}

// groupCommitted fetches the group's committed offsets of parts (those
// with one), retrying with a backoff, each failure logged, until it has
// them or ctx (the group session) or the run ends. Without them a
// partition another daemon held would resume from this host's stale
// offset or Start: read again, or with StartLatest skipped. An
// unreachable coordinator therefore holds the assignment up — its
// partitions are not consumed; the session's heartbeats, which go to the
// same coordinator, fail too, and the group is joined again.
func (r *run) groupCommitted(ctx context.Context, parts []tp) (map[tp]int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	backoff := retryBase
	for {
		got, err := fetchCommitted(kadm.RequireStable(ctx), r.adm, r.s.cfg.Group, parts)
		if err == nil {
			return got, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		r.s.cfg.Logger.Warn("kafka source: cannot fetch the group's committed offsets of the partitions assigned; retrying (they are not consumed meanwhile)",
			"source", r.s.cfg.Name, "group", r.s.cfg.Group, "partitions", len(parts), "retry_in", backoff, "error", err)
		if err := r.s.cfg.Sleep(ctx, backoff); err != nil {
			return nil, err
		}
		backoff = min(2*backoff, 10*retryMax)
	}
}

// fetchCommitted returns the committed offsets of parts in group: those
// with one. An error of the request or of one of parts is an error.
func fetchCommitted(ctx context.Context, adm *kadm.Client, group string, parts []tp) (map[tp]int64, error) {
	rs, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[tp]int64{}
	for _, p := range parts {
		o, ok := rs.Lookup(p.topic, p.partition)
		switch {
		case !ok:
		case o.Err != nil:
			return nil, fmt.Errorf("topic %q partition %d: %w", p.topic, p.partition, o.Err)
		case o.At >= 0: // -1: none
			out[p] = o.At
		}
	}
	return out, nil
}

// seek is where p resumes: its offset in start, or Start.
func (r *run) seek(p tp, start map[tp]int64) kgo.Offset {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	at, ok := start[p]
	if !ok {
		delete(r.pos, p)
		r.s.cfg.Logger.Info("kafka source: assigned partition has no offset in the offsets view nor in the group; it starts at start:",
			"source", r.s.cfg.Name, "topic", p.topic, "partition", p.partition, "start", r.s.cfg.Start)
		return r.s.startOffset()
	}
	r.pos[p] = at
	r.s.noteAcked(p, at) // the lag counts from here
	return kgo.NewOffset().At(at)
}

// resumeView is the offsets view an assignment resumes from: the host's
// now (Config.Offsets), max-merged with the run's own.
func (r *run) resumeView(ctx context.Context) (segment.Offsets, error) {
	r.ownMu.Lock()
	own := slices.Clone(r.view)
	r.ownMu.Unlock()
	if r.s.cfg.Offsets == nil {
		return own, nil
	}
	host, err := r.s.cfg.Offsets(ctx)
	if err != nil {
		return nil, err
	}
	return segment.MaxMerge(host, own), nil
}

func (r *run) revoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	parts := flatten(revoked)
	r.release(parts)
	if r.buf.waitFree(r.ctx, parts) == nil {
		r.commits.flush(ctx, cl, parts)
	}
	r.commits.forget(parts)
	r.logParts("kafka source: partitions revoked", parts)
}

func (r *run) lost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	parts := flatten(lost)
	r.release(parts)
	_ = r.buf.waitFree(r.ctx, parts) // nil, or the run ended
	r.commits.forget(parts)
	r.logParts("kafka source: partitions lost (fenced, or the session expired); nothing committed to the group", parts)
}

// release stops consuming parts: the poller takes no more of their
// records, the buffer drops theirs, and their positions and lag are
// forgotten.
func (r *run) release(parts []tp) {
	r.ownMu.Lock()
	for _, p := range parts {
		delete(r.owned, p)
	}
	r.ownMu.Unlock()
	r.buf.drop(parts)
	r.posMu.Lock()
	for _, p := range parts {
		delete(r.pos, p)
	}
	r.posMu.Unlock()
	r.s.forgetLag(parts)
}
