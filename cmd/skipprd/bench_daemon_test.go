package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/logbuf"
)

// benchDaemon is the daemon running in this process for a benchmark:
// a fresh DATA_DIR, its lake under it, its admin address.
type benchDaemon struct {
	lake   string
	admin  string
	logs   *logbuf.Buffer
	cancel context.CancelFunc
	exited chan int
}

// startBenchDaemonWith runs the daemon on a fresh DATA_DIR with the
// pipeline pipeline(lake) writes (lake: the Parquet folder's path) and
// the variables env adds, and waits for its admin address. The AWS SDK
// reads the process's environment, so env is set there too.
func startBenchDaemonWith(b *testing.B, pipeline func(lake string) string, env map[string]string) *benchDaemon {
	b.Helper()
	dir := b.TempDir()
	d := &benchDaemon{lake: filepath.Join(dir, "lake"), logs: &logbuf.Buffer{}, exited: make(chan int, 1)}
	file := filepath.Join(dir, "skipprd.yaml")
	if err := writeText(file, pipeline(d.lake)); err != nil {
		b.Fatal(err)
	}
	vars := map[string]string{envDataDir: filepath.Join(dir, "data"), envPipelineFile: file, envAdminAddr: "127.0.0.1:0"}
	for k, v := range env {
		vars[k] = v
		b.Setenv(k, v)
	}
	var ctx context.Context
	ctx, d.cancel = context.WithCancel(context.Background())
	go func() {
		d.exited <- run(ctx, func(k string) string { return vars[k] }, io.Discard, slog.New(slog.NewTextHandler(d.logs, nil)))
	}()
	b.Cleanup(func() { d.stop(b) })
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		_, a, _ := strings.Cut(findLine(strings.Split(d.logs.String(), "\n"), `msg="admin listening"`), " addr=")
		if d.admin, _, _ = strings.Cut(a, " "); d.admin != "" {
			return d
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatalf("no admin address:\n%s", d.logs.String())
	return nil
}

// waitAcked waits for namespace's acked rows to reach n.
func (d *benchDaemon) waitAcked(b *testing.B, namespace string, n int) {
	b.Helper()
	key := `skipprd_rows_acked_total{namespace="` + namespace + `"}`
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		if m, err := scrapeMetricsOnce("http://" + d.admin); err == nil && m[key] >= float64(n) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Fatalf("%d rows not acked within 5 minutes:\n%s", n, d.logs.String())
}

// stop stops the daemon (once) and fails b if it exited other than 0.
func (d *benchDaemon) stop(b *testing.B) {
	if d.cancel == nil {
		return
	}
	d.cancel()
	d.cancel = nil
	if code := <-d.exited; code != 0 {
		b.Errorf("daemon exit %d:\n%s", code, d.logs.String())
	}
}
