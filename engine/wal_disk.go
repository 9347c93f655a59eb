package engine

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// diskLog is the local-disk WAL's policy (docs/DESIGN.md §9): when a
// unit is acked, which memtable generation it joins, when generations are
// sealed and flushed, and the pressure valves. The log itself — its
// partitions, segment files, group commit and deletion — is wal.Log
// (package wal, which also holds the byte layout); it tells the engine
// what happened through logHooks (wal_disk_hooks.go).
//
// A unit's life in disk mode:
//
//  1. Submit admits it; its log entry is queued on its partition
//     (accept). It is held, not yet durable.
//  2. The committer writes a batch of queued entries and fsyncs it. On
//     success every unit of the batch gets its sequence number, is acked
//     and joins the live accumulator — the memtable — in its current
//     generation (unitDurable). On failure the file is poisoned and every
//     unit of the batch is answered ErrUnknownOutcome; no sequence number
//     was spent.
//  3. A generation is sealed into a snapshot like in the S3 WAL; before
//     it is persisted, a seal record naming its snapshot id, created_at,
//     directory and the sequence ranges of its units is made durable in
//     every partition holding some of them (beforePersist), so a replay
//     rebuilds the same snapshot under the same id.
//  4. When the snapshot commits, a flushed record is made durable in
//     those partitions (committed); then the generation leaves every
//     segment's dirty map, log segments whose map is empty are deleted
//     oldest first, and the segment may be reclaimed.
//
// Pressure valves (valve): a log segment pinned longer than PinnedMax, or
// a WAL larger than TotalBytesMax, forces live to be sealed; a partition
// larger than PartitionBytesMax refuses units until segments are freed.
type diskLog struct {
	e   *Engine
	cfg DiskWAL
	log *wal.Log[logJoin]
	// queuedBytes: held bytes of the units accepted and not yet durable
	// (queued in the log, in its batch, or of a failed batch not yet
	// answered).
	//
	// INVARIANT: inFlight counts those units and the backlog's, so
	// inFlight ≥ len(backlog); no count is negative, an empty list holds
	// no bytes, and backlogBytes = Σ the backlog's bytes (checkFlight).
	queuedBytes int64
	// backlog: durable (acked) units that found no room in live and wait
	// for the next seal, in order.
	backlog      []logJoin
	backlogBytes int64
	inFlight     int    // units accepted and not yet in live (or answered ErrUnknownOutcome)
	nextGen      uint64 // the generation the next live accumulator gets
	// durableSeq: per partition, the sequence number of the last unit
	// made durable by this process (0: none yet). INVARIANT: the next one
	// is durableSeq+1 — dense, only growing (unitDurable).
	durableSeq  []uint64
	valveCancel func()
	scan        *logScan // what recovery read, until replay
	// replayPending counts the units recovery replayed from the log
	// whose generation has not committed yet (Engine.ReplayPending).
	replayPending int
	// lastError is the log's last write, fsync or create failure
	// (handled: the segment rolled, the units were answered), for the
	// operator's log (Engine.LastWALError).
	lastError error
}

// logJoin is a unit on its way into live: the handle of its log entry
// (wal.Write.Unit) and, once durable, of its place in the backlog.
type logJoin struct {
	u  *unit
	in Unit
}

// ErrUnknownOutcome: the disk WAL could not make a unit's entry durable
// and cannot tell whether it will survive a crash (an fsync or write
// failed). The unit was not acked; retry it with the same idempotency key
// or offsets and it is stored at most once.
var ErrUnknownOutcome = errors.New("engine: outcome unknown")

// ErrPartitionHalted: the unit's WAL partition found corruption in its
// log and refuses writes until an operator has looked at it.
var ErrPartitionHalted = errors.New("engine: WAL partition halted")

func newDiskLog(e *Engine, cfg DiskWAL) *diskLog {
	l := &diskLog{e: e, cfg: cfg, nextGen: 2, durableSeq: make([]uint64, cfg.Partitions)}
	var interval time.Duration
	if cfg.Sync == BatchSync {
		interval = cfg.BatchSyncInterval
	}
	l.log = wal.New(wal.Config{
		Partitions: cfg.Partitions, SegmentBytes: cfg.SegmentBytes, BatchBytes: cfg.BatchBytes,
		BatchSyncInterval: interval, AttemptsMax: AttemptsMax,
	}, e.p.Disk, e.p.Timers, logHooks{l})
	e.live.gen = 1
	return l
}

