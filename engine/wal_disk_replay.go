package engine

import "slices"

// replay applies what readLog found once the owned segments are known
// (wal_disk_recover.go, step 3), then rolls every healthy partition to a
// new segment and starts the valves. owned holds the registered segments.
func (l *diskLog) replay(owned map[SnapshotID]*segState) {
	e := l.e
	sc := l.scan
	l.scan = nil
	if sc == nil {
		// recoverLog read the log (or failed closed) before recovery could
		// get here: without its scan, the acked units in it would be lost.
		e.broken("replay runs once, on the log recovery read: no scan, %d owned segments", len(owned))
		return
	}
	if !e.live.empty() || len(e.queue) != 0 || e.active != nil || e.replayed != 0 || l.replayPending != 0 || l.inFlight != 0 {
		// Replay rebuilds the writer's state from the log alone.
		e.broken("replay starts on an empty writer: live %d units, %d queued, active %t, %d replayed, %d pending, %d in flight",
			len(e.live.units), len(e.queue), e.active != nil, e.replayed, l.replayPending, l.inFlight)
		return
	}
	units := map[uint32]*partScan{}
	for _, ps := range sc.parts {
		units[ps.p.ID()] = ps
	}
	var ids []SnapshotID
	//engine:orderless — collected, then sorted (newest first) below.
	for id := range sc.seals {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b SnapshotID) int { return b.Compare(a) })
	var again []*snapshot
	for _, id := range ids {
		s := sc.seals[id]
		partly := sc.flushed[id] != 0 && !sc.flushedEverywhere(s)
		if partly {
			// Committed (a flushed record is logged only after the
			// commit), but the record is missing where the seal is.
			e.mark(MarkWALFlushedPartly)
		}
		switch {
		case owned[id] != nil:
			// Logged flushed again, by this process, before the segment
			// may go: a flushed record read back may be in the page cache
			// only (an fsync error the last process never rolled past),
			// and a segment reclaimed on its word leaves the seal to be
			// rebuilt and committed a second time after a power loss.
			if st := owned[id]; !st.logPending {
				// Registered waiting for the log (holds): one let go before
				// its flushed record is logged here could be reclaimed, and
				// its seal rebuilt and committed again after a power loss.
				e.broken("an owned segment of a generation the log holds waits for the log until replay: segment %s not waiting", id)
				return
			}
			e.mark(MarkWALOwnedFlushed)
			if sc.flushed[id] == 0 {
				// The power went between its commit and its flushed
				// record's fsync: the log alone would replay it.
				e.mark(MarkWALCommittedUnflushed)
			}
			if !l.claim(s, units) {
				return
			}
			l.logFlushed(s, owned[id])
		case partly:
			if !l.claim(s, units) {
				return
			}
			l.logFlushed(s, nil)
		case sc.flushed[id] != 0:
			if !l.claim(s, units) {
				return
			}
		case l.complete(s, units):
			if s.id.Epoch >= e.epoch {
				// Recovery claimed an epoch above every generation the
				// log sealed (logIDs): replayed under its own id, it
				// cannot meet a new snapshot's.
				e.broken("a rebuilt generation's id is below the epoch recovery claimed: snapshot %s, epoch %d", s.id, e.epoch)
				return
			}
			e.mark(MarkWALReplayedSealed)
			r := l.rebuild(s, units)
			if r == nil {
				return // a check failed: the engine failed closed
			}
			again = append(again, r)
		}
	}
	slices.Reverse(again) // oldest first: commits go in id order
	rebuilt := 0
	for _, s := range again {
		e.queueReplayed(s)
		rebuilt += len(s.content.units)
	}
	live, sealed := l.replayLive(sc)
	if l.replayPending != rebuilt+live || e.replayed != len(again)+sealed {
		e.broken("replay holds each unit it replayed once: %d pending, %d in %d rebuilt generations and %d sealed from live (%d queued), %d in live",
			l.replayPending, rebuilt, len(again), sealed, e.replayed, live)
		return
	}
	if !e.live.empty() {
		// Until the replayed units commit, their retries wait: commit soon.
		e.sealSoon()
	}
	e.checkHeld()
	e.checkQueue()
	l.log.Start()
	l.valveCancel = e.p.Timers.AfterFunc(l.cfg.PinnedMax/4+1, l.valve)
	e.pump()
}

// claim marks a generation's units as used (it needs no replay). A
// range's bounds are read from disk: each is bounded by its partition's
// scan before claim walks it — a seal names units logged before it in
// its partition, below the sequence the scan expects next — so a range
// past it (damage its CRC missed, or a bug) fails closed instead of
// walking up to 2⁶⁴ sequence numbers. false: the engine failed closed.
func (l *diskLog) claim(s *sealScan, units map[uint32]*partScan) bool {
	//engine:orderless — marks entries; the order does not matter.
	for part, rs := range s.ranges {
		ps := units[part]
		if ps == nil {
			continue
		}
		for _, r := range rs {
			if r.Lo > r.Hi || r.Hi >= ps.scan.NextSeq {
				l.e.broken("a seal's range names units logged before it in its partition: snapshot %s, partition %d, range %d-%d, next sequence %d",
					s.id, part, r.Lo, r.Hi, ps.scan.NextSeq)
				return false
			}
			for seq := r.Lo; seq <= r.Hi && seq >= r.Lo; seq++ {
				if u := ps.units[seq]; u != nil {
					u.used = true
				}
			}
		}
	}
	return true
}

