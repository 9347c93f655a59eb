package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/sinks"
	"github.com/skipprd/skipprd/sources/postgrescdc"
)

// The tables of the pgbench-style workload, with their key and the
// columns compared between source and destination.
var cdcTables = []struct{ name, create, key, cols string }{
	{"branches", "CREATE TABLE branches (bid int PRIMARY KEY, bbalance bigint NOT NULL, filler text)", "bid", "bid, bbalance, filler"},
	{"tellers", "CREATE TABLE tellers (tid int PRIMARY KEY, bid int NOT NULL, tbalance bigint NOT NULL)", "tid", "tid, bid, tbalance"},
	{"accounts", "CREATE TABLE accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance bigint NOT NULL, filler text)", "aid", "aid, bid, abalance, filler"},
	{"history", "CREATE TABLE history (hid bigserial PRIMARY KEY, tid int, aid int, delta int, mtime timestamptz NOT NULL DEFAULT now())", "hid", "hid, tid, aid, delta, mtime"},
	{"ledger", "CREATE TABLE ledger (lid bigint PRIMARY KEY, amount bigint NOT NULL, memo text)", "lid", "lid, amount, memo"},
}

// cdcAccounts and cdcLedger are the rows of accounts and ledger; the
// ledger's snapshot takes several units (of postgrescdc.DefaultUnitRows).
const (
	cdcAccounts = 500
	cdcLedger   = 8 * postgrescdc.DefaultUnitRows
)

// TestDaemonPostgresCDCKills streams a Postgres database's tables and
// changes — a pgbench-style workload of updates, inserts and deletes,
// including deletes and re-inserts of the same keys — through the
// daemon's WAL into a second database and a Parquet lake, SIGKILLing the
// daemon once in the middle of the snapshot of a table of several units
// (ledger) and several times mid-stream. Then the destination tables
// equal the source's row for row, and the lake holds every snapshot row
// and every change exactly once: the snapshot resumed after the last key
// the WAL held (its tables are keyed by integers).
func TestDaemonPostgresCDCKills(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and streams a Postgres workload through kills (about 20 s)")
	pgtest.RequireLogical(t)
	srcURL, dstURL := pgtest.Database(t), pgtest.Database(t)
	src := connectPG(t, srcURL)
	seedCDCSource(t, src, cdcLedger)
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	slotA, slotB := uniqueSlot("wh"), uniqueSlot("lake")
	t.Cleanup(func() { dropSlots(t, src, slotA, slotB) })
	// Both sinks gather jobs across segments, cut within a second (the
	// test waits for every change to land before it stops the daemon):
	// the warehouse's CDC transactions span segments and kills too.
	writeFile(t, pipeline, fmt.Sprintf(`sinks:
  warehouse: {kind: postgres, url_env: E2E_DST, file_bytes: 1MiB, flush_interval: 1s}
  lake: {kind: parquet-dir, path: lake, flush_interval: 1s}
sources:
  - {name: to-pg, kind: postgres-cdc, sink: warehouse, url_env: E2E_SRC, publication: e2e, slot: %s}
  - {name: to-lake, kind: postgres-cdc, sink: lake, url_env: E2E_SRC, publication: e2e, slot: %s}
`, slotA, slotB))
	env := []string{envPipelineFile + "=" + pipeline, "E2E_SRC=" + srcURL, "E2E_DST=" + dstURL}

	p := startDaemon(t, bin, dataDir, env...)
	initial := cdcAccounts + 10 + 1 + cdcLedger
	killMidSnapshot(t, p, "ledger", 2*cdcLedger)
	p = startDaemon(t, bin, dataDir, env...)
	// Both sources stream once every snapshot is acked; the workload
	// starts then, so the lake's records are the snapshot rows and the
	// workload's changes.
	p.waitStderr(t, "both sources streaming", func(lines []string) bool {
		return findLine(lines, streamingLine+slotA) != "" && findLine(lines, streamingLine+slotB) != ""
	})
	checkSnapshotResumed(t, p.stderrLines(), "public.ledger")
	w := startCDCWorkload(t, srcURL, cdcLedger)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	for kill := range 4 {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(1500*time.Millisecond))))
		p.kill(t)
		t.Logf("kill %d after %d workload transactions", kill, w.txs.Load())
		p = startDaemon(t, bin, dataDir, env...)
	}
	changes := w.stop(t)
	t.Logf("workload: %d transactions, %d row changes", w.txs.Load(), changes)
	dst := connectPG(t, dstURL)
	p.waitFor(t, "the destination to equal the source", func() bool { return cdcTablesEqual(t, src, dst) == "" })
	p.waitFor(t, "every change in the lake", func() bool {
		return len(lakeCDC(t, filepath.Join(dataDir, "lake"))) >= initial+int(changes)
	})
	p.stop(t)
	if diff := cdcTablesEqual(t, src, dst); diff != "" {
		t.Fatalf("after the stop: %s", diff)
	}
	records := lakeCDC(t, filepath.Join(dataDir, "lake"))
	if len(records) != initial+int(changes) {
		t.Fatalf("the lake holds %d CDC records; the snapshot had %d rows and the workload made %d changes", len(records), initial, changes)
	}
}