// partOf routes a partition key to its log partition: FNV-1a of the
// namespace and partition, so one namespace partition always lands in
// one log (its units keep their order).
func (l *diskLog) partOf(k segment.PartitionKey) *wal.Partition[logJoin] {
	return l.log.Partition(WALPartitionOf(k.Namespace, k.Partition, l.cfg.Partitions))
}

// WALPartitionOf is the disk WAL partition (of n) that units of a
// namespace partition go to.
func WALPartitionOf(namespace, partition string, n int) uint32 {
	if n <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(namespace))
	h.Write([]byte{0})
	h.Write([]byte(partition))
	return h.Sum32() % uint32(n)
}

// canonical: a unit whose stream does not read back as itself is a broken
// invariant, not an invalid unit: the engine fails closed.
func (l *diskLog) canonical(in Unit) (Unit, error) {
	out, err := canonicalFor(l.e, in)
	if errors.Is(err, ErrInvariant) {
		l.e.failClosed(err)
	}
	return out, err
}

func (l *diskLog) refuse(in Unit) error {
	p := l.partOf(in.Key)
	if err := p.Halted(); err != nil {
		return fmt.Errorf("%w: partition %d: %v", ErrPartitionHalted, p.ID(), err)
	}
	if n := l.slots(); n > l.e.cfg.LiveSegmentsMax {
		l.e.mark(MarkBackpressureWAL)
		return fmt.Errorf("%w: WAL backlog of %d segments (counting the memtable and units on their way into it), limit %d",
			ErrResourceExhausted, n, l.e.cfg.LiveSegmentsMax)
	}
	if p.Bytes() > l.cfg.PartitionBytesMax {
		l.e.mark(MarkBackpressureWALDisk)
		l.makeRoom(p)
		return fmt.Errorf("%w: WAL partition %d holds %d bytes, limit %d: retry after a flush", ErrResourceExhausted, p.ID(), p.Bytes(), l.cfg.PartitionBytesMax)
	}
	return nil
}

// slots counts the segments the WAL could hold with one more unit:
// owned, queued and active snapshots, live if non-empty, and one per unit
// on its way into live (queued in the log, or durable in the backlog,
// this one among them) — each may end in a generation of its own, since
// live can be sealed between two joins (the size valve seals at every
// join). Admitting only while slots ≤ LiveSegmentsMax keeps every acked
// unit within the bound, even the ones a crash leaves in the log
// (replayed into a new memtable). The count is pessimistic only near the
// limit, where ingest waits for reclaim anyway.
func (l *diskLog) slots() int {
	n := l.e.walSegments() + l.inFlight + 1
	if !l.e.live.empty() {
		n++
	}
	return n
}

// makeRoom works towards freeing a full partition: live is sealed (its
// generation pins segments until flushed), and a target segment that
// pins nothing is rolled away from, so it can be deleted.
func (l *diskLog) makeRoom(p *wal.Partition[logJoin]) {
	l.e.sealSoon()
	p.RetireTarget()
}

// accept queues a held unit's entry on its partition.
func (l *diskLog) accept(u *unit, in Unit) {
	e := l.e
	if in.arrow == nil {
		// canonical keeps the stream; without it the entry would hold no
		// batches, and a replay would rebuild the unit empty.
		e.broken("a unit the disk log accepts is canonical, with its Arrow stream: unit of %s/%s, %d batches",
			in.Key.Namespace, in.Key.Partition, len(in.Batches))
		e.answerRefused(u)
		return
	}
	p := l.partOf(in.Key)
	if err := p.Halted(); err != nil {
		// Admission refuses a halted partition's units (refuse): one
		// queued there would never be written, nor answered.
		e.broken("a unit the disk log accepts goes to a partition that takes writes: unit of %s/%s to partition %d, halted on %v",
			in.Key.Namespace, in.Key.Partition, p.ID(), err)
		e.answerRefused(u)
		return
	}
	u.part = p.ID()
	payload, err := unitPayload(in)
	if err != nil {
		// canonical produced it, so the encoder refusing it is a bug.
		e.broken("a canonical unit encodes: %v", err)
		e.answerRefused(u)
		return
	}
	e.hold(u)
	l.inFlight++
	l.queuedBytes += u.bytes
	l.checkFlight(false)
	e.checkHeld()
	p.Append(&wal.Write[logJoin]{Unit: logJoin{u, in}, Payload: payload})
}

