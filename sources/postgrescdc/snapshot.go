package postgrescdc

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// snapshotCursor is the cursor a snapshot reads through.
const snapshotCursor = "pgcdc_snapshot"

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
// has touched keeps the stream's version — in units of whole fetches.
// The last unit marks the snapshot done; an empty table's is a unit of
// no rows.
func (sess *session) snapshotTable(ctx context.Context, t *table) (err error) {
	s := sess.src
	recovered, _ := s.pos.Get(t.snapKey)
	attempt, err := nextSnapshotAttempt(recovered)
	if err != nil {
		return err
	}
	sh, err := newShape(t.name, t.columns, t.keyNames)
	if err != nil {
		return err
	}
	s.cfg.Logger.Info("postgrescdc: snapshot starts", "slot", s.cfg.Slot, "table", t.name.String(), "attempt", attempt)
	if err := sess.openCursor(ctx, t); err != nil {
		return err
	}
	defer func() {
		if _, rbErr := sess.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); err == nil && rbErr != nil {
			err = fmt.Errorf("end the snapshot transaction: %w", rbErr)
		}
	}()
	next, err := sess.fetch(ctx, t, sh)
	if err != nil {
		return err
	}
	for n := uint64(1); ; n++ {
		var unit []*chunk
		unit, next, err = sess.fillUnit(ctx, t, sh, next)
		if err != nil {
			return err
		}
		done := next.rows() == 0
		if err := sess.submitSnapshot(ctx, t, unit, attempt, n, done); err != nil {
			return err
		}
		if done {
			s.cfg.Logger.Info("postgrescdc: snapshot done", "slot", s.cfg.Slot, "table", t.name.String(), "units", n)
			return nil
		}
	}
}

// fillUnit takes fetches, starting with next, into one unit until it is
// full or the table is read; it returns the unit and the fetch after it
// (of no rows when the table is read).
func (sess *session) fillUnit(ctx context.Context, t *table, sh *shape, next *chunk) ([]*chunk, *chunk, error) {
	cfg := sess.src.cfg
	unit := []*chunk{next}
	rows, bytes := next.rows(), next.bytes
	for next.rows() == cfg.ChunkRows {
		var err error
		if next, err = sess.fetch(ctx, t, sh); err != nil {
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
	empty, err := buildChunk(cfg, t.name, sh, nil, 0)
	return unit, empty, err
}

// openCursor begins the snapshot transaction and declares its cursor
// over the published columns and rows (the publication's row filter).
// ONLY: the stream reports each partition or child table as itself.
func (sess *session) openCursor(ctx context.Context, t *table) error {
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = pgx.Identifier{c.name}.Sanitize()
	}
	q := "DECLARE " + snapshotCursor + " NO SCROLL CURSOR FOR SELECT " + strings.Join(cols, ", ") +
		" FROM ONLY " + pgx.Identifier{t.name.schema, t.name.table}.Sanitize()
	if t.rowFilter != "" {
		q += " WHERE (" + t.rowFilter + ")"
	}
	if _, err := sess.conn.Exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return fmt.Errorf("begin the snapshot transaction: %w", err)
	}
	if _, err := sess.conn.Exec(ctx, q); err != nil {
		return fmt.Errorf("declare the snapshot cursor: %w", err)
	}
	return nil
}

// fetch reads the next ChunkRows rows in text form (the simple query
// protocol) into a chunk of inserts of order 0.
func (sess *session) fetch(ctx context.Context, t *table, sh *shape) (*chunk, error) {
	cfg := sess.src.cfg
	q := fmt.Sprintf("FETCH FORWARD %d FROM %s", cfg.ChunkRows, snapshotCursor)
	results, err := sess.conn.PgConn().Exec(ctx, q).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("fetch: %w", err)
	}
	if len(results) != 1 {
		return nil, fmt.Errorf("fetch: %d results", len(results))
	}
	rows := make([]row, len(results[0].Rows))
	for i, values := range results[0].Rows {
		if len(values) != len(sh.names) {
			return nil, invariantf("table %s: a snapshot row of %d values for %d columns", t.name, len(values), len(sh.names))
		}
		id, err := sh.identity(t.name, values)
		if err != nil {
			return nil, err
		}
		rows[i] = row{cdc: segment.CDCRow{Kind: segment.Insert, Identity: id}, values: values}
	}
	return buildChunk(cfg, t.name, sh, rows, 0)
}

// buildChunk turns rows of one shape into a chunk at value.
func buildChunk(cfg Config, name tableName, sh *shape, rows []row, value uint64) (*chunk, error) {
	c := &chunk{value: value, shape: sh}
	for _, r := range rows {
		c.bytes += r.bytes()
	}
	var err error
	c.batch, c.cdc, err = buildBatch(cfg.Allocator, name, sh, rows)
	return c, err
}

// submitSnapshot ingests unit n of attempt (its chunks' batches are
// released, whatever the outcome) and records its offset once acked.
func (sess *session) submitSnapshot(ctx context.Context, t *table, unit []*chunk, attempt, n uint64, done bool) error {
	s := sess.src
	value, err := snapshotValue(attempt, n, done)
	if err != nil {
		releaseChunks(unit)
		return err
	}
	u := s.unitOf(t, t.snapKey, unit)
	u.Offsets = segment.Offsets{{Key: t.snapKey, Value: value}}
	if _, ok := s.pos.Get(chunkingKey(s.cfg.Slot)); !ok {
		u = s.withChunking(u)
	}
	err = s.submit(ctx, sess.ingest, u)
	releaseUnit(u)
	if err != nil {
		return err
	}
	s.acked(u)
	s.stats.snapshotRows.Add(uint64(len(u.Sidecar.Rows)))
	return nil
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
// had (positions at or below it are dropped, a snapshot attempt is above
// the last, the chunking offset is added only when absent).
func (s *Source) acked(u engine.Unit) {
	for _, o := range u.Offsets {
		if cur, ok := s.pos.Get(o.Key); ok && o.Value <= cur {
			panic(fmt.Sprintf("postgrescdc: offset %s acked at %d, not above %d", o.Key, o.Value, cur))
		}
		s.pos = s.pos.Advance(o.Key, o.Value)
	}
}