// streamingLine opens the log line of a source that streams, before its
// slot's name.
const streamingLine = `msg="postgrescdc: streaming" slot=`

// killMidSnapshot SIGKILLs p once the sources have acked about half the
// total rows of namespace ns's snapshots (read from the admin listener's
// metrics every few milliseconds): in the middle of them.
func killMidSnapshot(t *testing.T, p *proc, ns string, total int) {
	t.Helper()
	var base string
	p.waitStderr(t, "the admin listener", func(lines []string) bool {
		_, addr, ok := strings.Cut(findLine(lines, `msg="admin listening"`), " addr=")
		base, _, _ = strings.Cut(addr, " ")
		return ok
	})
	series := fmt.Sprintf(`skipprd_rows_acked_total{namespace=%q}`, ns)
	var acked float64
	// Polled every 10 ms: in a CI run the whole table's snapshot was
	// acked within half a second, between two polls 250 ms apart.
	p.waitPolling(t, "half the "+ns+" snapshot acked", e2eWait, 10*time.Millisecond, func() bool {
		code, body := get(t, "http://"+base+"/metrics")
		acked = parseMetrics(t, body)[series]
		return code == http.StatusOK && acked >= float64(total/2)
	})
	p.kill(t)
	if acked >= float64(total) {
		t.Fatalf("the %s snapshots were acked whole (%v rows) before the kill; make the table larger", ns, acked)
	}
	t.Logf("killed with %v of %d %s snapshot rows acked", acked, total, ns)
}

// checkSnapshotResumed requires the log of a daemon started after a
// kill mid-snapshot to show table's snapshot resumed by key after a key
// for at least one source: from the offsets it recovered, or from the
// host's once its first unit was answered.
func checkSnapshotResumed(t *testing.T, lines []string, table string) {
	t.Helper()
	resumed := regexp.MustCompile(`msg="postgrescdc: snapshot (starts|resumes from the host's replayed units)" slot=\S+ table=` +
		regexp.QuoteMeta(table) + ` by_key=true after=(\d+)`)
	for _, l := range lines {
		if m := resumed.FindStringSubmatch(l); m != nil && m[2] != "0" {
			t.Logf("resumed: %s", l)
			return
		}
	}
	t.Fatalf("no source resumed the snapshot of %s by key after a key; the log:\n%s", table, strings.Join(lines, "\n"))
}

func connectPG(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func uniqueSlot(what string) string {
	return fmt.Sprintf("e2e_%s_%d", what, time.Now().UnixNano()%1e12)
}

// dropSlots drops the test's slots, which would otherwise hold the
// server's WAL for ever.
func dropSlots(t *testing.T, conn *pgx.Conn, slots ...string) {
	for _, s := range slots {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		for range 50 { // the daemon's walsender may still hold it for a moment
			_, err := conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", s)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
	}
}

// seedCDCSource creates the workload's tables, fills them (ledger with
// ledgerRows rows) and publishes them as e2e.
func seedCDCSource(t *testing.T, conn *pgx.Conn, ledgerRows int) {
	t.Helper()
	ctx := context.Background()
	stmts := []string{}
	for _, tb := range cdcTables {
		stmts = append(stmts, tb.create)
	}
	stmts = append(stmts,
		"INSERT INTO branches VALUES (1, 0, 'main branch')",
		"INSERT INTO tellers SELECT g, 1, 0 FROM generate_series(1, 10) g",
		fmt.Sprintf("INSERT INTO accounts SELECT g, 1, 0, repeat('x', 40) FROM generate_series(1, %d) g", cdcAccounts),
		fmt.Sprintf("INSERT INTO ledger SELECT g, g %% 1000, repeat('m', 30) FROM generate_series(1, %d) g", ledgerRows),
		"CREATE PUBLICATION e2e FOR TABLE branches, tellers, accounts, history, ledger")
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// cdcWorkload runs pgbench-style transactions on its own connection and
// counts the row changes of those that committed.
type cdcWorkload struct {
	stopping atomic.Bool
	txs      atomic.Int64
	changes  atomic.Int64
	done     chan error
}

// startCDCWorkload runs cdcTransaction on the database at url, whose
// ledger has ledgerRows rows, until stopped.
func startCDCWorkload(t *testing.T, url string, ledgerRows int) *cdcWorkload {
	conn := connectPG(t, url)
	w := &cdcWorkload{done: make(chan error, 1)}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 5))
	go func() {
		for !w.stopping.Load() {
			n, err := cdcTransaction(conn, rng, ledgerRows)
			if err != nil {
				w.done <- err
				return
			}
			w.txs.Add(1)
			w.changes.Add(n)
			time.Sleep(2 * time.Millisecond)
		}
		w.done <- nil
	}()
	return w
}

func (w *cdcWorkload) stop(t *testing.T) int64 {
	t.Helper()
	w.stopping.Store(true)
	if err := <-w.done; err != nil {
		t.Fatalf("workload: %v", err)
	}
	return w.changes.Load()
}

// cdcTransaction runs one transaction and returns its row changes: the
// pgbench update of an account, a teller and the branch plus a history
// row; now and then a history row deleted, or an account deleted and
// inserted again with the same key in one transaction; and a ledger row
// updated, anywhere in its key range.
func cdcTransaction(conn *pgx.Conn, rng *rand.Rand, ledgerRows int) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	aid, tid, delta := 1+rng.IntN(cdcAccounts), 1+rng.IntN(10), rng.IntN(10001)-5000
	stmts := []string{
		fmt.Sprintf("UPDATE accounts SET abalance = abalance + %d WHERE aid = %d", delta, aid),
		fmt.Sprintf("UPDATE tellers SET tbalance = tbalance + %d WHERE tid = %d", delta, tid),
		fmt.Sprintf("UPDATE branches SET bbalance = bbalance + %d WHERE bid = 1", delta),
		fmt.Sprintf("INSERT INTO history (tid, aid, delta) VALUES (%d, %d, %d)", tid, aid, delta),
		fmt.Sprintf("UPDATE ledger SET amount = amount + %d WHERE lid = %d", delta, 1+rng.IntN(ledgerRows)),
	}
	switch rng.IntN(10) {
	case 0:
		stmts = append(stmts, "DELETE FROM history WHERE hid = (SELECT min(hid) FROM history)")
	case 1:
		other := 1 + rng.IntN(cdcAccounts)
		stmts = append(stmts,
			fmt.Sprintf("DELETE FROM accounts WHERE aid = %d", other),
			fmt.Sprintf("INSERT INTO accounts VALUES (%d, 1, %d, 'again')", other, rng.IntN(1000)))
	}
	var n int64
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		for _, s := range stmts {
			tag, err := tx.Exec(ctx, s)
			if err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			n += tag.RowsAffected()
		}
		return nil
	})
	return n, err
}

