// Command skipprd is the ingest daemon. With no configuration it keeps
// its write-ahead log on local disk under DATA_DIR/wal (./data/wal) and
// its segments under DATA_DIR/segments, ingests the generator source,
// applies committed segments to Parquet files under DATA_DIR/lake, and
// prints a progress line every second; a pipeline file (SKIPPR_CONFIG,
// pipeline.go) names other sources and sinks instead. SIGINT or SIGTERM
// shuts it down gracefully: the sources stop, everything held is
// committed and acked, compaction drains what it can, exit 0. A second
// signal exits at once; the next start recovers from the WAL. An admin
// listener on loopback (SKIPPR_ADMIN_ADDR) serves /metrics, /healthz and
// /readyz (admin.go, metrics.go) and the live WAL view, a page polling
// /api/live (live.go, web/live.html). SKIPPR_CHAOS_MODE=yes
// makes it its own supervisor that SIGKILLs and restarts itself, then
// judges the lake (chaos.go). README.md lists the environment variables.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	log := newLogger(os.Getenv(envLogFormat), os.Stderr)
	ctx, stop := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-signals
		log.Info("signal received: shutting down gracefully", "signal", s.String())
		stop()
		s = <-signals
		log.Warn("second signal: exiting without a graceful shutdown; the next start recovers from the WAL", "signal", s.String())
		code := 1
		if n, ok := s.(syscall.Signal); ok {
			code = 128 + int(n)
		}
		os.Exit(code)
	}()
	os.Exit(run(ctx, os.Getenv, os.Stdout, log))
}
