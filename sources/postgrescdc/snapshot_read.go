package postgrescdc

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine/segment"
)

// snapshotCursor is the cursor a snapshot reads through.
const snapshotCursor = "pgcdc_snapshot"

// snapshotRead is one table's snapshot being read, in one transaction.
type snapshotRead struct {
	sess *session
	t    *table
	sh   *shape
	// keyCol: the shape's index of the table's one integer key column,
	// -1 if the key is not one (the table can only be redone).
	keyCol int
	// keyed: read by key (position.go). last is the by-key value of the
	// last row read, or where the read resumed; every row read is above
	// it (fetch checks).
	keyed bool
	last  uint64
	// Redo: the attempt, and its units so far.
	attempt, n uint64
	// units: the units submitted; exhausted: a fetch returned fewer rows
	// than it asked for (the table is read).
	units     int
	exhausted bool
}

// planSnapshot decides how t is read, from its recovered snapshot
// offset, and declares the cursor: after the recovered key if it is by
// key; from the start by key if the table has one integer key all of
// whose values the scheme holds; else redone whole as the next attempt.
// REQUIRES: the snapshot transaction is open.
func (sess *session) planSnapshot(ctx context.Context, t *table, sh *shape) (*snapshotRead, error) {
	r := &snapshotRead{sess: sess, t: t, sh: sh, keyCol: intKeyColumn(sh)}
	recovered, _ := sess.src.pos.Get(t.snapKey)
	if _, keyed := snapshotKeyOf(recovered); !keyed && r.keyCol >= 0 {
		ok, err := r.keysFit(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			recovered = snapshotBefore // a first snapshot by key; above every redo value
		}
	}
	if err := r.resumeFrom(ctx, recovered); err != nil {
		return nil, err
	}
	sess.src.cfg.Logger.Info("postgrescdc: snapshot starts", "slot", sess.src.cfg.Slot, "table", t.name.String(),
		"by_key", r.keyed, "after", r.after(), "attempt", r.attempt)
	return r, nil
}

// resumeFrom sets the read to go on from the snapshot offset v (not
// done): by key, after v's key, the cursor declared anew (the same
// transaction, so the same snapshot); redo, as the attempt after v's,
// the cursor declared if none is.
func (r *snapshotRead) resumeFrom(ctx context.Context, v uint64) error {
	t := r.t
	if _, keyed := snapshotKeyOf(v); keyed {
		if r.keyCol < 0 {
			return setupf("table %s: its snapshot was cut short by key (offset %#x), but its key (%s) is no longer one int2, int4 or int8 column; "+
				"the snapshot cannot resume: capture with a new slot name (every table is snapshotted again)", t.name, v, strings.Join(r.sh.keyNames(), ", "))
		}
		redeclare := r.keyed || r.units > 0
		r.keyed, r.last = true, v
		return r.declare(ctx, redeclare)
	}
	if r.keyed {
		return invariantf("table %s: read by key, then offered the redo offset %#x", t.name, v)
	}
	a, err := nextSnapshotAttempt(v)
	if err != nil {
		return fmt.Errorf("table %s: %w", t.name, err)
	}
	r.attempt, r.n = a, 0
	if r.units > 0 {
		return nil // the cursor is open, and has not been read
	}
	return r.declare(ctx, false)
}

// after is the key a by-key read resumes after.
func (r *snapshotRead) after() int64 {
	k, _ := snapshotKeyOf(r.last)
	return k
}

// intKeyColumn returns the index of sh's key column if the key is one
// int2, int4 or int8 column, else -1.
func intKeyColumn(sh *shape) int {
	if len(sh.key) != 1 {
		return -1
	}
	switch sh.kinds[sh.key[0]] {
	case kindInt16, kindInt32, kindInt64:
		return sh.key[0]
	}
	return -1
}

// keysFit reports whether every key the snapshot reads lies within the
// by-key scheme: always for int2 and int4; for int8, the least and
// greatest (the key's index gives them at once; under a row filter they
// may take a scan), read in the snapshot's transaction — its first
// statement, so the cursor reads the very rows they bound. An empty
// table fits.
func (r *snapshotRead) keysFit(ctx context.Context) (bool, error) {
	if r.sh.kinds[r.keyCol] != kindInt64 {
		return true, nil
	}
	key := pgx.Identifier{r.sh.names[r.keyCol]}.Sanitize()
	q := "SELECT min(" + key + ")::int8, max(" + key + ")::int8 FROM ONLY " + pgx.Identifier{r.t.name.schema, r.t.name.table}.Sanitize()
	if r.t.rowFilter != "" {
		q += " WHERE (" + r.t.rowFilter + ")"
	}
	var lo, hi *int64
	if err := r.sess.conn.QueryRow(ctx, q).Scan(&lo, &hi); err != nil {
		return false, fmt.Errorf("read the least and greatest key: %w", err)
	}
	fits := lo == nil || (*lo >= snapshotKeyMin && *hi <= snapshotKeyMax)
	if !fits {
		r.sess.src.cfg.Logger.Warn("postgrescdc: a key lies outside what a snapshot offset holds; the snapshot is redone whole if cut short",
			"slot", r.sess.src.cfg.Slot, "table", r.t.name.String(), "least", *lo, "greatest", *hi)
	}
	return fits, nil
}

