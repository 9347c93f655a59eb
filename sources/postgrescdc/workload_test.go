package postgrescdc

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The workload's tables: items has a one-column key and a column of
// every mapped type; events a two-column key declared out of column
// order; empty_t stays empty (its snapshot is a unit of no rows).
const workloadSchema = `
CREATE TABLE items (
	id int8 PRIMARY KEY, name text, qty int4, price numeric(12,2), tags jsonb, data bytea,
	seen timestamptz, day date, ok bool, ratio float8, small int2, f4 real, ts timestamp, note varchar(20));
CREATE TABLE events (tenant int4, seq int8, payload text, PRIMARY KEY (seq, tenant));
CREATE TABLE empty_t (id int4 PRIMARY KEY, v text);
INSERT INTO items SELECT g, 'item ' || g, g % 50, g * 1.25, jsonb_build_object('g', g), int8send(g),
	'2024-01-01'::timestamptz + g * interval '1 minute', '2024-01-01'::date + g, g % 2 = 0, g / 7.0, g % 100,
	g / 3.0, '2020-02-29 12:00'::timestamp + g * interval '1 second', NULL
	FROM generate_series(1, 1000) g;
INSERT INTO events SELECT g % 5, g, 'event ' || g FROM generate_series(1, 100) g;`

// workloadTables are the tables the workload writes, as configured.
var workloadTables = []string{"public.items", "public.events", "public.empty_t"}

// workload makes changes and counts the change rows the stream must
// carry for them: one per row an insert, update or delete touches, two
// per row whose key an update changes.
type workload struct {
	t       *testing.T
	conn    *pgx.Conn
	rng     *rand.Rand
	changes int64
	nextID  int64 // items ids above 1000 the workload inserted
	nextSeq int64
	// err is the first failure; then the workload does nothing more. A
	// workload may run on a goroutine of its own, which must not end
	// the test: the test reads err once the workload is done.
	err error
}

// envSeed fixes the workload's seed: a failing run logs the command
// that draws the same workload again.
const envSeed = "SKIPPRD_PGCDC_SEED"

func newWorkload(t *testing.T, e *pgEnv) *workload {
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envSeed); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", envSeed, v, err)
		}
		seed = n
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the same workload again: %s=%d go test ./sources/postgrescdc/ -run '^%s$'", envSeed, seed, t.Name())
		}
	})
	return &workload{t: t, conn: e.db, rng: rand.New(rand.NewPCG(seed, 7)), nextID: 1000, nextSeq: 100}
}

// stmt is one statement and how many change rows each row it touches makes.
type stmt struct {
	sql    string
	factor int64
}

func ch(sql string, args ...any) stmt { return stmt{fmt.Sprintf(sql, args...), 1} }

// tx runs stmts in one transaction and counts their change rows.
func (w *workload) tx(stmts ...stmt) {
	if w.err != nil {
		return
	}
	ctx := context.Background()
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		w.err = fmt.Errorf("begin: %w", err)
		return
	}
	var n int64
	for _, s := range stmts {
		tag, err := tx.Exec(ctx, s.sql)
		if err != nil {
			_ = tx.Rollback(ctx)
			w.err = fmt.Errorf("%s: %w", s.sql, err)
			return
		}
		n += tag.RowsAffected() * s.factor
	}
	if err := tx.Commit(ctx); err != nil {
		w.err = fmt.Errorf("commit: %w", err)
		return
	}
	w.changes += n
}

// check fails the test if the workload failed.
func (w *workload) check() {
	w.t.Helper()
	if w.err != nil {
		w.t.Fatalf("workload: %v", w.err)
	}
}

func (w *workload) insertItems(n int) stmt {
	first := w.nextID + 1
	w.nextID += int64(n)
	return ch(`INSERT INTO items SELECT g, 'new ' || g, 1, 9.99, '{"new": true}', '\xdead', now(), current_date, true, 0.25, 1, 1.5, now(), 'v'
		FROM generate_series(%d, %d) g`, first, w.nextID)
}

func (w *workload) insertEvents(n int) stmt {
	first := w.nextSeq + 1
	w.nextSeq += int64(n)
	return ch(`INSERT INTO events SELECT g %% 5, g, repeat('p', g %% 40) FROM generate_series(%d, %d) g`, first, w.nextSeq)
}

