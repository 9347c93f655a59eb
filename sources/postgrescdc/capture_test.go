package postgrescdc

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/storage"
)

// startSource builds a source for cfg and runs it against h through a
// new recorder.
func startSource(t *testing.T, cfg Config, h *storage.Host) (*running, *recorder) {
	t.Helper()
	rec := &recorder{}
	return startOn(t, cfg, h, rec.wrap(h.Ingest)), rec
}

// The whole path on the real server and a real host: the snapshot of
// three tables (one empty) in several units, then a workload of inserts,
// updates and deletes — several changes to one row in a transaction, a
// delete and re-insert of one key, a multi-table transaction, a key
// change, a transaction of many chunks, values at their types' edges —
// lands in the sink such that applying its CDC rows with the Postgres
// sink's rule gives the source tables row for row, each change once.
// The snapshot is marked done for all three tables, so a second run
// snapshots nothing and has nothing to skip.
func TestCaptureWorkload(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(workloadSchema)
	l := newLake(t)
	h := l.start(t)
	cfg := e.config(workloadTables...)
	cfg.Logger = quietLogger(t)
	r, rec := startSource(t, cfg, h)
	waitFor(t, 15*time.Second, "the snapshot", func() bool { return r.src.Stats().SnapshotRows == 1100 })

	w := newWorkload(t, e)
	w.fixed()
	w.random(150)
	w.check()
	waitFor(t, 20*time.Second, "every change acked", func() bool { return int64(r.src.Stats().Changes) == w.changes })
	if err := r.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if n := checkAckedOnce(t, rec); int64(n) != w.changes {
		t.Fatalf("%d distinct changes acked, the workload made %d", n, w.changes)
	}
	checkLake(t, e, l, workloadTables, w.changes)
	st := r.src.Stats()
	if st.Units < 5 || st.ChangesSkipped != 0 {
		t.Fatalf("stats %+v: want several units and nothing skipped", st)
	}

	offsets, err := h.Offsets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range workloadTables {
		n, _ := parseTableName(name)
		if v, _ := offsets.Get(snapshotKey(e.slot, n)); v&snapshotDone == 0 {
			t.Fatalf("snapshot of %s not marked done: %x", name, v)
		}
	}
	again, rec2 := startSource(t, cfg, h)
	waitFor(t, 10*time.Second, "a second session", func() bool { return again.src.Stats().Sessions == 1 && again.src.Stats().ConfirmedLSN > 0 })
	time.Sleep(300 * time.Millisecond)
	if err := again.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := again.src.Stats(); st.SnapshotRows != 0 || st.Changes != 0 || len(rec2.ackedRows()) != 0 {
		t.Fatalf("a run after everything was acked ingested something: %+v", st)
	}
}

