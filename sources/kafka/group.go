package kafka

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/skipprd/skipprd/engine/segment"
)

// A run in a consumer group (Config.Group): the group assigns the
// partitions; the host's offsets view says where each resumes.
//
// On an assignment (adjust) every partition assigned is seeked to the
// offset of its next record in the offsets view — the view asked now
// (Config.Offsets), max-merged with the offsets given to Run and those
// acked since — or to Start without one; the group's committed offsets,
// which franz-go fetches, are replaced, never used. A recovered offset
// is checked against its log as at the start of a direct run: a gap or
// an offset ahead of the log's end ends the run.
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
// daemon its own WAL) they are anyway (doc.go).

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

// adjust seeks every partition assigned to where the offsets view says
// it resumes, replacing the offsets franz-go fetched from the group. An
// error makes franz-go join again (and ask again); a gap or an offset
// ahead of the log also ends the run.
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
	start, err := r.s.checkResume(ctx, r.adm, resumeAt(view, r.s.cfg.Name, parts))
	if _, gap := errors.AsType[*GapError](err); gap {
		r.fail(err)
	} else if _, ahead := errors.AsType[*AheadError](err); ahead {
		r.fail(err)
	}
	if err != nil || start == nil {
		return nil, errors.Join(err, ctx.Err(), errNoResume)
	}
	out := map[string]map[int32]kgo.Offset{}
	for _, p := range parts {
		if out[p.topic] == nil {
			out[p.topic] = map[int32]kgo.Offset{}
		}
		out[p.topic][p.partition] = r.seek(p, start)
	}
	return out, nil
}

// errNoResume: adjust could not settle where the partitions resume.
var errNoResume = errors.New("kafka source: where the assigned partitions resume is not settled")

// seek is where p resumes: its offset in start, or Start.
func (r *run) seek(p tp, start map[tp]int64) kgo.Offset {
	r.posMu.Lock()
	defer r.posMu.Unlock()
	at, ok := start[p]
	if !ok {
		delete(r.pos, p)
		r.s.cfg.Logger.Info("kafka source: assigned partition has no offset in the offsets view; it starts at start:", "source", r.s.cfg.Name,
			"topic", p.topic, "partition", p.partition, "start", r.s.cfg.Start)
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