// fixed runs the cases every run must get right.
func (w *workload) fixed() {
	w.tx(w.insertItems(10))
	// Several changes to one row in one transaction.
	w.tx(ch(`UPDATE items SET qty = qty + 1 WHERE id = 5`), ch(`UPDATE items SET qty = qty + 1 WHERE id = 5`),
		ch(`UPDATE items SET name = 'renamed', tags = NULL WHERE id = 5`))
	// A delete, then an insert of the same key, in one transaction.
	w.tx(ch(`DELETE FROM items WHERE id = 6`),
		ch(`INSERT INTO items (id, name, qty) VALUES (6, 'reborn', 66)`))
	// Several tables in one transaction.
	w.tx(w.insertEvents(3), ch(`UPDATE items SET ok = NOT ok WHERE id BETWEEN 10 AND 19`), ch(`DELETE FROM events WHERE seq = 7`))
	// A key change: a delete of the old key and an insert of the new.
	w.tx(stmt{`UPDATE items SET id = id + 1000000 WHERE id IN (8, 9)`, 2})
	// A large transaction: many chunks of both tables.
	w.tx(w.insertEvents(1500), ch(`UPDATE items SET price = price + 1 WHERE id <= 700`), ch(`DELETE FROM events WHERE seq BETWEEN 20 AND 60`))
	// Values at the edges of their types.
	w.tx(ch(`UPDATE items SET seen = '0044-03-15 12:00:00.5 BC', day = '0001-01-01 BC', ratio = 'NaN', f4 = '-Infinity',
		small = -32768, name = E'tab\there ''quoted'' ü', data = '', tags = '[1, "two", null]' WHERE id = 11`))
	// A row that goes and comes back across transactions.
	w.tx(ch(`DELETE FROM items WHERE id = 12`))
	w.tx(ch(`INSERT INTO items (id, name) VALUES (12, 'back')`))
}

// random runs n transactions of 1 to 4 random statements.
func (w *workload) random(n int) {
	for range n {
		stmts := make([]stmt, 1+w.rng.IntN(4))
		for i := range stmts {
			stmts[i] = w.randomStmt()
		}
		w.tx(stmts...)
	}
}

func (w *workload) randomStmt() stmt {
	id := 1 + w.rng.Int64N(w.nextID)
	switch w.rng.IntN(6) {
	case 0:
		return w.insertItems(1 + w.rng.IntN(3))
	case 1:
		return w.insertEvents(1 + w.rng.IntN(5))
	case 2:
		return ch(`DELETE FROM items WHERE id = %d`, id)
	case 3:
		return ch(`DELETE FROM events WHERE seq = %d`, 1+w.rng.Int64N(w.nextSeq))
	default:
		return ch(`UPDATE items SET qty = qty + 1, note = 'r%d' WHERE id BETWEEN %d AND %d`, w.rng.IntN(1000), id, id+w.rng.Int64N(4))
	}
}

// checkLake waits until the lake holds, for every one of tables, the
// source's rows (applied with the sink's rule) and each of the
// wantChanges stream changes exactly once; it fails with the difference
// if not.
func checkLake(t *testing.T, e *pgEnv, l *lake, tables []string, wantChanges int64) {
	t.Helper()
	want := map[string]map[string]string{}
	for _, name := range tables {
		want[name] = sourceState(t, e, name)
	}
	var diff string
	deadline := time.Now().Add(20 * time.Second)
	for {
		diff = ""
		var changes int64
		for _, name := range tables {
			ns := strings.TrimPrefix(name, "public.")
			got, seen := l.state(t, ns)
			if d := diffStates(want[name], got); d != "" {
				diff += fmt.Sprintf("\ntable %s:\n%s", name, d)
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("table %s: change %q at %d is in the lake %d times", name, id.identity, id.order, n)
				}
			}
			changes += int64(len(seen))
		}
		if diff == "" && changes == wantChanges {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the lake holds %d of %d changes; differences from the source:%s", changes, wantChanges, diff)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// checkAckedOnce fails if a stream change (order > 0) is in two acked units.
func checkAckedOnce(t *testing.T, recs ...*recorder) int {
	t.Helper()
	seen := map[ackedRow]bool{}
	n := 0
	for _, r := range recs {
		for _, a := range r.ackedRows() {
			if a.order == 0 {
				continue
			}
			a.kind = 0 // a change is its table, identity and order
			if seen[a] {
				t.Fatalf("change %q of %s at %d acked twice", a.identity, a.ns, a.order)
			}
			seen[a] = true
			n++
		}
	}
	return n
}
