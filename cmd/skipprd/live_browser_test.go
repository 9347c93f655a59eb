//go:build !windows

package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/nodetest"
	"github.com/skipprd/skipprd/internal/pgtest"
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

// liveBrowserTest is the set-up of a test of the live view in a browser:
// a headless Chromium and the daemon binary.
func liveBrowserTest(t *testing.T) (browser, bin string) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the daemon and a headless Chromium")
	}
	return chromium(t), buildDaemon(t)
}

// The live WAL view of a pipeline that has ingested nothing yet — the
// README's first pipeline file, opened before anything is sent: the page
// comes alive and every panel draws its empty state (no segment, no
// namespace, no alert; the chart's five lines, the three memory bars),
// none shows an error, and /api/live holds no null.
func TestLiveViewIdle(t *testing.T) {
	browser, bin := liveBrowserTest(t)
	t.Parallel()
	conf := t.TempDir()
	block := readmePipeline(t, readRepoFile(t, "README.md"))
	writeFile(t, filepath.Join(conf, "skipprd.yaml"), strings.Replace(block, "kind: http, sink: lake}", "kind: http, sink: lake, listen: \"127.0.0.1:0\"}", 1))
	if err := os.Mkdir(filepath.Join(conf, "incoming"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, bin, t.TempDir(), envPipelineFile+"="+filepath.Join(conf, "skipprd.yaml"))
	base := adminBase(t, p)
	p.waitStderr(t, "ready", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })

	page := nodetest.OpenLive(t, browser, base+"/")
	if r := page.Until("live", 15*time.Second); r.Status != "live" {
		t.Fatalf("the idle pipeline's page says %q, not live; panels %v", r.Status, r.Broken())
	}
	first, last, _ := page.Watch(2500*time.Millisecond, 0, "")
	page.Shot(artifact(t, "live-view-idle.png"))
	t.Logf("idle: %+v", last)
	switch {
	case last.Status != "live" || last.Stale:
		t.Errorf("status %q (stale %v)", last.Status, last.Stale)
	case len(last.Broken()) > 0:
		t.Errorf("panels show errors: %v", last.Broken())
	case !(last.Polls > first.Polls):
		t.Errorf("the page did not update itself: %d then %d updates", first.Polls, last.Polls)
	case last.Acked != 0 || last.TapeSegments != 0 || last.SegDivs != 0:
		t.Errorf("an idle pipeline shows %d rows acked, %d segments (%d on the tape)", last.Acked, last.TapeSegments, last.SegDivs)
	case !strings.Contains(last.TapeEmpty, "no live segment") || !strings.Contains(last.BitmapsEmpty, "no live segment"):
		t.Errorf("the tape says %q, the bitmaps %q: an empty panel must say it is empty", last.TapeEmpty, last.BitmapsEmpty)
	case last.ChartLines != 5 || last.MemoryBars != 3:
		t.Errorf("the chart draws %d lines (want 5), the memory panel %d bars (want 3)", last.ChartLines, last.MemoryBars)
	case last.Namespaces != "none yet" || last.Alerts != "none" || last.Waiting != "no rows waiting for a file":
		t.Errorf("namespaces %q, waiting %q, alerts %q", last.Namespaces, last.Waiting, last.Alerts)
	case len(page.Outside) > 0:
		t.Errorf("the page asked other origins for %v", page.Outside)
	}
	checkLiveJSON(t, base)
	p.stop(t)
}