// Stopping a source that is waiting for its host to answer is not
// abandoning the unit: Run returns once the host answers, and what the
// host acked is confirmed.
func TestStopWaitsForTheFlight(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY, v text)`)
	l := newLake(t)
	h := l.start(t)
	cfg := e.config("public.t")
	cfg.Logger = quietLogger(t)
	entered := make(chan struct{}, 1)
	rec := &recorder{gate: func(u engine.Unit) {
		if len(u.Sidecar.Rows) > 0 && u.Sidecar.Rows[0].Order > 0 {
			entered <- struct{}{}
			time.Sleep(300 * time.Millisecond)
		}
	}}
	r := startOn(t, cfg, h, rec.wrap(h.Ingest))
	src := r.src
	waitFor(t, 10*time.Second, "the stream", func() bool { return src.Stats().ConfirmedLSN > 0 })
	e.exec(`INSERT INTO t SELECT g, 'v' FROM generate_series(1, 10) g`)
	<-entered
	if err := r.stop(t); err != nil && !errors.Is(err, errStopped) {
		t.Fatal(err)
	}
	if st := src.Stats(); st.Changes != 10 {
		t.Fatalf("stats after the stop: %+v; the unit in flight must be acked", st)
	}
}

// A schema change — between transactions, and inside one between two
// rows — gives units of the new schema, and a chunk never mixes two:
// the lake still equals the source (every row is touched after the last
// change, so every live row carries the last schema).
func TestSchemaChange(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE s (id int PRIMARY KEY, a text)`, `INSERT INTO s SELECT g, 'a' FROM generate_series(1, 20) g`)
	tables := []string{"public.s"}
	l := newLake(t)
	h := l.start(t)
	cfg := e.config(tables...)
	cfg.Logger = quietLogger(t)
	schemas := map[uint64]bool{}
	var mu sync.Mutex
	rec := &recorder{gate: func(u engine.Unit) {
		mu.Lock()
		defer mu.Unlock()
		schemas[uint64(u.Key.Schema)] = true
	}}
	r := startOn(t, cfg, h, rec.wrap(h.Ingest))
	src := r.src
	waitFor(t, 10*time.Second, "the stream", func() bool { return src.Stats().ConfirmedLSN > 0 })
	w := &workload{t: t, conn: e.db}
	w.tx(ch(`UPDATE s SET a = 'x' WHERE id <= 5`))
	e.exec(`ALTER TABLE s ADD COLUMN b int DEFAULT 7`)
	w.tx(ch(`UPDATE s SET a = 'y'`))
	w.tx(ch(`INSERT INTO s VALUES (21, 'before')`), ch(`ALTER TABLE s ADD COLUMN c timestamptz`),
		ch(`INSERT INTO s VALUES (22, 'after', 8, '2024-05-06 07:08:09+02')`), ch(`UPDATE s SET c = now()`))
	w.check()
	waitFor(t, 10*time.Second, "every change acked", func() bool { return int64(src.Stats().Changes) == w.changes })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkLake(t, e, l, tables, w.changes)
	mu.Lock()
	defer mu.Unlock()
	if len(schemas) != 3 {
		t.Fatalf("units of %d schemas; want 3 (before, after b, after c)", len(schemas))
	}
}

// Without a table list the source captures every table of the
// publication, which it creates FOR ALL TABLES; a table created while it
// streams appears in the stream, and the source sets up again to read
// it from the catalog and snapshot it — its rows still land once.
func TestAllTablesAndANewOne(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE a (id int PRIMARY KEY, v text)`, `INSERT INTO a VALUES (1, 'one')`)
	l := newLake(t)
	h := l.start(t)
	cfg := e.config()
	cfg.Logger = quietLogger(t)
	r, _ := startSource(t, cfg, h)
	r.await(t, 10*time.Second, "the stream", func() bool { return r.src.Stats().ConfirmedLSN > 0 })
	w := &workload{t: t, conn: e.db}
	w.tx(ch(`INSERT INTO a VALUES (2, 'two')`))
	e.exec(`CREATE TABLE b (k text PRIMARY KEY, n int8)`)
	w.tx(ch(`INSERT INTO b SELECT 'k' || g, g FROM generate_series(1, 70) g`), ch(`UPDATE a SET v = 'uno' WHERE id = 1`))
	w.tx(ch(`DELETE FROM b WHERE n > 60`))
	w.check()
	waitFor(t, 15*time.Second, "every change acked", func() bool { return int64(r.src.Stats().Changes) == w.changes })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if st := r.src.Stats(); st.Sessions != 2 || st.SnapshotRows <= 1 { // b's rows as of its snapshot
		t.Fatalf("stats %+v: want a second session that snapshots b", st)
	}
	checkLake(t, e, l, []string{"public.a", "public.b"}, w.changes)
}

// Two sources sharing a publication may start at once: one creates it,
// the other finds it created; both capture.
func TestTwoSourcesShareAPublication(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	other := e.otherSlot(t)
	l := newLake(t)
	h := l.start(t)
	cfg := e.config("public.t")
	cfg.Logger = quietLogger(t)
	cfg2 := cfg
	cfg2.Slot, cfg2.SinkRef = other, testSink
	r1 := startOn(t, cfg, h, nil)
	r2 := startOn(t, cfg2, h, nil)
	for _, r := range []*running{r1, r2} {
		r.await(t, 10*time.Second, "both streams", func() bool { return r.src.Stats().ConfirmedLSN > 0 })
	}
	e.exec(`INSERT INTO t SELECT g FROM generate_series(1, 5) g`)
	for _, r := range []*running{r1, r2} {
		waitFor(t, 10*time.Second, "both sources to ack", func() bool { return r.src.Stats().Changes == 5 })
		if err := r.stop(t); err != nil {
			t.Fatal(err)
		}
	}
}