// unitDurable runs when a unit's entry is covered by a completed fsync:
// the unit is committed. It is acked and joins live (or the backlog).
func (l *diskLog) unitDurable(w *wal.Write[logJoin], seq uint64, seg *wal.Segment) {
	e, u := l.e, w.Unit.u
	if u.seq != 0 || u.seg != nil || seg == nil || int(u.part) >= len(l.durableSeq) {
		e.broken("a unit is made durable once, in a segment of its partition: partition %d of %d, sequence %d, made durable again as %d, segment %t",
			u.part, len(l.durableSeq), u.seq, seq, seg != nil)
		return
	}
	if last := l.durableSeq[u.part]; last != 0 && seq != last+1 {
		e.broken("a partition's units become durable in sequence, without gaps: partition %d made %d durable after %d",
			u.part, seq, last)
		return
	}
	if len(u.dones) == 0 || u.replayed {
		// A unit is acked here, once, to the submitters waiting for it: a
		// replayed one was acked by its first life and waits for its
		// generation's commit (replayedCommitted); one nobody waits for
		// was answered already.
		e.broken("a unit made durable is a fresh one its submitters wait for: partition %d, sequence %d, %d waiting, replayed %t",
			u.part, seq, len(u.dones), u.replayed)
		return
	}
	l.durableSeq[u.part] = seq
	u.seq, u.seg = seq, seg
	e.releaseKeys(u)
	e.mergeCommitted(w.Unit.in.Offsets)
	e.countAcked(u)
	e.observeAckDelay(u)
	for _, d := range u.dones {
		e.answer(d, nil)
	}
	u.dones = nil
	l.join(u, w.Unit.in)
}

// leaveQueue moves a unit's held bytes out of its partition's queue, just
// before they enter live or the backlog (held stays the same sum).
func (l *diskLog) leaveQueue(u *unit) {
	if l.queuedBytes -= u.bytes; l.queuedBytes < 0 {
		l.e.broken("queued bytes ≥ 0: %d after unit %d of partition %d left the queue", l.queuedBytes, u.seq, u.part)
	}
}

// join moves a durable unit into live, sealing live first if the unit
// would break a segment limit. With no room even then — or when live is
// empty and the WAL already holds LiveSegmentsMax segments, so the unit
// would start one more — it waits in the backlog (pinning its log
// segment) until a seal or a reclaim makes room (drain).
func (l *diskLog) join(u *unit, in Unit) {
	e := l.e
	if !l.checkLiveGen() {
		return
	}
	u.seg.Pin(e.live.gen, u.seq, e.now()) // until it is in a generation
	if len(l.backlog) == 0 && !e.roomFor(in, u.bytes) {
		e.sealSoon()
	}
	l.leaveQueue(u)
	if len(l.backlog) > 0 || !l.fits(u, in) {
		e.mark(MarkWALBacklog)
		l.backlog = append(l.backlog, logJoin{u, in})
		l.backlogBytes += u.bytes
		l.checkFlight(false)
		return
	}
	l.joinLive(u, in)
	l.checkFlight(false)
	e.checkHeld()
	if l.totalBytes() > l.cfg.TotalBytesMax {
		e.mark(MarkWALValveSize) // the size valve: seal the memtable now
		e.afterAppendDue()
		return
	}
	e.afterAppend()
}

func (l *diskLog) totalBytes() int64 { return l.log.Bytes() }

// fits reports whether a durable unit can join live now.
func (l *diskLog) fits(u *unit, in Unit) bool {
	e := l.e
	if e.live.empty() && e.walSegments() >= e.cfg.LiveSegmentsMax {
		return false
	}
	return e.roomFor(in, u.bytes)
}

// joinLive moves a durable unit — acked, with its sequence number and
// segment — into live's generation, which it pins in that segment.
func (l *diskLog) joinLive(u *unit, in Unit) {
	e := l.e
	if u.seq == 0 || u.seg == nil {
		// Only a unit made durable was acked; its pin is what keeps its
		// entry until the generation commits.
		e.broken("a unit joins live once durable: partition %d, sequence %d, segment %t", u.part, u.seq, u.seg != nil)
		return
	}
	e.joinLive(u, in)
	releaseUnit(in) // live holds it now
	u.seg.Pin(e.live.gen, u.seq, e.now())
	if l.inFlight--; l.inFlight < 0 {
		e.broken("units in flight ≥ 0: %d after unit %d of partition %d joined live", l.inFlight, u.seq, u.part)
	}
}

