// Command skipprd is the ingest daemon and its command line (cli.go):
// run (the daemon, also what a bare skipprd does), check (check.go: a
// pipeline file and the settings, every problem a line, nothing opened),
// inspect (a pipeline's WAL, read-only), version (version.go) and help.
// Every setting is an environment variable; the flags of the ones set
// per run win over them. A wrong command line exits 2 before anything
// is opened. With no configuration the daemon keeps
// its write-ahead log on local disk under DATA_DIR/wal (./data/wal) and
// its segments under DATA_DIR/segments, ingests the generator source,
// applies committed segments to Iceberg tables under DATA_DIR/lake (a
// SQLite catalog beside them), and prints a progress line every second;
// a pipeline file (SKIPPR_CONFIG, pipeline.go, pipeline_check.go,
// pipeline_open.go) names other sources and sinks instead, each wired in
// a source_*.go file. SIGINT or SIGTERM
// shuts it down gracefully: the sources stop, everything held is
// committed and acked, compaction drains what it can, exit 0. A second
// signal exits at once; the next start recovers from the WAL. An admin
// listener on loopback (SKIPPR_ADMIN_ADDR) serves /metrics, /healthz and
// /readyz (admin.go, metrics.go) and the live WAL view, a page polling
// /api/live (live.go, web/live.html). SKIPPR_CHAOS_MODE=yes
// makes it its own supervisor that SIGKILLs and restarts itself, then
// judges the lake (chaos.go). skipprd inspect reads a pipeline's WAL
// without starting it — its live segments with their PARTs and
// completion bitmaps, the committed offsets, the idempotency-key store,
// the disk log's files, orphans and dangling uploads — writing nothing
// and taking no lock, so it also looks at a running daemon's WAL
// (inspect*.go). skipprd run --once (SKIPPR_ONCE=true) ingests what
// the sources hold at start, applies it and exits (once.go). README.md
// lists the environment variables.
// Built with -tags recordpath (scripts/record-path only), recordpath.go
// lets SIGUSR1 and SIGUSR2 clear and write the coverage counters, to
// measure one record's path through the running daemon.
package main
