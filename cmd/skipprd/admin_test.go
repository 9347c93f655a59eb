package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/logbuf"
)

// The admin listener of a daemon running in this process (embedded S3
// WAL, the generator, small segments): /healthz answers at once, /readyz
// is 503 while recovery waits out its fence and 200 after, and two
// scrapes of /metrics a while apart see ingest, acks, commits and S3
// requests move.
func TestAdminMetricsAndProbes(t *testing.T) {
	env := map[string]string{
		envDataDir: filepath.Join(t.TempDir(), "data"), envWALStorage: "embedded",
		envAdminAddr: "127.0.0.1:0", envBufferBytes: "65536", envMaxDelay: "0.2",
	}
	var logs logbuf.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, envOf(env), io.Discard, slog.New(slog.NewTextHandler(&logs, nil))) }()
	defer func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("daemon exit %d:\n%s", code, logs.String())
		}
	}()
	base := "http://" + waitLog(t, &logs, "msg=\"admin listening\"", "addr=")
	// The embedded store's fence wait (6.25 s) holds recovery: not ready.
	if code, body := get(t, base+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz during recovery: %d %s", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "recovering") {
		t.Fatalf("/readyz during recovery: %d %q; want 503 naming recovery (logs:\n%s)", code, body, logs.String())
	}
	waitLog(t, &logs, "msg=ready", "")
	if code, body := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after recovery: %d %s", code, body)
	}
	first := scrapeUntil(t, base, func(m metrics) bool { return m.sum("skipprd_rows_acked_total") > 0 })
	// Each series moves on its own schedule (the generator submits only
	// while admission has room, a commit may land between two submits),
	// so the second scrape waits until all of them have grown.
	growing := []string{
		"skipprd_commits_total",
		"skipprd_units_submitted_total", "skipprd_rows_submitted_total", "skipprd_units_acked_total",
		"skipprd_rows_acked_total", "skipprd_ack_delay_seconds_count", "skipprd_persist_seconds_count",
		"skipprd_s3_requests_total{op=\"put\",outcome=\"ok\"}",
	}
	second := scrapeUntil(t, base, func(m metrics) bool {
		for _, name := range growing {
			if !(m.sum(name) > first.sum(name)) {
				return false
			}
		}
		return true
	})
	for _, name := range []string{"skipprd_live_segments", "skipprd_memory_pool_bytes", "skipprd_admission_limit_bytes", "skipprd_body_cache_pinned_bytes",
		"skipprd_alerts_total{kind=\"fenced\"}", "skipprd_engine_stats_up", "go_goroutines", "process_start_time_seconds",
		"skipprd_iceberg_commit_outcomes_total{outcome=\"committed\",sink=\"lake\"}"} {
		if _, ok := second[name]; !ok && second.sum(name) == 0 {
			t.Errorf("%s missing from the scrape", name)
		}
	}
	if second["skipprd_engine_stats_up"] != 1 || second.sum("skipprd_alerts_total") != 0 {
		t.Errorf("stats up %v, alerts %v", second["skipprd_engine_stats_up"], second.sum("skipprd_alerts_total"))
	}
	if !(first.sum("skipprd_segment_bytes")+second.sum("skipprd_segment_bytes") > 0 || second.sum("skipprd_segments_reclaimed_total") > 0) {
		t.Errorf("no segment bytes and no reclaims in either scrape")
	}
}

// metrics is one scrape: series ("name{labels}") → value.
type metrics map[string]float64

// sum adds every series whose name, with or without labels, is prefix
// (or which starts with prefix when it already names labels).
func (m metrics) sum(prefix string) float64 {
	var s float64
	for k, v := range m {
		if k == prefix || strings.HasPrefix(k, prefix+"{") {
			s += v
		}
	}
	return s
}

// scrapeUntil scrapes /metrics until ok holds.
func scrapeUntil(t *testing.T, base string, ok func(metrics) bool) metrics {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for {
		code, body := get(t, base+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		m := parseMetrics(t, body)
		if ok(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("the scrape never moved:\n%s", body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// parseMetrics reads the text exposition format's samples.
func parseMetrics(t *testing.T, body string) metrics {
	t.Helper()
	m := metrics{}
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// waitLog waits for a log line containing msg and returns the value of
// its attribute attr ("" for none).
func waitLog(t *testing.T, logs *logbuf.Buffer, msg, attr string) string {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for time.Now().Before(deadline) {
		if line := findLine(strings.Split(logs.String(), "\n"), msg); line != "" {
			if attr == "" {
				return ""
			}
			_, v, _ := strings.Cut(line, " "+attr)
			v, _, _ = strings.Cut(v, " ")
			return v
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no log line %s:\n%s", msg, logs.String())
	return ""
}

// Invalid admin and log variables exit 2 before anything starts, naming
// the variable.
func TestAdminRunRejectsInvalidEnvironment(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{envAdminAddr, "9090"},
		{envAdminAddr, "127.0.0.1:99999"},
		{envAdminAddr, "localhost:http"},
		{envLogFormat, "xml"},
	} {
		t.Run(c.name+"="+c.value, func(t *testing.T) {
			var logs strings.Builder
			dir := t.TempDir()
			code := run(context.Background(), envOf(map[string]string{envDataDir: dir, c.name: c.value}), io.Discard,
				slog.New(slog.NewTextHandler(&logs, nil)))
			if code != 2 || !strings.Contains(logs.String(), c.name) {
				t.Fatalf("exit %d, logs:\n%s", code, logs.String())
			}
		})
	}
}

// "off" turns the admin listener off; json and text are the formats.
func TestAdminConfigValues(t *testing.T) {
	c, err := parseConfig(envOf(map[string]string{envAdminAddr: "OFF", envLogFormat: "JSON"}))
	if err != nil || c.AdminAddr != "" || c.LogFormat != logJSON {
		t.Fatalf("admin %q, format %q, %v", c.AdminAddr, c.LogFormat, err)
	}
	c, err = parseConfig(envOf(map[string]string{envAdminAddr: ":9100"}))
	if err != nil || c.AdminAddr != ":9100" || c.LogFormat != logText {
		t.Fatalf("admin %q, format %q, %v", c.AdminAddr, c.LogFormat, err)
	}
}

// SKIPPR_LOG_FORMAT=json writes one JSON object a line.
func TestAdminLoggerJSON(t *testing.T) {
	var out strings.Builder
	newLogger("json", &out).Info("hello", "k", 1)
	var rec map[string]any
	if err := json.Unmarshal([]byte(out.String()), &rec); err != nil || rec["msg"] != "hello" || rec["k"] != 1.0 {
		t.Fatalf("%q: %v %v", out.String(), rec, err)
	}
	out.Reset()
	newLogger("", &out).Info("hello")
	if !strings.Contains(out.String(), "msg=hello") {
		t.Fatalf("text: %q", out.String())
	}
}