// sealed starts the new live accumulator's generation and drains the
// backlog into it.
func (l *diskLog) sealed() {
	if live := l.e.live; !live.empty() || live.gen != 0 {
		l.e.broken("a generation starts with a new, empty live accumulator: live holds %d units, generation %d, next %d",
			len(live.units), live.gen, l.nextGen)
		return
	}
	l.e.live.gen = l.nextGen
	l.nextGen++
	l.drain()
}

func (l *diskLog) roomFreed() { l.drain() }

// drain moves backlog units into live while they fit, in order.
func (l *diskLog) drain() {
	e := l.e
	if len(l.backlog) > 0 && !l.checkLiveGen() {
		return
	}
	joined := false
	for len(l.backlog) > 0 && l.fits(l.backlog[0].u, l.backlog[0].in) {
		j := l.backlog[0]
		l.backlog = l.backlog[1:]
		l.backlogBytes -= j.u.bytes
		l.joinLive(j.u, j.in)
		joined = true
	}
	if !l.checkFlight(true) {
		return
	}
	if joined {
		e.afterAppend() // arms the flush delay (or seals) for what joined
	}
}

// merged: failed snapshots' units now belong to live's generation, in
// every dirty map.
func (l *diskLog) merged(from []*batchSet, into *batchSet) {
	for _, b := range from {
		if b.gen == 0 || into.gen == 0 || b.gen == into.gen {
			l.e.broken("a failed generation merges into live's, another one: generation %d into %d (%d merged)", b.gen, into.gen, len(from))
			return
		}
		l.log.Regen(b.gen, into.gen)
	}
}

func (l *diskLog) files() int { return l.log.Files() }

func (l *diskLog) heldBytes() int64 { return l.backlogBytes + l.queuedBytes }

// onTheWay: the units queued in the log or waiting in the backlog, each
// counted by admission as a segment of its own (slots).
func (l *diskLog) onTheWay() int { return l.inFlight }

// failAll answers the units whose entries are not yet durable; those of
// a failed batch keep their answer, outcome unknown.
func (l *diskLog) failAll(err error) {
	for _, p := range l.log.Partitions() {
		for _, w := range p.Stop() {
			if u := w.Unit.u; w.IsUnit() {
				for _, d := range u.dones {
					l.e.answer(d, fmt.Errorf("%w: %v", ErrClosed, err))
				}
				u.dones = nil
			}
		}
	}
}

// beforePersist makes the generation boundary durable: a seal record in
// every partition holding units of s. A replayed snapshot's seal is
// logged again: the one recovery read may be in the page cache only (an
// fsync error the last process never rolled past), and a marker landing
// for an id the log then forgets would let its units be replayed under
// a new id — stored twice. Two seal records of one id are one.
func (l *diskLog) beforePersist(s *snapshot, next func()) {
	if s.stage != persistQueued {
		l.e.broken("a generation's seal is logged before its snapshot persists: snapshot %s in stage %s", s.id, s.stage)
		return
	}
	if s.content.gen == 0 {
		// A seal record pins its generation: generation 0 pins nothing,
		// and its segment could go before the snapshot commits.
		l.e.broken("a sealed generation is one the log handed out (≥ 1): snapshot %s, generation 0", s.id)
		return
	}
	ranges, mask, err := sealRanges(s.content.units)
	if err != nil {
		l.e.failClosed(err)
		return
	}
	left := len(ranges)
	if left == 0 {
		next()
		return
	}
	for _, pr := range ranges {
		if int(pr.part) >= l.cfg.Partitions {
			l.e.broken("a unit's log partition is one of the log's: partition %d of %d (snapshot %s)", pr.part, l.cfg.Partitions, s.id)
			return
		}
		for _, r := range pr.ranges {
			if r.Lo == 0 {
				l.e.broken("a sealed generation holds only durable units (sequence ≥ 1): snapshot %s, partition %d, range %d-%d",
					s.id, pr.part, r.Lo, r.Hi)
				return
			}
		}
		if s.created == 0 {
			// The seal record carries the date (stamp): a body dated when
			// it is encoded would not be the one a replay rebuilds.
			l.e.broken("a generation's seal carries its snapshot's date, stamped at the seal: snapshot %s, created 0", s.id)
			return
		}
		p := l.log.Partition(pr.part)
		rec := wal.SealRecord{
			Snapshot: wal.SnapshotRef{Epoch: s.id.Epoch, Seq: s.id.Seq}, CreatedUnixMs: s.created,
			Dir: s.dir, Partitions: mask, Ranges: pr.ranges,
		}
		p.AppendRecord(rec, s.content.gen, func() {
			switch left--; {
			case left == 0:
				next()
			case left < 0:
				l.e.broken("each partition's seal record completes once: snapshot %s, %d completions more than its %d partitions", s.id, -left, len(ranges))
			}
		})
	}
}

