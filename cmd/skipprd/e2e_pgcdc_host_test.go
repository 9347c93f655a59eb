package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/storage"
)

// hostRequestTimeout is the S3 request timeout of the new-host test's
// daemons (SKIPPR_S3_REQUEST_TIMEOUT_SECONDS): a bucket served by this
// process over loopback, so each start-up's recovery fence is 5 s + 5/6 s.
const hostRequestTimeout = "5"

// TestDaemonPostgresCDCNewHost runs the daemon on the S3 WAL
// (WAL_STORAGE=s3, a gofakes3 bucket this test serves, reached through
// the standard AWS variables), streaming a Postgres database's tables
// and a pgbench-style workload into a second database; SIGKILLs it
// mid-stream; and starts another with a new, empty DATA_DIR on the same
// bucket: a new host, with only the bucket and the slot to resume from.
// Then the destination equals the source row for row, and no snapshot
// row or change was lost or stored twice: the Postgres sink records each
// job it applied once, by its compaction id, with its rows, and those
// rows add up to exactly the snapshot's and the workload's changes (the
// tables cannot show a duplicate: order tokens and tombstones hide it).
func TestDaemonPostgresCDCNewHost(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and waits out two S3 recovery fences (about 25 s)")
	pgtest.RequireLogical(t)
	t.Parallel()
	srcURL, dstURL := pgtest.Database(t), pgtest.Database(t)
	src := connectPG(t, srcURL)
	const ledgerRows = 2000
	seedCDCSource(t, src, ledgerRows)
	initial := int64(cdcAccounts + 10 + 1 + ledgerRows)
	const bucket = "skipprd-wal"
	emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	bin := buildDaemon(t)
	slot := uniqueSlot("host")
	t.Cleanup(func() { dropSlots(t, src, slot) })
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, fmt.Sprintf(`sinks:
  warehouse: {kind: postgres, url_env: E2E_DST}
sources:
  - {name: to-pg, kind: postgres-cdc, sink: warehouse, url_env: E2E_SRC, publication: e2e, slot: %s}
`, slot))
	env := append(s3Env(t, emb.Endpoint()), envWALStorage+"=s3", envWALBucket+"="+bucket, envS3Timeout+"="+hostRequestTimeout,
		envPipelineFile+"="+pipeline, "E2E_SRC="+srcURL, "E2E_DST="+dstURL)

	first := startDaemon(t, bin, t.TempDir(), env...)
	first.waitStderr(t, "the source streaming", func(lines []string) bool { return findLine(lines, streamingLine+slot) != "" })
	w := startCDCWorkload(t, srcURL, ledgerRows)
	first.waitStdout(t, "changes acked", func(lines []string) bool {
		pr, ok := parseProgress(lastProgress(lines))
		return ok && pr["acked"] >= uint64(initial)+300
	})
	first.kill(t)
	t.Logf("killed after %d workload transactions", w.txs.Load())

	second := startDaemon(t, bin, t.TempDir(), env...) // a new host: nothing on its disk
	second.waitStderr(t, "the source streaming", func(lines []string) bool { return findLine(lines, streamingLine+slot) != "" })
	if line := findLine(second.stderrLines(), `msg="postgrescdc: starting"`); line == "" || strings.Contains(line, " offsets=0") {
		t.Fatalf("the new host's source should start from the bucket's offsets: %q", line)
	}
	second.waitStdout(t, "changes acked by the new host", progressLines("acked", 2))
	changes := w.stop(t)
	t.Logf("workload: %d transactions, %d row changes", w.txs.Load(), changes)
	dst := connectPG(t, dstURL)
	second.waitFor(t, "the destination to equal the source", func() bool { return cdcTablesEqual(t, src, dst) == "" })
	second.waitFor(t, "every row applied", func() bool { rows, _ := appliedJobRows(t, dst); return rows >= initial+changes })
	second.stop(t)
	if diff := cdcTablesEqual(t, src, dst); diff != "" {
		t.Fatalf("after the stop: %s", diff)
	}
	rows, jobs := appliedJobRows(t, dst)
	if rows != initial+changes {
		t.Fatalf("the sink applied %d jobs of %d rows in all; the snapshot had %d rows and the workload made %d changes", jobs, rows, initial, changes)
	}
	t.Logf("the sink applied %d jobs, %d rows", jobs, rows)
}

// appliedJobRows reads the Postgres sink's applied-jobs table: the rows
// of the jobs it applied, each once, and how many jobs (-1, -1 while the
// table does not exist).
func appliedJobRows(t *testing.T, conn *pgx.Conn) (rows, jobs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := conn.QueryRow(ctx, "SELECT coalesce(sum(rows), 0)::int8, count(*) FROM skipprd_applied_jobs WHERE table_name <> ''").Scan(&rows, &jobs)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return -1, -1
		}
		t.Fatalf("read the applied jobs: %v", err)
	}
	return rows, jobs
}
