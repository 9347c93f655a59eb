package postgrescdc

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/engine/segment"
)

// snapshotReadOf is a read of table n as planSnapshot would make it, by
// key after key if keyed.
func snapshotReadOf(t *testing.T, e *pgEnv, n tableName, keyed bool, after int64, filter string) *snapshotRead {
	t.Helper()
	e.exec(fmt.Sprintf(`CREATE PUBLICATION %s_%s FOR TABLE %s`, e.pub, n.table, n))
	ct, err := readTable(context.Background(), e.db, e.pub+"_"+n.table, n)
	if err != nil {
		t.Fatal(err)
	}
	ct.rowFilter = filter
	sh, err := newShape(n, ct.columns, ct.keyNames)
	if err != nil {
		t.Fatal(err)
	}
	r := &snapshotRead{t: &table{catalogTable: ct}, sh: sh, keyCol: intKeyColumn(sh), keyed: keyed}
	if keyed {
		if r.last, err = snapshotKeyValue(after); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// The cursor of a read by key is served by the key's index, in its
// order — no sort — for each integer type, after a negative key too,
// and under a row filter; a table with another key is not one to read
// by key.
func TestSnapshotCursorUsesTheKeyIndex(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	for _, c := range []struct {
		typ    string
		after  int64
		filter string
	}{{"int2", -32768 + 1, ""}, {"int4", 0, ""}, {"int8", -1 << 40, ""}, {"int8", 500, "v <> 'x'"}} {
		name := fmt.Sprintf("k_%s_%d", c.typ, len(c.filter))
		e.exec(fmt.Sprintf(`CREATE TABLE %s (id %s PRIMARY KEY, v text)`, name, c.typ),
			fmt.Sprintf(`INSERT INTO %s SELECT g, 'v' FROM generate_series(-5000, 5000) g`, name), `ANALYZE `+name)
		r := snapshotReadOf(t, e, tableName{"public", name}, true, c.after, c.filter)
		if r.keyCol != 0 {
			t.Fatalf("%s: key column %d, want 0", name, r.keyCol)
		}
		q := r.cursorQuery()
		plan := explainCursor(t, e, q)
		if strings.Contains(plan, "Sort") || !strings.Contains(plan, "Index Scan using "+name+"_pkey") {
			t.Fatalf("%s: the cursor %s is planned\n%s\nwant an index scan of the key and no sort", name, q, plan)
		}
		if !strings.Contains(q, fmt.Sprintf(`"id" > '%d'::int8`, c.after)) || !strings.Contains(q, `ORDER BY "id"`) {
			t.Fatalf("%s: cursor %s", name, q)
		}
	}
	e.exec(`CREATE TABLE k_text (id text PRIMARY KEY)`, `CREATE TABLE k_pair (a int, b int, PRIMARY KEY (a, b))`)
	for _, n := range []string{"k_text", "k_pair"} {
		if r := snapshotReadOf(t, e, tableName{"public", n}, false, 0, ""); r.keyCol != -1 {
			t.Fatalf("%s: key column %d, want none", n, r.keyCol)
		}
	}
}

func explainCursor(t *testing.T, e *pgEnv, q string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := e.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	rows, err := tx.Query(ctx, "EXPLAIN DECLARE c NO SCROLL CURSOR FOR "+q)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", q, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// An int8 key outside what an offset holds makes the table's snapshot
// one to redo; keys at the scheme's very edges are read by key. Both
// land whole.
func TestSnapshotKeysAtTheSchemeEdges(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE beyond (id int8 PRIMARY KEY, v text)`, `CREATE TABLE edges (id int8 PRIMARY KEY, v text)`,
		`INSERT INTO beyond SELECT g, 'v' FROM generate_series(1, 300) g`,
		fmt.Sprintf(`INSERT INTO beyond VALUES (%d, 'far')`, int64(snapshotKeyMax)+1),
		`INSERT INTO edges SELECT g, 'v' FROM generate_series(1, 300) g`,
		fmt.Sprintf(`INSERT INTO edges VALUES (%d, 'low'), (%d, 'high')`, int64(snapshotKeyMin), int64(snapshotKeyMax)))
	tables := []string{"public.beyond", "public.edges"}
	l := newLake(t)
	h := l.start(t)
	cfg := e.config(tables...)
	cfg.Logger = quietLogger(t)
	r, _ := startSource(t, cfg, h)
	r.await(t, 15*time.Second, "both snapshots", func() bool { return r.src.Stats().SnapshotRows == 301+302 })
	checkLake(t, e, l, tables, 0)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	view, err := h.Offsets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if v := snapshotOffset(t, view, e, "public.beyond"); v&snapshotDone == 0 || v&snapshotKeyed != 0 || (v&^snapshotDone)>>32 != 1 {
		t.Fatalf("beyond: snapshot offset %#x, want redo attempt 1, done", v)
	}
	checkKeyedOffset(t, snapshotOffset(t, view, e, "public.edges"), snapshotKeyMax, true)
}

// A snapshot cut short by key cannot resume once the table's key is not
// one integer column: Run fails closed naming the table, the offset and
// the key, and snapshots nothing.
func TestSnapshotByKeyRefusesAnotherKey(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE words (id text PRIMARY KEY, v text)`, `INSERT INTO words VALUES ('a', 'v')`)
	// The slot the offsets were made with.
	e.exec(fmt.Sprintf(`SELECT pg_create_logical_replication_slot('%s', 'pgoutput')`, e.slot))
	l := newLake(t)
	h := l.start(t)
	cfg := e.config("public.words")
	cfg.Logger = quietLogger(t)
	src, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := snapshotKeyValue(500)
	offsets := segment.Offsets{{Key: snapshotKey(e.slot, tableName{"public", "words"}), Value: v}}
	rec := &recorder{}
	wantErr(t, runErr(t, run(t, src, rec.wrap(h.Ingest), offsets)), ErrSetup,
		"public.words", fmt.Sprintf("%#x", v), "(id)", "new slot name")
	if n := len(rec.ackedUnits()); n != 0 {
		t.Fatalf("%d units acked", n)
	}
}
