package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/internal/nodetest"
)

// chromium finds a headless-capable Chromium: SKIPPR_TEST_CHROMIUM, or
// chromium / chromium-browser on PATH. Without one the test is skipped
// loudly — under CI=true it fails (.ci/run installs Debian's chromium).
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("SKIPPR_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	msg := "no chromium on PATH (apt-get install chromium, or set SKIPPR_TEST_CHROMIUM)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", msg)
	}
	t.Skipf("SKIPPING: %s", msg)
	return ""
}

// The live WAL view, in a real browser against a running daemon: one
// page, read twice 2.5 s apart in the same tab, updates itself — rows
// acked move, counted since it opened — and shows every panel: the tape
// with segments and their PARTs, the completion bitmaps, the delay chart's
// five lines, the memory pool with its three bars (admission, cache,
// pinned), the alert feed; it asks nothing of any other origin; and a
// screenshot is kept as a test artifact (SKIPPR_TEST_ARTIFACTS, else the
// temp directory).
func TestLiveViewInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon and a headless Chromium (about 20 s)")
	}
	if runtime.GOOS == "windows" {
		t.Skip("stops the daemon with SIGINT")
	}
	browser := chromium(t)
	t.Parallel()
	p := startDaemon(t, buildDaemon(t), t.TempDir())
	var base string
	p.waitStderr(t, "the admin listener", func(lines []string) bool {
		line := findLine(lines, `msg="admin listening"`)
		_, rest, ok := strings.Cut(line, " addr=")
		base, _, _ = strings.Cut(rest, " ")
		return ok && base != ""
	})
	p.waitStdout(t, "ingest", progressLines("acked", 2))

	dir := os.Getenv("SKIPPR_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "skipprd-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "live-view.png")
	first, second, most, outside := nodetest.LiveView(t, browser, "http://"+base+"/", shot, 2500)
	t.Logf("first read %+v", first)
	t.Logf("last read %+v", second)
	t.Logf("most seen %+v", most)
	switch {
	case second.Status != "live":
		t.Errorf("the page says %q, not live", second.Status)
	case !(first.Acked > 0 && second.Acked > first.Acked && second.SinceOpen > 0 && second.Polls > first.Polls):
		t.Errorf("the page did not update itself: acked %d then %d, %d since it opened, %d then %d updates",
			first.Acked, second.Acked, second.SinceOpen, first.Polls, second.Polls)
	case second.SegDivs == 0 || most.TapeSegments == 0 || most.Parts == 0:
		t.Errorf("the tape shows %d segments, at most %d live with %d PARTs", second.SegDivs, most.TapeSegments, most.Parts)
	case most.BitRows == 0 || most.Bits == 0:
		t.Errorf("no completion bitmap in any read: at most %d rows, %d bits", most.BitRows, most.Bits)
	case second.ChartLines != 5:
		t.Errorf("the delay chart draws %d lines, want 5 (ACK delay, persist EMA, flush delay, two bounds)", second.ChartLines)
	case second.MemoryBars != 3 || !strings.Contains(second.Memory, "pinned"):
		t.Errorf("the memory panel: %d bars, %q", second.MemoryBars, second.Memory)
	case second.Alerts != "none":
		t.Errorf("the alert feed shows %q on a healthy daemon", second.Alerts)
	case len(outside) > 0:
		t.Errorf("the page asked other origins for %v", outside)
	}
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %d bytes, err %v", shot, len(png), err)
	}
	t.Logf("screenshot %s", shot)
	p.stop(t)
}