// declare declares the cursor over cursorQuery, closing the one open
// first if again.
func (r *snapshotRead) declare(ctx context.Context, again bool) error {
	if again {
		if _, err := r.sess.conn.Exec(ctx, "CLOSE "+snapshotCursor); err != nil {
			return fmt.Errorf("close the snapshot cursor: %w", err)
		}
	}
	if _, err := r.sess.conn.Exec(ctx, "DECLARE "+snapshotCursor+" NO SCROLL CURSOR FOR "+r.cursorQuery()); err != nil {
		return fmt.Errorf("declare the snapshot cursor: %w", err)
	}
	return nil
}

// cursorQuery selects the published columns and rows (the publication's
// row filter); by key, in key order — the key's index serves it, no
// sort —, after r.last's key and up to snapshotKeyMax: a row above was
// not in the snapshot that chose to read by key, which checked that
// every key fit, so the stream carries it. ONLY: the stream reports each
// partition or child table as itself.
func (r *snapshotRead) cursorQuery() string {
	t := r.t
	cols := make([]string, len(t.columns))
	for i, c := range t.columns {
		cols[i] = pgx.Identifier{c.name}.Sanitize()
	}
	q := "SELECT " + strings.Join(cols, ", ") + " FROM ONLY " + pgx.Identifier{t.name.schema, t.name.table}.Sanitize()
	var where []string
	if t.rowFilter != "" {
		where = append(where, "("+t.rowFilter+")")
	}
	key := ""
	if r.keyed {
		// Literals from int64s, quoted and cast: a negative one is then
		// not read as numeric (which the key's index would not serve).
		key = pgx.Identifier{r.sh.names[r.keyCol]}.Sanitize()
		where = append(where, fmt.Sprintf("%s > '%d'::int8", key, r.after()), fmt.Sprintf("%s <= '%d'::int8", key, int64(snapshotKeyMax)))
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if r.keyed {
		q += " ORDER BY " + key
	}
	return q
}

// fetch reads the next n rows (none for n = 0) in text form (the simple
// query protocol) into a chunk of inserts of order 0. By key, each row's
// key must be above the last's, and the chunk's value is its last row's
// (r.last if it has none).
func (r *snapshotRead) fetch(ctx context.Context, n int) (*chunk, error) {
	cfg, t, sh := r.sess.src.cfg, r.t, r.sh
	var raw [][][]byte
	if n > 0 {
		results, err := r.sess.conn.PgConn().Exec(ctx, fmt.Sprintf("FETCH FORWARD %d FROM %s", n, snapshotCursor)).ReadAll()
		if err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		if len(results) != 1 {
			return nil, fmt.Errorf("fetch: %d results", len(results))
		}
		raw = results[0].Rows
	}
	r.exhausted = r.exhausted || len(raw) < n
	rows := make([]row, len(raw))
	for i, values := range raw {
		if len(values) != len(sh.names) {
			return nil, invariantf("table %s: a snapshot row of %d values for %d columns", t.name, len(values), len(sh.names))
		}
		id, err := sh.identity(t.name, values)
		if err != nil {
			return nil, err
		}
		if err := r.advance(values); err != nil {
			return nil, err
		}
		rows[i] = row{cdc: segment.CDCRow{Kind: segment.Insert, Identity: id}, values: values}
	}
	value := uint64(0)
	if r.keyed {
		value = r.last
	}
	return buildChunk(cfg, t.name, sh, rows, value)
}

// advance moves r.last to a row's key when reading by key, checking the
// cursor's order: each key above the one before, and within the scheme.
func (r *snapshotRead) advance(values [][]byte) error {
	if !r.keyed {
		return nil
	}
	text := values[r.keyCol]
	k, err := strconv.ParseInt(string(text), 10, 64)
	if err != nil {
		return invariantf("table %s: snapshot key %q of column %q is not an integer: %v", r.t.name, text, r.sh.names[r.keyCol], err)
	}
	if prev := r.after(); k <= prev {
		return invariantf("table %s: snapshot key %d read after key %d: the cursor is not in key order", r.t.name, k, prev)
	}
	v, err := snapshotKeyValue(k)
	if err != nil {
		return fmt.Errorf("table %s: %w", r.t.name, err)
	}
	r.last = v
	return nil
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
