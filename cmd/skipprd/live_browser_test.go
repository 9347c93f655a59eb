package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
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

// headless runs Chromium on url with args and returns its stdout; the
// page's scripts run for 3 s of virtual time first.
func headless(t *testing.T, browser, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--user-data-dir=" + t.TempDir(), "--virtual-time-budget=3000"}, args...)
	out, err := exec.CommandContext(ctx, browser, append(all, url)...).Output()
	if err != nil {
		t.Fatalf("chromium %v: %v", args, err)
	}
	return out
}

var (
	domAcked    = regexp.MustCompile(`id="acked">(\d+)<`)
	domSegments = regexp.MustCompile(`data-segments="(\d+)"`)
	domSegDivs  = regexp.MustCompile(`class="seg (committed|applying|reclaiming|kept|reclaimed)"`)
	domOutside  = regexp.MustCompile(`(src|href)="(https?:)?//[^"]*"|@import|url\((https?:)?//`)
)

// The live WAL view, in a real browser against a running daemon: the
// page loads with no outside asset, its tape shows segments, its numbers
// move between two loads, and a screenshot is kept as a test artifact
// (SKIPPR_TEST_ARTIFACTS, else the temp directory).
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
	url := "http://" + base + "/"

	first := headless(t, browser, url, "--dump-dom")
	time.Sleep(2 * time.Second)
	second := headless(t, browser, url, "--dump-dom")
	a1, a2 := domNumber(t, domAcked, first), domNumber(t, domAcked, second)
	if a1 == 0 || a2 <= a1 {
		t.Fatalf("rows acked on the page: %d then %d; want them above zero and moving", a1, a2)
	}
	if n := domNumber(t, domSegments, second); n == 0 && len(domSegDivs.FindAll(second, -1)) == 0 {
		t.Fatalf("the tape shows no segment:\n%s", second)
	}
	if !bytes.Contains(second, []byte(`id="status">live<`)) {
		t.Fatalf("the page does not say it is live")
	}
	if m := domOutside.Find(second); m != nil {
		t.Fatalf("the page loads from outside: %s", m)
	}

	dir := os.Getenv("SKIPPR_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "skipprd-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(dir, "live-view.png")
	headless(t, browser, url, "--screenshot="+shot, "--window-size=1280,1100", "--hide-scrollbars")
	png, err := os.ReadFile(shot)
	if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot %s: %d bytes, err %v", shot, len(png), err)
	}
	t.Logf("page: %d then %d rows acked, %d segments on the tape; screenshot %s", a1, a2, domNumber(t, domSegments, second), shot)
	p.stop(t)
}

func domNumber(t *testing.T, re *regexp.Regexp, dom []byte) uint64 {
	t.Helper()
	m := re.FindSubmatch(dom)
	if m == nil {
		t.Fatalf("no %s in the page:\n%.2000s", re, dom)
	}
	n, _ := strconv.ParseUint(string(m[1]), 10, 64)
	return n
}
