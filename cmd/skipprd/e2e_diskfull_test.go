//go:build linux

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// `make run` on a volume that fills and then frees space keeps running:
// the daemon with no configuration (the generator, the disk WAL, the
// lake) on a small tmpfs of its own. Once it ingests, a file takes all the
// space that is left; segment writes, lake files and a new log file's
// allocation fail with ENOSPC and are retried. A write into the open log
// file never does — its blocks were allocated when it was made — so no
// unit's outcome is ever unknown for want of space (before, a log write
// failed mid-segment and poisoned its batch). When the file goes, ingest
// resumes, the daemon stops gracefully, and the lake holds every id at
// most once.
//
// Mounting needs root (CAP_SYS_ADMIN): skipped loudly without it, failed
// under CI=true.
func TestDaemonSurvivesAFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the daemon on a tmpfs it mounts")
	}
	vol := mountTmpfs(t, 96<<20)
	t.Parallel()
	p := startDaemon(t, buildDaemon(t), vol)
	p.waitStdout(t, "ingest", progressLines("acked", 2))

	filler := filepath.Join(vol, "filler")
	fillDisk(t, filler)
	full := time.Now()
	p.waitStderr(t, "a write refused for want of space", func(lines []string) bool {
		return findLine(lines, "no space left on device") != ""
	})
	// Hold the disk full a while: every writer meets it, and the
	// generator's backoff grows to its cap.
	time.Sleep(3*time.Second - time.Since(full))
	stalled := acked(t, p)
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	t.Logf("the disk was full for %v; %d rows acked when space came back", time.Since(full).Round(time.Millisecond), stalled)
	p.waitStdout(t, "ingest to resume", func(lines []string) bool {
		pr, ok := parseProgress(lastProgress(lines))
		return ok && pr["acked"] > stalled+50_000
	})
	if line := findLine(p.stderrLines(), `msg="source failed"`); line != "" {
		t.Fatalf("a source gave up on the full disk: %s", line)
	}
	if line := findLine(p.stderrLines(), "outcome unknown"); line != "" {
		t.Fatalf("a unit's outcome was unknown while the disk was full: a log write failed inside an allocated log file: %s", line)
	}
	p.stop(t)
	t.Logf("lake files per namespace: %v", checkLake(t, filepath.Join(vol, "lake")))
}

// mountTmpfs mounts a tmpfs of size bytes on a new temporary directory
// and unmounts it at the test's end.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0755"
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, opts); err != nil {
		msg := "cannot mount a tmpfs (" + err.Error() + "): this test needs root (CAP_SYS_ADMIN)"
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s", msg)
		}
		t.Skipf("SKIPPING: %s", msg)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes path until the file system has no space left.
func fillDisk(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	// Small writes too: the last megabyte's remainder.
	for _, n := range []int{64 << 10, 4 << 10, 512} {
		for {
			if _, err := f.Write(chunk[:n]); err != nil {
				break
			}
		}
	}
}

// acked is the rows acked in the daemon's last progress line.
func acked(t *testing.T, p *proc) uint64 {
	t.Helper()
	pr, ok := parseProgress(lastProgress(p.stdoutLines()))
	if !ok {
		t.Fatalf("no progress line: %s", strings.Join(tail(p.stdoutLines(), 3), "\n"))
	}
	return pr["acked"]
}