// cdcTablesEqual returns "" when every destination table, tombstones
// left out, equals its source table row for row; else what differs.
func cdcTablesEqual(t *testing.T, src, dst *pgx.Conn) string {
	t.Helper()
	for _, tb := range cdcTables {
		want, err := tableText(src, tb.name, tb.cols, tb.key, "")
		if err != nil {
			t.Fatalf("source %s: %v", tb.name, err)
		}
		got, err := tableText(dst, tb.name, tb.cols, tb.key, "WHERE NOT _cdc_deleted")
		if err != nil {
			return fmt.Sprintf("destination %s: %v", tb.name, err)
		}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("%s: the destination has %d rows, the source %d: %s", tb.name, len(got), len(want), firstDiff(got, want))
		}
	}
	return ""
}

// tableText reads a table's columns, one line per row in key order.
func tableText(conn *pgx.Conn, table, cols, key, where string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rows, err := conn.Query(ctx, fmt.Sprintf("SELECT (%s)::text FROM %s %s ORDER BY %s", rowOf(cols), table, where, key))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// rowOf turns "a, b" into "ROW(a, b)" for a one-text-per-row read.
func rowOf(cols string) string { return "ROW(" + cols + ")" }

// cdcRecord is one CDC row of the lake.
type cdcRecord struct {
	table, identity string
	order           uint64
}

// lakeCDC reads every CDC record of the lake and fails the test on a
// record that is there twice (same table, identity and order token): a
// change, or a snapshot row (order token 0) of a table keyed by integers.
func lakeCDC(t *testing.T, lake string) []cdcRecord {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(lake, "*", "p_year=*", "p_month=*", "p_day=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[cdcRecord]string{}
	var out []cdcRecord
	for _, path := range paths {
		rel, _ := filepath.Rel(lake, path)
		table := strings.Split(filepath.ToSlash(rel), "/")[0]
		for _, r := range readCDC(t, path, table) {
			if first, dup := seen[r]; dup {
				t.Fatalf("%s: the record of %x at order %d is in the lake twice (%s and %s)", table, r.identity, r.order, first, rel)
			}
			seen[r] = rel
			out = append(out, r)
		}
	}
	return out
}

func readCDC(t *testing.T, path, table string) []cdcRecord {
	t.Helper()
	tbl := readParquet(t, path)
	defer tbl.Release()
	col := func(name string) int {
		idx := tbl.Schema().FieldIndices(name)
		if len(idx) != 1 {
			t.Fatalf("%s: no column %s", path, name)
		}
		return idx[0]
	}
	ids, orders := tbl.Column(col(sinks.ColumnCDCIdentity)).Data().Chunks(), tbl.Column(col(sinks.ColumnCDCOrder)).Data().Chunks()
	var out []cdcRecord
	for c := range ids {
		id, ord := ids[c].(*array.Binary), orders[c].(*array.Uint64)
		for i := range id.Len() {
			out = append(out, cdcRecord{table, string(id.Value(i)), ord.Value(i)})
		}
	}
	return out
}
