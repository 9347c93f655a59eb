package main

import (
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/skipprd/skipprd/sinks"
)

// Jobs that span segments, in the real daemon: HTTP rows into a lake
// sink with file_bytes 1MiB and flush_interval 2s, on the local-disk WAL
// with a flush delay of at most 100 ms, so a segment is committed every
// few hundred milliseconds and a file gathers several. While the daemon
// runs, the interval writes files, some holding rows of two or more
// segments (their skipprd.segments says how many); on SIGTERM the close
// writes what is left, and every acked row is in the lake exactly once.
func TestDaemonSpanningJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemon and runs it")
	}
	if runtime.GOOS == "windows" {
		t.Skip("stops the daemon with SIGTERM")
	}
	t.Parallel()
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake, file_bytes: 1MiB, flush_interval: 2s}\n"+
		"sources:\n  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\"}\n")
	p := startDaemon(t, bin, dataDir, envPipelineFile+"="+pipeline, envMaxDelay+"=0.1", stopGraceLong)
	p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	if line := findLine(p.stderrLines(), `msg="sink: Parquet folder"`); !strings.Contains(line, "file_bytes=1048576 flush_interval=2s") {
		t.Fatalf("the sink's start-up line does not say its limits: %s", line)
	}
	addr := listenAddr(p.stderrLines())
	lake := filepath.Join(dataDir, lakeDir)

	var acked []string
	spanned := 0 // the most segments one file's rows came from
	deadline := time.Now().Add(e2eWait)
	for i := 0; spanned < 2 || i < 200; i++ {
		acked = append(acked, postRows(t, addr, "s", i)...)
		time.Sleep(5 * time.Millisecond)
		if i%50 == 49 {
			spanned = max(spanned, mostSegments(t, lake))
		}
		if time.Now().After(deadline) {
			t.Fatalf("no file of two or more segments within %v (at most %d): %s", e2eWait, spanned, lastProgress(p.stdoutLines()))
		}
	}
	t.Logf("%d rows acked; a file holds rows of %d segments; %s", len(acked), spanned, lastProgress(p.stdoutLines()))

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v, want 0", err)
		}
	case <-time.After(e2eWait):
		t.Fatalf("still running %v after SIGTERM", e2eWait)
	}
	slices.Sort(acked)
	if got := lakeIDs(t, lake)["events"]; !slices.Equal(got, acked) {
		t.Fatalf("the lake holds %d rows, %d were acked: %s", len(got), len(acked), firstDiff(got, acked))
	}
	final := lastProgress(p.stdoutLines())
	if pr, _ := parseProgress(final); pr["live_segments"] != 0 || pr["applied"] != uint64(len(acked)) {
		t.Fatalf("after the stop: %s; want every row applied and no live segment", final)
	}
}

// mostSegments is the most segments any one file under lake holds rows
// of, by its skipprd.segments ("{count} {first}..{last}").
func mostSegments(t *testing.T, lake string) int {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(lake, "*", "p_year=*", "p_month=*", "p_day=*", "*.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	most := 0
	for _, path := range paths {
		rdr, err := file.OpenParquetFile(path, false)
		if err != nil {
			t.Fatalf("open %s: %v", path, err)
		}
		v := rdr.MetaData().KeyValueMetadata().FindValue(sinks.MetaSegments)
		rdr.Close()
		if v == nil {
			t.Fatalf("%s records no %s", path, sinks.MetaSegments)
		}
		count, _, _ := strings.Cut(*v, " ")
		n, err := strconv.Atoi(count)
		if err != nil || n < 1 {
			t.Fatalf("%s: %s %q: want a count of segments first", path, sinks.MetaSegments, *v)
		}
		most = max(most, n)
	}
	return most
}