// complete reports whether a generation can be rebuilt exactly: its seal
// is in every partition it names, none halted, every unit present and
// not claimed by a newer generation.
func (l *diskLog) complete(s *sealScan, units map[uint32]*partScan) bool {
	for part := range uint32(l.cfg.Partitions) {
		if s.mask&(1<<part) == 0 {
			continue
		}
		rs, ok := s.ranges[part]
		ps := units[part]
		if !ok || ps == nil || ps.p.Halted() != nil {
			return false
		}
		for _, r := range rs {
			if r.Hi < r.Lo {
				return false
			}
			for seq := r.Lo; seq <= r.Hi; seq++ {
				if u := ps.units[seq]; u == nil || u.used {
					return false
				}
			}
		}
	}
	return s.mask != 0 && s.mask>>l.cfg.Partitions == 0
}

// rebuild makes a complete generation a snapshot again, with its id,
// created_at and directory: the same body, the same compaction ids.
func (l *diskLog) rebuild(s *sealScan, units map[uint32]*partScan) *snapshot {
	e := l.e
	content := newBatchSet()
	content.gen = l.nextGen
	l.nextGen++
	for part := range uint32(l.cfg.Partitions) {
		for _, r := range s.ranges[part] {
			for seq := r.Lo; seq <= r.Hi; seq++ {
				us := units[part].units[seq]
				if us == nil || us.used {
					e.broken("a generation is rebuilt only from a complete seal, each unit once: snapshot %s, partition %d, sequence %d missing or used", s.id, part, seq)
					return nil
				}
				us.used = true
				l.replayUnit(us, part, content)
			}
		}
	}
	for _, seg := range s.segs {
		seg.Pin(content.gen, 0, e.now())
	}
	return &snapshot{id: s.id, dir: s.dir, content: content, created: s.created, replayed: true}
}

// replayUnit adds a logged unit to a batch set (a rebuilt generation or
// live). It is not committed yet: its entry was read back, and after an
// fsync error Linux may return bytes it never wrote (and never will), so
// a log entry proves nothing until its generation commits. Until then its
// keys are pending, a retry of it joins it and is answered at that
// commit, and the offsets view learns its offsets only then.
func (l *diskLog) replayUnit(us *unitScan, part uint32, into *batchSet) {
	if u, in, ok := l.decodeReplayed(us, part, into); ok {
		l.addReplayed(u, in, into)
	}
}

// decodeReplayed reads a logged unit back for into; false: the engine
// failed closed.
func (l *diskLog) decodeReplayed(us *unitScan, part uint32, into *batchSet) (*unit, Unit, bool) {
	e := l.e
	if us.rec.Seq == 0 || into.gen == 0 {
		// Every entry the log writes has a sequence number ≥ 1, and the
		// unit pins into's generation in its segment: 0 pins nothing.
		e.broken("a replayed unit has its sequence number and joins a generation: %s, sequence %d, generation %d", us.seg.Path, us.rec.Seq, into.gen)
		return nil, Unit{}, false
	}
	in, err := unitFromRecord(us.rec)
	if err != nil {
		// The entry passed its CRC, so this is a unit the engine accepted
		// and cannot read back: a bug, or damage the CRC missed.
		e.broken("a logged unit decodes: %s: %v", us.seg.Path, err)
		return nil, Unit{}, false
	}
	u := &unit{idem: in.IdempotencyKey, ns: in.Key.Namespace, bytes: unitBytes(in), since: e.now(), part: part, seq: us.rec.Seq, seg: us.seg, replayed: true}
	for _, b := range in.Batches {
		u.rows += b.NumRows()
	}
	for _, o := range in.Offsets {
		if !isIdemKey(o.Key) {
			u.offsets = append(u.offsets, o)
		}
	}
	return u, in, true
}

// addReplayed holds a replayed unit and adds it to into, pinning into's
// generation in its log segment.
func (l *diskLog) addReplayed(u *unit, in Unit, into *batchSet) {
	e := l.e
	e.holdReplayed(u)
	if err := into.add(u, in); err != nil { // takes the decoded batches' references
		e.failClosed(err)
		return
	}
	e.hold(u)
	u.seg.Pin(into.gen, u.seq, e.now())
	e.stats.WALReplayedUnits++
	l.replayPending++
}