// The live WAL view of a busy daemon (the generator), then of one that
// stops answering (SIGSTOP): the page updates itself — rows acked move,
// counted since it opened — and shows every panel: the tape with segments
// and their PARTs, the completion bitmaps, the delay chart's five lines,
// the memory pool with its three bars, the namespaces, the alert feed;
// it asks nothing of any other origin. Frozen, the daemon leaves the page
// saying "not answering" and how long ago it last answered, its panels
// dimmed but still drawn; resumed, it is live again; killed, it says so.
// A screenshot of each state is kept as a test artifact
// (SKIPPR_TEST_ARTIFACTS, else the temp directory).
func TestLiveViewInBrowser(t *testing.T) {
	browser, bin := liveBrowserTest(t)
	t.Parallel()
	p := startDaemon(t, bin, t.TempDir())
	base := adminBase(t, p)
	p.waitStdout(t, "ingest", progressLines("acked", 2))

	page := nodetest.OpenLive(t, browser, base+"/")
	page.Until("live", 30*time.Second)
	first, last, most := page.Watch(2500*time.Millisecond, 15*time.Second, "bits")
	page.Shot(artifact(t, "live-view.png"))
	t.Logf("first read %+v", first)
	t.Logf("last read %+v", last)
	t.Logf("most seen %+v", most)
	switch {
	case last.Status != "live":
		t.Errorf("the page says %q, not live", last.Status)
	case len(last.Broken()) > 0:
		t.Errorf("panels show errors: %v", last.Broken())
	case !(first.Acked > 0 && last.Acked > first.Acked && last.SinceOpen > 0 && last.Polls > first.Polls):
		t.Errorf("the page did not update itself: acked %d then %d, %d since it opened, %d then %d updates",
			first.Acked, last.Acked, last.SinceOpen, first.Polls, last.Polls)
	case last.SegDivs == 0 || most.TapeSegments == 0 || most.Parts == 0:
		t.Errorf("the tape shows %d segments, at most %d live with %d PARTs", last.SegDivs, most.TapeSegments, most.Parts)
	case most.BitRows == 0 || most.Bits == 0:
		t.Errorf("no completion bitmap in any read: at most %d rows, %d bits", most.BitRows, most.Bits)
	case last.ChartLines != 5:
		t.Errorf("the delay chart draws %d lines, want 5 (ACK delay, persist EMA, flush delay, two bounds)", last.ChartLines)
	case last.MemoryBars != 3 || !strings.Contains(last.Memory, "pinned"):
		t.Errorf("the memory panel: %d bars, %q", last.MemoryBars, last.Memory)
	case !strings.Contains(last.Namespaces, "events"):
		t.Errorf("the namespaces panel shows %q, no events", last.Namespaces)
	case !strings.Contains(last.Waiting, "waiting for a file: lake/"):
		t.Errorf("the namespaces panel shows no lane waiting for its file on a busy daemon (lake files are cut at 128 MiB or 5 min): %q", last.Waiting)
	case last.Alerts != "none":
		t.Errorf("the alert feed shows %q on a healthy daemon", last.Alerts)
	case len(page.Outside) > 0:
		t.Errorf("the page asked other origins for %v", page.Outside)
	}
	checkLiveJSON(t, base)

	sendSignal(t, p, syscall.SIGSTOP)
	frozen := page.Until("not answering", 15*time.Second)
	page.Shot(artifact(t, "live-view-not-answering.png"))
	t.Logf("frozen: %+v", frozen)
	if !strings.HasPrefix(frozen.Status, "not answering") || !strings.Contains(frozen.Status, "s ago") || !frozen.Stale {
		t.Errorf("with the daemon frozen the page says %q (stale %v)", frozen.Status, frozen.Stale)
	}
	if frozen.SegDivs == 0 || frozen.MemoryBars != 3 || frozen.ChartLines != 5 || len(frozen.Broken()) > 0 {
		t.Errorf("a daemon that stops answering blanked the panels: %+v", frozen)
	}
	sendSignal(t, p, syscall.SIGCONT)
	if back := page.Until("live", 15*time.Second); back.Status != "live" || back.Stale || back.Polls <= frozen.Polls {
		t.Errorf("resumed, the page says %q (stale %v, %d updates, %d before)", back.Status, back.Stale, back.Polls, frozen.Polls)
	}
	p.kill(t)
	if gone := page.Until("not answering", 15*time.Second); !strings.HasPrefix(gone.Status, "not answering") {
		t.Errorf("with the daemon killed the page says %q", gone.Status)
	}
	png, err := os.ReadFile(artifact(t, "live-view.png"))
	if err != nil || len(png) < 10_000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatalf("screenshot: %d bytes, err %v", len(png), err)
	}
}

