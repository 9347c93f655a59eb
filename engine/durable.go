package engine

import (
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// The durable log is the seam between two facts the WAL decides:
//
//   - a unit is durable, so its source may be acked;
//   - a snapshot is a committed segment, so compaction may apply it.
//
// In the S3 WAL (s3Log) they are one event: a unit is durable when the
// marker of the segment holding it lands, and commit acks it. In the
// local-disk WAL (diskLog, wal_disk*.go) a unit is durable at the
// group-commit fsync that covers its log entry — it is acked then and
// joins the live accumulator (the memtable) — and the memtable's
// generations become segments later, through the same seal, persist and
// commit as the S3 WAL; the log forgets a generation once its segment is
// committed and the log has recorded that durably.
type durableLog interface {
	// canonical returns the form of an admitted unit the engine keeps:
	// the S3 log keeps it as submitted; the disk log keeps what its log
	// entry decodes to, so a replay after a crash rebuilds the very same
	// snapshot bytes.
	canonical(in Unit) (Unit, error)
	// accept takes an admitted, held unit.
	accept(u *unit, in Unit)
	// refuse is the log's own admission check for in (a halted or full
	// partition), or nil.
	refuse(in Unit) error
	// beforePersist runs when a sealed snapshot is about to be persisted;
	// next persists it.
	beforePersist(s *snapshot, next func())
	// committed runs when snapshot s has become segment st, before its
	// units are acked; it may hold st back from reclaim (st.logPending).
	committed(s *snapshot, st *segState)
	// merged runs when failed snapshots' contents moved into live.
	merged(from []*batchSet, into *batchSet)
	// sealed runs when live has been sealed into a snapshot and a new,
	// empty live accumulator started.
	sealed()
	// roomFreed runs when a segment was reclaimed: units waiting for a
	// WAL slot may go on.
	roomFreed()
	// heldBytes is what the log holds of held: units not yet durable, or
	// durable and waiting for room in live.
	heldBytes() int64
	// onTheWay counts the admitted units not yet in live (0: S3 WAL). The
	// disk log's admission reserved a WAL slot for each (diskLog.slots):
	// a seal that takes one of them — a cut-only segment — would leave an
	// acked unit without its slot, and a crash would replay it past
	// LiveSegmentsMax (cutOnlyDue).
	onTheWay() int
	// failAll answers every unit the log holds that was not acked.
	failAll(err error)
	// files counts the log segment files the log holds (0: S3 WAL);
	// filesAtRest is how many an empty log holds (one per partition, the
	// append target).
	files() int
	filesAtRest() int

	// Policy the log sets for the writer. sealDelay: a fixed delay
	// before live is sealed, in place of the adaptive one (ok false).
	// stamp dates a snapshot at its seal, or leaves it to be dated when
	// its body is encoded. ahead: a queued snapshot's body may be
	// prepared while the active one persists. order puts a body's PARTs
	// in the log's order.
	sealDelay() (time.Duration, bool)
	stamp(s *snapshot)
	ahead() bool
	order(parts []segment.Part)

	// Recovery (wal_disk_recover.go): recoverLog reads the log before
	// the store is recovered; logIDs are the snapshot ids it will persist
	// again (their epochs are sealed at least that far); holds says an
	// owned segment waits for the log before reclaim; replay restores
	// the log's units once the owned segments are registered.
	recoverLog(round int, done func(error))
	logIDs() []SnapshotID
	holds(id SnapshotID) bool
	replay(owned map[SnapshotID]*segState)
}

// s3Log is the S3 WAL's durable log: a unit joins live at once and is
// durable, and acked, when its segment commits.
type s3Log struct{ e *Engine }

func (l s3Log) canonical(in Unit) (Unit, error) { return in, nil }
func (l s3Log) refuse(Unit) error               { return nil }

func (l s3Log) accept(u *unit, in Unit) {
	e := l.e
	e.joinLive(u, in)
	e.hold(u)
	e.checkHeld()
	e.checkWAL()
	e.afterAppend()
}

// The S3 WAL has no log beside the writer's sets: no generation, no
// replay, no segment held back for a log. Where the disk log acts on an
// event, the S3 log checks that the engine's state is the one this
// implies, so that a disk-only path taken in S3 mode fails closed.

// committed: a segment the S3 WAL commits is a fresh snapshot's (none is
// replayed) and waits for no log before reclaim.
func (l s3Log) committed(s *snapshot, st *segState) {
	if s.replayed || st.logPending {
		l.e.broken("an S3 WAL commit is a fresh snapshot's and waits for no log: snapshot %s, replayed %t, log pending %t", s.id, s.replayed, st.logPending)
	}
}

// beforePersist: the S3 WAL logs no seal before a persist; the snapshot
// is a fresh one, of no generation and not replayed, and persists at
// once.
func (l s3Log) beforePersist(s *snapshot, next func()) {
	if s.replayed || s.content.gen != 0 {
		l.e.broken("an S3 WAL persists fresh snapshots, of no generation: snapshot %s, replayed %t, generation %d", s.id, s.replayed, s.content.gen)
		return
	}
	next()
}

// merged: the sets a failed persist moves back carry no generation.
func (l s3Log) merged(from []*batchSet, into *batchSet) {
	for _, b := range from {
		if b.gen != 0 || into.gen != 0 {
			l.e.broken("the S3 WAL numbers no generations: generation %d merged into %d (%d merged)", b.gen, into.gen, len(from))
			return
		}
	}
}

// sealed: nothing joins live at a seal (the disk log's backlog would):
// the new live accumulator is empty and has no generation.
func (l s3Log) sealed() {
	if live := l.e.live; !live.empty() || live.gen != 0 {
		l.e.broken("an S3 WAL seal starts an empty live accumulator: %d units, generation %d", len(live.units), live.gen)
	}
}

// roomFreed: no unit waits for room in the S3 WAL — a full one refuses
// at once (room) — so a reclaimed segment wakes nobody.
func (l s3Log) roomFreed() {}

// onTheWay: an S3 WAL unit joins live at admission (accept).
func (l s3Log) onTheWay() int { return 0 }

func (l s3Log) heldBytes() int64 { return 0 }

// failAll: every unit the S3 WAL holds is in live, the queue or the
// active snapshot, which failing closed answered already.
func (l s3Log) failAll(error) {}

func (l s3Log) files() int       { return 0 }
func (l s3Log) filesAtRest() int { return 0 }

// The S3 WAL's writer policy: the adaptive seal delay (acks wait for the
// commit, so the delay is the ack latency), the body dated when it is
// encoded, prepared ahead while the previous snapshot persists, PARTs in
// the accumulator's order.
func (l s3Log) sealDelay() (time.Duration, bool) { return 0, false }

// stamp leaves a fresh snapshot undated: its body is dated when encoded.
func (l s3Log) stamp(s *snapshot) {
	if s.created != 0 || s.replayed {
		l.e.broken("an S3 WAL snapshot is sealed fresh and undated: snapshot %s, created %d, replayed %t", s.id, s.created, s.replayed)
	}
}

func (l s3Log) ahead() bool                        { return true }
func (l s3Log) order([]segment.Part)               {}            // the accumulator's order is the S3 WAL's
func (l s3Log) recoverLog(_ int, done func(error)) { done(nil) } // nothing to read: at once, as Starts next step
func (l s3Log) logIDs() []SnapshotID               { return nil }
func (l s3Log) holds(SnapshotID) bool              { return false }

// replay: there is no log to replay, so recovery ends with the writer as
// it began — nothing live, queued or active. A unit held before recovery
// ends was submitted to an engine that could not yet take it.
func (l s3Log) replay(map[SnapshotID]*segState) {
	if e := l.e; !e.live.empty() || len(e.queue) != 0 || e.active != nil || e.replayed != 0 {
		e.broken("an S3 WAL recovery ends with an empty writer: live %d units, %d queued, active %t, %d replayed",
			len(e.live.units), len(e.queue), e.active != nil, e.replayed)
	}
}

// The seam's contract, asserted by the engine where it calls the log
// (append, pump, commit), once for both logs.

// checkAccepted: a unit reaches its durable log once, fresh from append —
// its submitter waiting (one answer due), no log entry yet (sequence 0,
// no segment), not a replayed one. A unit accepted twice would be held,
// and acked, twice. A unit refused here is not held yet, so failing
// closed did not answer it: it is answered here.
func (e *Engine) checkAccepted(u *unit) bool {
	if len(u.dones) != 1 || u.seq != 0 || u.seg != nil || u.replayed {
		e.broken("a unit is accepted once, fresh from append: %d answers due, partition %d, sequence %d, segment %t, replayed %t",
			len(u.dones), u.part, u.seq, u.seg != nil, u.replayed)
		e.answerRefused(u)
		return false
	}
	return true
}

// answerRefused answers a unit that a failed check kept from being held:
// failing closed answers only what is held.
//
// REQUIRES: the engine failed closed (the check that refused u did).
func (e *Engine) answerRefused(u *unit) {
	if e.state != stateFailed {
		// Refused without a failure, the unit would be answered ErrClosed
		// (with no reason) by an engine that goes on.
		e.broken("a unit is refused only by a failed check: state %d, %d answers due, partition %d", e.state, len(u.dones), u.part)
	}
	for _, d := range u.dones {
		e.answer(d, fmt.Errorf("%w: %v", ErrClosed, e.err))
	}
	u.dones = nil
}

// checkPersisting: the writer persists the active snapshot, sealed and not
// yet started (persistQueued); the log's step before its persist
// (beforePersist) asserts it, so that a generation's seal is logged only
// for the one snapshot the writer is about to persist.
func (e *Engine) checkPersisting(s *snapshot) bool {
	if s != e.active || s.stage != persistQueued {
		active := SnapshotID{}
		if e.active != nil {
			active = e.active.id
		}
		e.broken("a snapshot persists as the active one, straight from the queue: snapshot %s in stage %s, active %s",
			s.id, s.stage, active)
		return false
	}
	return true
}

// checkCommitted: the log hears of a commit (and the disk log records the
// generation flushed, which lets it forget the generation's entries) only
// for a snapshot that did commit. A flushed record for a snapshot that is
// not committed would let a crash lose its acked units.
func (e *Engine) checkCommitted(s *snapshot) bool {
	if s.stage != persistCommitted {
		e.broken("a generation is recorded flushed only once its snapshot committed: snapshot %s in stage %s", s.id, s.stage)
		return false
	}
	return true
}