// committed logs the generation flushed in every partition that holds
// some of it.
func (l *diskLog) committed(s *snapshot, st *segState) {
	if st == nil || st.ID != s.id {
		// st is held back from reclaim until the flushed record is durable:
		// another segment held would leave s's to go too early.
		id := SnapshotID{}
		if st != nil {
			id = st.ID
		}
		l.e.broken("a committed snapshot's segment is its own: snapshot %s, segment %s (nil %t)", s.id, id, st == nil)
		return
	}
	_, mask, err := sealRanges(s.content.units)
	if err != nil {
		l.e.failClosed(err)
		return
	}
	l.recordFlushed(s.id, mask, s.content.gen, st)
}

// recordFlushed makes a flushed record for id durable in every healthy
// partition of mask, then forgets the generation gen. Until then the
// segment st (nil: not owned) is not reclaimed (segState.logPending). A generation with units
// in a halted partition cannot be forgotten there, so its segment is kept
// for good (the halt was alerted).
func (l *diskLog) recordFlushed(id SnapshotID, mask, gen uint64, st *segState) {
	if mask>>l.cfg.Partitions != 0 {
		l.e.broken("a generation's partition mask names partitions of the log: snapshot %s, mask %#x, %d partitions", id, mask, l.cfg.Partitions)
		return
	}
	if gen == 0 || gen >= l.nextGen {
		l.e.broken("a flushed generation is one the log handed out: snapshot %s, generation %d, next %d", id, gen, l.nextGen)
		return
	}
	if gen == l.e.live.gen {
		// Forgetting it unpins the log segments of live's units, which no
		// segment holds yet: they could be deleted before live commits.
		l.e.broken("a flushed generation is never live's: snapshot %s, generation %d is live's (%d units)", id, gen, len(l.e.live.units))
		return
	}
	var parts []*wal.Partition[logJoin]
	for _, p := range l.log.Partitions() {
		if mask&(1<<p.ID()) == 0 {
			continue
		}
		if p.Halted() != nil {
			if st != nil {
				st.keep = true
			}
			l.e.mark(MarkWALHaltedKeep)
			continue
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		l.forget(gen)
		return
	}
	if st != nil {
		st.logPending = true
	}
	left := len(parts)
	for _, p := range parts {
		p.AppendRecord(wal.FlushedRecord{Snapshot: wal.SnapshotRef{Epoch: id.Epoch, Seq: id.Seq}}, 0, func() {
			if left--; left > 0 {
				return
			}
			if left < 0 || st != nil && !st.logPending {
				l.e.broken("each partition's flushed record completes once, while its segment waits: snapshot %s, %d completions more than its %d partitions, segment waiting %t",
					id, -left, len(parts), st != nil && st.logPending)
				return
			}
			l.forget(gen)
			if st != nil {
				st.logPending = false
				if st.pending() == 0 {
					l.e.reclaim(st)
				}
			}
		})
	}
}

// forget removes a flushed generation from every dirty map and deletes
// the log segments that no longer hold anything unflushed.
func (l *diskLog) forget(gen uint64) { l.log.Unpin(gen) }

// partRanges is one partition's share of a generation.
type partRanges struct {
	part   uint32
	ranges []wal.SeqRange
}

// sealRanges groups units by partition into runs of consecutive sequence
// numbers, in content order, and the mask of partitions involved.
//
// REQUIRES: a partition's units in the order the log wrote them — live
// takes them as they become durable, in sequence order. A range out of
// that order would overlap or run backwards, and a replay reading the
// seal claim the wrong units. (That each is durable, sequence ≥ 1, the
// caller checks on the ranges: beforePersist.)
func sealRanges(units []*unit) (out []partRanges, mask uint64, err error) {
	idx := map[uint32]int{}
	for _, u := range units {
		i, ok := idx[u.part]
		if !ok {
			i = len(out)
			idx[u.part] = i
			out = append(out, partRanges{part: u.part})
			mask |= 1 << u.part
		}
		rs := out[i].ranges
		if n := len(rs); n > 0 && u.seq <= rs[n-1].Hi {
			return nil, 0, invariantError("a generation's units are in their partition's sequence order: partition %d, sequence %d after %d", u.part, u.seq, rs[n-1].Hi)
		}
		if n := len(rs); n > 0 && rs[n-1].Hi+1 == u.seq {
			rs[n-1].Hi = u.seq
		} else {
			rs = append(rs, wal.SeqRange{Lo: u.seq, Hi: u.seq})
		}
		out[i].ranges = rs
	}
	return out, mask, nil
}

// valve runs every PinnedMax/4: a log segment pinned longer than
// PinnedMax forces live to be sealed (the generations already sealed
// are on their way to the store). The size valve runs where units join
// live (join).
func (l *diskLog) valve() {
	e := l.e
	l.valveCancel = e.p.Timers.AfterFunc(l.cfg.PinnedMax/4+time.Millisecond, l.valve)
	if e.state != stateReady || e.live.empty() {
		return
	}
	if l.log.PinnedLonger(l.cfg.PinnedMax) {
		e.mark(MarkWALValveAge)
		e.sealSoon()
	}
}

// The disk WAL's writer policy.
//
// sealDelay: DiskWAL.SealDelay when set — acks do not wait for the
// commit, so the delay only batches generations.
func (l *diskLog) sealDelay() (time.Duration, bool) { return l.cfg.SealDelay, l.cfg.SealDelay > 0 }

// stamp dates the snapshot at its seal: the date is recorded in the log's
// seal record, so a replay encodes the very same body.
func (l *diskLog) stamp(s *snapshot) {
	if s.created != 0 || s.replayed || s.stage != persistQueued {
		// A replayed snapshot keeps the date its seal record logged: dated
		// again, its body would not be the one its first life encoded.
		l.e.broken("a snapshot is dated once, fresh from its seal: snapshot %s, created %d, replayed %t, stage %s", s.id, s.created, s.replayed, s.stage)
		return
	}
	s.created = l.e.p.Clock.WallUnixMs()
}

// ahead: no body is prepared ahead — the log records a generation's seal
// in beforePersist, in order, before its body.
func (l *diskLog) ahead() bool { return false }

// order sorts PARTs by key: a generation is rebuilt partition by
// partition after a crash, so its PART order must not depend on how units
// of different log partitions interleaved.
func (l *diskLog) order(parts []segment.Part) {
	slices.SortStableFunc(parts, func(a, b segment.Part) int { return strings.Compare(a.Key.String(), b.Key.String()) })
}

func (l *diskLog) filesAtRest() int { return l.cfg.Partitions }

// checkLiveGen: live's generation is one the log handed out — at least 1
// and below nextGen. A unit joining live pins that generation in its
// segment, and generation 0 pins nothing: the segment could be deleted
// before the unit's snapshot commits.
func (l *diskLog) checkLiveGen() bool {
	if g := l.e.live.gen; g == 0 || g >= l.nextGen {
		l.e.broken("live's generation is one the log handed out: generation %d, next %d", g, l.nextGen)
		return false
	}
	return true
}

// checkFlight: the units on their way into live add up. inFlight counts
// the units queued in the log (accepted, not yet durable or answered) and
// those in the backlog, so queued = inFlight − len(backlog) ≥ 0; no byte
// count is negative, and none is held by an empty list. With sum,
// backlogBytes = Σ the backlog's bytes: O(backlog), run where it drains,
// and the backlog holds at most LiveSegmentsMax units (admission counts
// every unit in flight as a segment, slots).
func (l *diskLog) checkFlight(sum bool) bool {
	queued := l.inFlight - len(l.backlog)
	if queued < 0 || l.queuedBytes < 0 || l.backlogBytes < 0 || queued == 0 && l.queuedBytes != 0 || len(l.backlog) == 0 && l.backlogBytes != 0 {
		l.e.broken("units on their way into live add up: %d in flight, %d in the backlog holding %d bytes, %d queued holding %d bytes",
			l.inFlight, len(l.backlog), l.backlogBytes, queued, l.queuedBytes)
		return false
	}
	if !sum {
		return true
	}
	total := int64(0)
	for _, j := range l.backlog {
		total += j.u.bytes
	}
	if total != l.backlogBytes {
		l.e.broken("backlog bytes = Σ its units' bytes: %d counted, %d units hold %d", l.backlogBytes, len(l.backlog), total)
		return false
	}
	return true
}
