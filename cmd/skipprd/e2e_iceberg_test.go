package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/nodetest"
	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/sinks/iceberg"
)

// Many pipelines, one table: pipelines a and b, each a real daemon on a
// local-disk WAL of its own, append to the same Iceberg tables — one
// warehouse folder, the SQL catalog on the real Postgres server — while
// each is killed with SIGKILL twice mid-stream and restarted. Every row
// either acked is in the tables' current snapshots exactly once, as read
// without iceberg-go (the catalog's row, the Avro manifests, DuckDB),
// and no compaction id is in two snapshots. Small files are rewritten
// as often as the sink allows (small_files: 2), so the read also judges
// rewritten files.
func TestSharedIceberg(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs two pipelines into shared Iceberg tables through kills (about 30 s)")
	pgtest.Connect(t) // skips loudly without a server (fails under CI=true)
	t.Parallel()
	bin := buildDaemon(t)
	scenario := func(t *testing.T, wantRewrites bool) sharedScenario {
		url := pgtest.Database(t)
		warehouse := filepath.Join(t.TempDir(), "warehouse") // absolute: outside both DATA_DIRs
		// A segment, so a commit, every 100 ms: tens of commits per run.
		env := []string{"E2E_CATALOG=" + url, envMaxDelay + "=0.1"}
		load := sharedLoad{clients: 4, requests: 100, pause: 25 * time.Millisecond}
		a, b := load, load
		a.namespaces, b.namespaces = []string{"alpha", "events"}, []string{"beta", "events"}
		return sharedScenario{
			// small_files: 2 — a look every 4 commits — so small-file
			// rewrites race the appends, the other pipeline and the kills.
			sinks: fmt.Sprintf("sinks:\n  lake: {kind: iceberg, warehouse: %q, catalog_url_env: E2E_CATALOG, file_bytes: 0, small_files: 2}\n", warehouse),
			sink:  "lake",
			env:   map[string][]string{"a": env, "b": env},
			load:  map[string]sharedLoad{"a": a, "b": b},
			kills: 2,
			read: func(t *testing.T, _ []string) map[string][]string {
				tables := icebergTables(t, icebergMetadataPG(t, url), "", "")
				if rewrites := logPipelines(t, tables); wantRewrites && rewrites == 0 {
					t.Error("no small-file rewrite in any table")
				}
				return icebergIDs(t, tables)
			},
		}
	}
	t.Run("issue", func(t *testing.T) { scenario(t, false).runIssue(t, bin, "alpha", "beta") })
	t.Run("kills", func(t *testing.T) { scenario(t, true).runKills(t, bin) })
}

// logPipelines says, per table, how many snapshots each pipeline
// committed (a shared table must show both) and how many rewrites; it
// returns the rewrites.
func logPipelines(t *testing.T, tables map[string]nodetest.IcebergRead) (rewrites int) {
	t.Helper()
	for name, r := range tables {
		n := map[string]int{}
		for _, s := range r.Snapshots {
			if s.Summary[iceberg.SummaryRewriteID] != "" {
				n["rewrites"]++
				continue
			}
			n[s.Summary["skipprd.pipeline"]]++
		}
		t.Logf("table %s: %d files, %d rows; snapshots retained by pipeline (and rewrites): %v", name, len(r.Files), len(r.Rows), n)
		rewrites += n["rewrites"]
	}
	return rewrites
}