// replayLive puts every unit no generation claimed into live, partition
// by partition in sequence order, and returns how many. A unit that
// would take live past a segment's limits (roomFor) finds live sealed
// first, as a replayed snapshot of this epoch (sealReplayed): a crash
// with the writer's queue full leaves more unsealed units in the log
// than one segment holds, and one live set of them all could never be
// sealed — the engine would fail closed at every start. sealed counts
// the snapshots sealed so.
func (l *diskLog) replayLive(sc *logScan) (n, sealed int) {
	e := l.e
	if !l.checkLiveGen() {
		return 0, 0
	}
	inSealed := 0
	for _, ps := range sc.parts {
		if ps.p.Halted() != nil {
			continue // frozen as found, for the operator: nothing of it is delivered
		}
		seqs := make([]uint64, 0, len(ps.units))
		//engine:orderless — collected, then sorted.
		for seq, u := range ps.units {
			if !u.used {
				seqs = append(seqs, seq)
			}
		}
		slices.Sort(seqs)
		for _, seq := range seqs {
			u, in, ok := l.decodeReplayed(ps.units[seq], ps.p.ID(), e.live)
			if !ok {
				return n, sealed
			}
			if !e.live.empty() && !e.roomFor(in, u.bytes) {
				inSealed += len(e.live.units)
				l.sealReplayed()
				sealed++
			}
			e.mark(MarkWALReplayedLive)
			e.startLive()
			l.addReplayed(u, in, e.live)
			n++
		}
	}
	if len(e.live.units)+inSealed != n {
		// replay found live empty; a unit in it twice would be stored twice.
		e.broken("replay puts each unclaimed unit into live, or a snapshot sealed from it, once: live holds %d units, %d sealed, %d replayed", len(e.live.units), inSealed, n)
		return n, sealed
	}
	if !e.checkQueue() { // live within its bound, before it is sealed
		return n, sealed
	}
	if !e.live.empty() {
		e.afterAppend()
	}
	return n, sealed
}

// sealReplayed seals live during replay into a replayed snapshot of this
// epoch — queued past QueueCapacity like the rebuilt generations — and
// starts live's next generation.
func (l *diskLog) sealReplayed() {
	e := l.e
	if e.live.empty() || e.live.gen == 0 || e.live.gen >= l.nextGen {
		// Sealed for a unit that does not fit beside what live holds:
		// an empty live takes any unit.
		e.broken("replay seals live only when it holds units, of a generation the log handed out: live %d units, generation %d, next %d",
			len(e.live.units), e.live.gen, l.nextGen)
		return
	}
	e.mark(MarkWALReplaySealed)
	s := e.newSnapshot(e.live)
	s.replayed = true // its units are replayed ones; counted in Engine.replayed
	e.live = newBatchSet()
	e.live.gen = l.nextGen
	l.nextGen++
	e.queueReplayed(s)
}

// logFlushed records a generation found committed as flushed, holding
// its segment (st, nil if not owned) back from reclaim until that is
// durable.
func (l *diskLog) logFlushed(s *sealScan, st *segState) {
	gen := l.nextGen
	l.nextGen++
	for _, seg := range s.segs {
		seg.Pin(gen, 0, l.e.now())
	}
	l.recordFlushed(s.id, s.mask, gen, st)
}

// ownedByID indexes the owned segments.
func (e *Engine) ownedByID() map[SnapshotID]*segState {
	out := make(map[SnapshotID]*segState, len(e.segs))
	for _, st := range e.segs {
		out[st.ID] = st
	}
	if len(out) != len(e.segs) {
		e.broken("owned segments have distinct ids: %d owned, %d ids", len(e.segs), len(out))
	}
	return out
}

func isIdemKey(k string) bool { return len(k) >= len(idemPrefix) && k[:len(idemPrefix)] == idemPrefix }

// replayedCommitted releases a replayed unit's pending keys (those it
// still holds: a newer replayed unit may hold an offset key) once its
// generation committed, and returns the retries that joined it: the unit
// is acked (again) to its source now, and counted so.
func (e *Engine) replayedCommitted(u *unit) []func(error) {
	if !u.replayed || u.seq == 0 {
		e.broken("only a replayed unit, logged, is released by its generation's commit: replayed %t, partition %d, sequence %d", u.replayed, u.part, u.seq)
		return nil
	}
	l, ok := e.dlog.(*diskLog)
	if !ok {
		e.broken("a replayed unit is the disk WAL's: unit %d of partition %d committed under %T", u.seq, u.part, e.dlog)
		return nil
	}
	l.replayPending--
	if l.replayPending < 0 {
		e.broken("replayPending ≥ 0: %d after unit %d of partition %d committed", l.replayPending, u.seq, u.part)
	}
	e.releaseKeys(u)
	if len(u.dones) > 0 {
		e.mark(MarkWALReplayJoined)
		e.countAcked(u)
	}
	dones := u.dones
	u.dones = nil
	return dones
}
