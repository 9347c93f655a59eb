package postgrescdc

import (
	"context"
	"fmt"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// snapshot reads every table whose snapshot is not done, one at a time.
// It runs after the slot exists and before streaming starts, so nothing
// is confirmed to the slot before every snapshot is acked.
func (sess *session) snapshot(ctx context.Context) error {
	for _, t := range sess.tables {
		if v, _ := sess.src.pos.Get(t.snapKey); v&snapshotDone != 0 {
			continue
		}
		if err := sess.snapshotTable(ctx, t); err != nil {
			return fmt.Errorf("snapshot of %s: %w", t.name, err)
		}
	}
	return nil
}

// snapshotTable reads t in one REPEATABLE READ transaction through a
// cursor, ChunkRows rows a fetch, and ingests the rows as inserts of
// order 0 — below every change the stream carries, so a row the stream
// has touched keeps the stream's version — in units of whole fetches:
// by key, resuming after the recovered key, or redone whole (position.go,
// planSnapshot). The last unit marks the snapshot done; an empty table's
// is a unit of no rows. With HostOffsets, the first unit of each table
// in a Run settles the host's offset first (settle).
func (sess *session) snapshotTable(ctx context.Context, t *table) (err error) {
	s := sess.src
	sh, err := newShape(t.name, t.columns, t.keyNames)
	if err != nil {
		return err
	}
	if _, err := sess.conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return fmt.Errorf("begin the snapshot transaction: %w", err)
	}
	defer func() {
		if _, rbErr := sess.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err == nil && rbErr != nil {
			err = fmt.Errorf("end the snapshot transaction: %w", rbErr)
		}
	}()
	r, err := sess.planSnapshot(ctx, t, sh)
	if err != nil {
		return err
	}
	if s.cfg.HostOffsets != nil && !s.settled[t.snapKey] {
		if done, err := r.settle(ctx); err != nil || done {
			return err
		}
	}
	next, err := r.fetch(ctx, s.cfg.ChunkRows)
	if err != nil {
		return err
	}
	for {
		var unit []*chunk
		unit, next, err = r.fillUnit(ctx, next)
		if err != nil {
			return err
		}
		done := next.rows() == 0
		if err := r.submit(ctx, unit, done); err != nil {
			releaseChunks([]*chunk{next})
			return err
		}
		if done {
			releaseChunks([]*chunk{next})
			s.cfg.Logger.Info("postgrescdc: snapshot done", "slot", s.cfg.Slot, "table", t.name.String(), "units", r.units)
			return nil
		}
	}
}

// fillUnit takes fetches, starting with next, into one unit until it is
// full or the table is read; it returns the unit and the fetch after it
// (of no rows when the table is read).
func (r *snapshotRead) fillUnit(ctx context.Context, next *chunk) ([]*chunk, *chunk, error) {
	cfg := r.sess.src.cfg
	unit := []*chunk{next}
	rows, bytes := next.rows(), next.bytes
	for !r.exhausted {
		var err error
		if next, err = r.fetch(ctx, cfg.ChunkRows); err != nil {
			releaseChunks(unit)
			return nil, nil, err
		}
		if next.rows() == 0 || rows+next.rows() > cfg.UnitRows || bytes+next.bytes > cfg.UnitBytes {
			return unit, next, nil
		}
		unit = append(unit, next)
		rows, bytes = rows+next.rows(), bytes+next.bytes
	}
	// A short fetch is the last: what follows is an empty one.
	empty, err := r.fetch(ctx, 0)
	return unit, empty, err
}