// The live WAL view of a daemon with an alert: a Postgres sink refused a
// job (text into a bigint column), so its segment is kept. The tape shows
// the kept segment, the alert feed names the refusal, and every other
// panel draws as usual.
func TestLiveViewAlert(t *testing.T) {
	browser, bin := liveBrowserTest(t)
	dst := pgtest.Database(t)
	t.Parallel()
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  wh: {kind: postgres, url_env: PG_DST}\n"+
		"sources:\n  - {name: api, kind: http, sink: wh, listen: \"127.0.0.1:0\"}\n")
	p := startDaemon(t, bin, t.TempDir(), envPipelineFile+"="+pipeline, "PG_DST="+dst)
	base := adminBase(t, p)
	p.waitStderr(t, "ready", func(lines []string) bool { return findLine(lines, "msg=ready") != "" })
	ingest := "http://" + listenAddr(p.stderrLines()) + "/v1/ingest/things"
	postJSONLines(t, ingest, "k1", `{"id":1,"n":7}`+"\n")
	postJSONLines(t, ingest, "k2", `{"id":2,"n":"seven"}`+"\n")
	p.waitStderr(t, "the cannot-apply alert", func(lines []string) bool { return findLine(lines, "kind=cannot-apply") != "" })

	page := nodetest.OpenLive(t, browser, base+"/")
	page.Until("live", 15*time.Second)
	_, last, most := page.Watch(1500*time.Millisecond, 10*time.Second, "kept")
	page.Shot(artifact(t, "live-view-alert.png"))
	t.Logf("alert: %+v", last)
	switch {
	case last.Status != "live" || len(last.Broken()) > 0:
		t.Errorf("status %q, panels with errors %v", last.Status, last.Broken())
	case most.Kept == 0 || last.Kept == 0:
		t.Errorf("the tape shows no kept segment (%d at most): %+v", most.Kept, last)
	case !strings.Contains(last.Alerts, "cannot-apply") || !strings.Contains(last.Alerts, "things"):
		t.Errorf("the alert feed shows %q, not the refusal of table things", last.Alerts)
	case last.Bits == 0 || last.ChartLines != 5 || last.MemoryBars != 3 || !strings.Contains(last.Namespaces, "things"):
		t.Errorf("the other panels: %+v", last)
	}
	checkLiveJSON(t, base)
	p.stop(t)
}

// A panel that cannot draw its part of the answer shows why, naming the
// field, and the others draw on: the page served with an answer whose
// segments are not a list and whose memory holds text. Missing fields
// (no namespaces, no alerts at all) are empty, not errors.
func TestLiveViewPanelsDrawAlone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a headless Chromium")
	}
	browser := chromium(t)
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", (&liveView{}).page)
	mux.HandleFunc("GET /api/live", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"uptime_s":3,"acked_rows":5,"applied_rows":2,"segments":"oops","reclaimed":null,`+
			`"ack_delay_ms":1,"persist_ema_ms":2,"flush_delay_ms":3,"delay_lower_ms":1,"delay_upper_ms":9,`+
			`"memory":{"pool":1,"held":"lots"}}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	page := nodetest.OpenLive(t, browser, srv.URL+"/")
	page.Until("live", 15*time.Second)
	_, r, _ := page.Watch(1200*time.Millisecond, 0, "")
	page.Shot(artifact(t, "live-view-broken-answer.png"))
	t.Logf("broken answer: %+v", r)
	for panel, want := range map[string]string{"tape": "segments is text", "bitmaps": "segments is text", "memory": "memory.held is text", "counters": "segments is text"} {
		if !strings.Contains(r.Errors[panel], want) {
			t.Errorf("the %s panel shows %q, want an error naming %q", panel, r.Errors[panel], want)
		}
	}
	for _, panel := range []string{"chart", "namespaces", "alerts"} {
		if r.Errors[panel] != "" {
			t.Errorf("the %s panel failed with the others: %q", panel, r.Errors[panel])
		}
	}
	if r.Status != "live" || r.Acked != 5 || r.ChartLines != 5 || r.Namespaces != "none yet" || r.Alerts != "none" {
		t.Errorf("the panels that can draw did not: %+v", r)
	}
}

// adminBase waits for the admin listener's line and returns its URL.
func adminBase(t *testing.T, p *proc) string {
	t.Helper()
	var addr string
	p.waitStderr(t, "the admin listener", func(lines []string) bool {
		line := findLine(lines, `msg="admin listening"`)
		_, rest, ok := strings.Cut(line, " addr=")
		addr, _, _ = strings.Cut(rest, " ")
		return ok && addr != ""
	})
	return "http://" + addr
}

// checkLiveJSON reads /api/live as it is now: no null anywhere in it.
func checkLiveJSON(t *testing.T, base string) {
	t.Helper()
	resp, err := http.Get(base + "/api/live")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/api/live: %s %v: %s", resp.Status, err, b)
	}
	if nulls, err := jsonNulls(b); err != nil || len(nulls) > 0 {
		t.Errorf("/api/live has null at %v (%v): %s", nulls, err, b)
	}
}

// artifact is the path of a test artifact: in SKIPPR_TEST_ARTIFACTS,
// else in the temp directory.
func artifact(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("SKIPPR_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "skipprd-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, name)
}

func sendSignal(t *testing.T, p *proc, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("%v: %v", sig, err)
	}
}
