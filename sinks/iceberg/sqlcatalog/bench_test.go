package sqlcatalog

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// BenchmarkCommit: one Append of one data file (already written) per
// iteration, each pinned to the state the last one left — the catalog's
// share of a job's commit — on SQLite and on the PostgreSQL server, with
// the sink's expiry (keep 100, 20 of slack) running as the sink runs it.
// Reports the commit latency p50 and p99 (the Load before it excluded),
// and, after the run, the table's metadata on disk: the current
// metadata.json and every metadata, manifest-list and manifest file.
//
// BenchmarkCommit/day-of-commits is a simulated day of the default lanes:
// 288 commits (one per 5-minute flush interval); its metadata-bytes is
// what a table carries after a day, which expiry keeps from growing.
func BenchmarkCommit(b *testing.B) {
	for _, c := range []struct {
		name string
		env  func(testing.TB) env
	}{{"sqlite", sqliteFolder}, {"postgres", postgresFolder}} {
		b.Run(c.name, func(b *testing.B) { benchCommits(b, c.env(b), b.N) })
	}
	b.Run("day-of-commits", func(b *testing.B) {
		for range b.N {
			benchCommits(b, sqliteFolder(b), 288)
		}
	})
}

// retention is the sink's default, as it runs it (iceberg.Sink.maintain).
var retention = iceberg.RetentionDefault

func benchCommits(b *testing.B, e env, n int) {
	c := open(b, e)
	tbl := create(b, c, "events", nil)
	file := writeFile(b, e, tbl, []row{{ID: 1, Name: "one"}})
	ctx := context.Background()
	lat := make([]time.Duration, 0, n)
	b.ResetTimer()
	for range n {
		start := time.Now()
		if err := c.Append(ctx, tbl, iceberg.Append{Files: []iceberg.DataFile{file}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		tbl = load(b, c, tbl.Ident)
		if len(tbl.Snapshots) > retention.KeepLast+iceberg.ExpireSlack {
			r := retention
			r.NowMs = time.Now().UnixMilli()
			if err := c.Expire(ctx, tbl, r); err != nil {
				b.Fatal(err)
			}
			tbl = load(b, c, tbl.Ident)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	cur, all := metadataBytes(b, tbl)
	b.ReportMetric(float64(cur), "metadata.json-bytes")
	b.ReportMetric(float64(all), "metadata-bytes")
	b.ReportMetric(float64(len(tbl.Snapshots)), "snapshots")
}

// metadataBytes is the size of t's current metadata file and of every
// file in its metadata folder (a folder warehouse).
func metadataBytes(b *testing.B, t *iceberg.Table) (cur, all int64) {
	b.Helper()
	path := func(uri string) string { return strings.TrimPrefix(uri, "file://") }
	st, err := os.Stat(path(t.MetadataLocation))
	if err != nil {
		b.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(path(t.Location), "metadata"))
	if err != nil {
		b.Fatal(err)
	}
	for _, en := range entries {
		info, err := en.Info()
		if err != nil {
			b.Fatal(err)
		}
		all += info.Size()
	}
	return st.Size(), all
}