// settle submits the first unit of t's snapshot in this Run and then
// reads the host's offset for it, which is final for whatever the host
// replayed from its log (a unit is refused while a replayed unit of its
// key is pending): after a crash the view Run was given may lack units
// the host replays, and this snapshot, planned from that view, would
// deliver their rows again (by key) or number its attempt as theirs and
// be dropped as covered by them (redo). By key, the first unit is one
// row: dropped as covered if a replayed unit holds its key, stored if
// none does; the snapshot then resumes after the host's key. Redo, it
// is a unit of no rows; if the host's value is above it, the snapshot
// becomes the attempt after the host's. It reports whether the host
// holds the snapshot done.
func (r *snapshotRead) settle(ctx context.Context) (bool, error) {
	s, t := r.sess.src, r.t
	var first *chunk
	var err error
	if r.keyed {
		first, err = r.fetch(ctx, 1)
	} else {
		first, err = buildChunk(s.cfg, t.name, r.sh, nil, 0)
	}
	if err != nil {
		return false, err
	}
	done := r.keyed && r.exhausted // nothing after the resume point
	if err := r.submit(ctx, []*chunk{first}, done); err != nil {
		return false, err
	}
	s.settled[t.snapKey] = true
	if done {
		return true, nil
	}
	acked, _ := s.pos.Get(t.snapKey)
	host, err := s.hostOffset(ctx, t.snapKey)
	if err != nil {
		return false, err
	}
	switch {
	case host < acked:
		return false, invariantf("table %s: the host's snapshot offset %#x is below the unit it acked at %#x", t.name, host, acked)
	case host == acked:
		return false, nil
	}
	s.pos = s.pos.Advance(t.snapKey, host) // the host's own view
	if host&snapshotDone != 0 {
		s.cfg.Logger.Info("postgrescdc: the host holds the snapshot done", "slot", s.cfg.Slot, "table", t.name.String(), "offset", host)
		return true, nil
	}
	if err := r.resumeFrom(ctx, host); err != nil {
		return false, err
	}
	s.cfg.Logger.Info("postgrescdc: snapshot resumes from the host's replayed units", "slot", s.cfg.Slot, "table", t.name.String(),
		"by_key", r.keyed, "after", r.after(), "attempt", r.attempt)
	return false, nil
}

// submit ingests a unit of the snapshot (its chunks' batches are
// released, whatever the outcome) and records its offset once acked.
func (r *snapshotRead) submit(ctx context.Context, unit []*chunk, done bool) error {
	s, t := r.sess.src, r.t
	value, err := r.unitValue(unit, done)
	if err != nil {
		releaseChunks(unit)
		return err
	}
	u := s.unitOf(t, t.snapKey, unit)
	u.Offsets = segment.Offsets{{Key: t.snapKey, Value: value}}
	if _, ok := s.pos.Get(chunkingKey(s.cfg.Slot)); !ok {
		u = s.withChunking(u)
	}
	err = s.submit(ctx, r.sess.ingest, u)
	releaseUnit(u)
	if err != nil {
		return err
	}
	s.acked(u)
	s.stats.snapshotRows.Add(uint64(len(u.Sidecar.Rows)))
	return nil
}

// unitValue is the offset of the next unit, holding unit's chunks: by
// key, the last chunk's value (its last row's key, or where the read
// resumed); redo, the attempt's next unit number.
func (r *snapshotRead) unitValue(unit []*chunk, done bool) (uint64, error) {
	r.units++
	var v uint64
	if r.keyed {
		v = unit[len(unit)-1].value
		if v&snapshotKeyed == 0 || v&snapshotDone != 0 {
			return 0, invariantf("table %s: a snapshot unit by key at %#x", r.t.name, v)
		}
		if done {
			v |= snapshotDone
		}
		return v, nil
	}
	r.n++
	return snapshotValue(r.attempt, r.n, done)
}

func releaseChunks(cs []*chunk) {
	for _, c := range cs {
		c.batch.Release()
	}
}

// withChunking adds the chunking offset to u: the first unit a source
// has acked records the chunk cut its positions are made with.
// REQUIRES: the offsets do not hold it, and no other unit carrying it
// is in flight.
func (s *Source) withChunking(u engine.Unit) engine.Unit {
	o := segment.Offset{Key: chunkingKey(s.cfg.Slot), Value: chunkingValue(s.cfg.ChunkRows, s.cfg.ChunkBytes)}
	u.Offsets = withOffset(u.Offsets, o)
	return u
}

// acked advances the source's offsets by an acked unit's, each of which
// must be above the source's: a unit never carries an offset the source
// had (positions at or below it are dropped, a snapshot unit is above
// the last — a later key, a later unit or attempt —, the chunking offset
// is added only when absent).
func (s *Source) acked(u engine.Unit) {
	for _, o := range u.Offsets {
		if cur, ok := s.pos.Get(o.Key); ok && o.Value <= cur {
			panic(fmt.Sprintf("postgrescdc: offset %s acked at %d, not above %d", o.Key, o.Value, cur))
		}
		s.pos = s.pos.Advance(o.Key, o.Value)
	}
}
