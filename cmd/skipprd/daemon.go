package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
	"github.com/skipprd/skipprd/storage"
)

// Names under DATA_DIR and in the stores.
const (
	embeddedFile   = "wal-s3.bolt" // the embedded store's bolt file
	embeddedBucket = "skipprd-wal"
	lakeDir        = "lake" // the default lake: an Iceberg warehouse folder
	lakeSinkRef    = "lake" // the sink_ref the generator writes to
	// segmentsDir is the local segment store's root (WAL_STORAGE=disk
	// without a bucket), relative to DATA_DIR like the log's wal.Root.
	segmentsDir = "segments"
	// checkBucketWait bounds the start-up bucket check.
	checkBucketWait = 30 * time.Second
	// statsWait bounds one progress query; a loop that busy skips a line.
	// The last line, after the graceful close, has no next tick to make
	// up for it (it shows what the stop left in the WAL): it may wait
	// finalStatsWait, and says so if even that was not enough.
	statsWait      = time.Second
	finalStatsWait = 10 * time.Second
	progressEvery  = time.Second
)

// daemon is the wired process: one host on the WAL (the local disk and
// a segment store, or an S3 store), the sinks and the sources of the
// pipeline file (or of the default pipeline: the generator into a
// Parquet folder).
type daemon struct {
	cfg      config
	ecfg     engine.Config
	log      *slog.Logger
	host     *storage.Host
	sources  []source
	closeWAL func() error     // the embedded store's Close; nil otherwise
	unlock   func() error     // releases DATA_DIR/wal.lock; nil unless WAL_STORAGE=disk
	s3       *storage.S3Store // the WAL's S3 store, for its request counts; nil with the local segment store
	alertSeq uint64           // the Seq of the last engine alert logged
	closers  []func()         // connection pools of sinks and sources, closed after the host
	icebergs []namedIceberg   // the Iceberg sinks, for their metrics
	chaos    chaosChild       // a chaos-mode child's part; zero otherwise
	stopSelf func()           // ends serve as a signal would
}

// run is the daemon from configuration to exit code: 0 after a graceful
// shutdown, 1 when something failed, 2 for an invalid environment.
func run(ctx context.Context, getenv func(string) string, stdout io.Writer, log *slog.Logger) int {
	started := time.Now()
	chaos, err := parseChaos(getenv)
	var child chaosChild
	if err == nil {
		child, err = parseChaosChild(getenv(envChaosChild))
	}
	if err != nil {
		logProblems(log, "invalid configuration", err)
		return 2
	}
	if chaos.on && child == (chaosChild{}) {
		return superviseChaos(ctx, chaos, stdout, log)
	}
	ctx, stopSelf := context.WithCancel(ctx)
	defer stopSelf()
	pf, err := pipelineOf(getenv)
	if err != nil {
		logProblems(log, "invalid pipeline file", err, "file", getenv(envPipelineFile))
		return 2
	}
	getenv = pf.applySettings(getenv)
	cfg, err := parseConfig(getenv)
	if err != nil {
		logProblems(log, "invalid configuration", err)
		return 2
	}
	if err := pf.resolveLanes(cfg.Lake); err != nil {
		logProblems(log, "invalid pipeline file", err, "file", getenv(envPipelineFile))
		return 2
	}
	if cfg.Once {
		// Before DATA_DIR is touched: a source with no end would never
		// let the run finish.
		if err := onceRefusals(pf); err != nil {
			logProblems(log, "refused in once mode", err)
			return 2
		}
	}
	logAdjustments(log, append(cfg.adjustments(getenv), pf.laneAdjustments(getenv)...))
	ln, err := listenAdmin(cfg.AdminAddr)
	if err != nil {
		log.Error("start-up failed", "err", err)
		return 1
	}
	d, err := newDaemon(ctx, cfg, pf, getenv, log)
	if err != nil && ln != nil {
		_ = ln.Close()
	}
	if errors.Is(err, errDrainStopped) {
		log.Info("stopped before start-up finished", "err", err)
		return 0
	}
	var ce *configError
	if errors.As(err, &ce) {
		log.Error("invalid configuration", "err", err)
		return 2
	}
	if err != nil {
		log.Error("start-up failed", "err", err)
		return 1
	}
	var adm *admin
	if ln != nil {
		adm = serveAdmin(ln, d)
	}
	d.chaos, d.stopSelf = child, stopSelf
	code := d.serve(ctx, stdout, started)
	if child.judge {
		code = max(code, d.judge(stdout, pf))
	}
	adm.close()
	for _, c := range d.closers {
		c()
	}
	if d.closeWAL != nil {
		if err := d.closeWAL(); err != nil {
			log.Error("closing the embedded store", "err", err)
			code = max(code, 1)
		}
	}
	if d.unlock != nil {
		_ = d.unlock() // the host has stopped: nothing writes the log any more
	}
	return code
}

// pipelineOf loads the pipeline file SKIPPR_CONFIG names, or returns the
// default pipeline without one.
func pipelineOf(getenv func(string) string) (*pipelineFile, error) {
	path := getenv(envPipelineFile)
	if path == "" {
		return defaultPipelineFile(), nil
	}
	return loadPipeline(path)
}

// newDaemon opens DATA_DIR (taking its WAL lock in disk mode), the WAL's
// stores and the lake, and builds the host (not started yet).
func newDaemon(ctx context.Context, cfg config, pf *pipelineFile, getenv func(string) string, log *slog.Logger) (*daemon, error) {
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("%s: %w", envDataDir, err)
	}
	d := &daemon{cfg: cfg, ecfg: cfg.engineConfig(), log: log}
	d.ecfg.Lanes = pf.engineLanes() // the sinks' names are their sink_refs
	if cfg.WALStorage == walDisk {
		// Before anything reads the log: another daemon may be writing it.
		unlock, err := lockWAL(filepath.Join(cfg.DataDir, walLockFile))
		if err != nil {
			return nil, err
		}
		d.unlock = unlock
	}
	// Before anything reads the WAL: whose is it (owner_check.go)?
	if err := d.takeOwnership(ctx, pf, getenv); err != nil {
		return d.fail(nil, err)
	}
	return d.open(ctx, pf, getenv)
}

// open opens the WAL's stores and the lake, and builds the host (not
// started yet) and the sources.
func (d *daemon) open(ctx context.Context, pf *pipelineFile, getenv func(string) string) (*daemon, error) {
	cfg, log := d.cfg, d.log
	loop := storage.NewLoop()
	var (
		store    engine.ObjectStore
		logDisk  engine.Disk
		segments string // where segments are, for the log
	)
	if cfg.WALStorage == walDisk {
		// Rooted at DATA_DIR: the engine writes its log under wal.Root
		// (DATA_DIR/wal/partition-{id}/…), the local segment store under
		// DATA_DIR/segments.
		disk, err := storage.NewOSDisk(loop, cfg.DataDir, storage.DiskOptions{Logger: log})
		if err != nil {
			return d.fail(nil, err)
		}
		logDisk = disk
		if cfg.localSegments() {
			store = diskstore.New(disk, loop.Clock(), storage.NewRand(), segmentsDir)
			segments = filepath.Join(cfg.DataDir, segmentsDir)
		}
	}
	if store == nil {
		s3, closeWAL, err := openS3(ctx, cfg, loop, log)
		if err != nil {
			return d.fail(nil, err)
		}
		store, d.closeWAL, d.s3 = s3, closeWAL, s3
		segments = "s3://" + cfg.Bucket
		if cfg.WALStorage == walEmbedded {
			segments = "embedded store " + filepath.Join(cfg.DataDir, embeddedFile)
		}
	}
	// The loop's executor encodes Parquet off the loop, as it encodes
	// segment bodies; Ports only assembles values, it starts nothing.
	exec := loop.Ports(nil, nil).Exec
	set, err := d.openSinks(ctx, pf, loop, exec, getenv)
	if err != nil {
		return d.fail(store, err)
	}
	memory := storage.NewSystemMemory(storage.MemoryFallbackBytes, log)
	d.host, err = storage.NewHost(d.ecfg, loop, storage.HostPorts{
		Store:  store,
		Disk:   logDisk,
		Sinks:  set,
		Memory: memory,
	})
	if err != nil {
		return d.fail(store, err)
	}
	if err := d.openSources(ctx, pf, getenv); err != nil {
		d.host.Kill()
		return d.fail(nil, err)
	}
	d.logMode(segments)
	log.Info("skipprd configured",
		"data_dir", cfg.DataDir, "wal_storage", string(cfg.WALStorage), "bucket", cfg.Bucket,
		"wal_root", d.host.Layout().Root(), "pipeline_file", pf.Path,
		"target_bytes", d.ecfg.TargetBytes, "max_delay", d.ecfg.MaxDelay, "queue", d.ecfg.QueueCapacity,
		"memory_available_bytes", memory.AvailableBytes(), "once", cfg.Once, "stop_grace", d.ecfg.StopGrace)
	return d, nil
}

// fail releases what newDaemon had opened (store may be nil) and returns
// err.
func (d *daemon) fail(store engine.ObjectStore, err error) (*daemon, error) {
	for _, c := range d.closers {
		c()
	}
	if c, ok := store.(interface{ Close() }); ok {
		c.Close()
	}
	if d.closeWAL != nil {
		_ = d.closeWAL()
	}
	if d.unlock != nil {
		_ = d.unlock()
	}
	for _, src := range d.sources {
		if h, ok := src.(*httpSource); ok {
			h.closeListener()
		}
	}
	return nil, err
}

// logMode says at start-up which WAL runs and where its bytes are.
func (d *daemon) logMode(segments string) {
	cfg := d.cfg
	switch cfg.WALStorage {
	case walDisk:
		w := d.ecfg.Disk
		d.log.Info("WAL: local disk; units are acked at the group-commit fsync",
			"log", filepath.Join(cfg.DataDir, wal.Root), "lock", filepath.Join(cfg.DataDir, walLockFile),
			"segments", segments, "sync_mode", w.Sync.String(), "batch_sync_interval", w.BatchSyncInterval,
			"commit_interval", w.CommitInterval, "segment_bytes", w.SegmentBytes, "partitions", w.Partitions)
	default:
		d.log.Info("WAL: S3; units are acked when their segment's commit marker lands",
			"wal_storage", string(cfg.WALStorage), "segments", segments)
	}
}

// openS3 connects the object store of the S3 WAL, or of the disk WAL's
// segments: the embedded one under DATA_DIR, or the configured bucket,
// checked to exist.
func openS3(ctx context.Context, cfg config, loop *storage.Loop, log *slog.Logger) (*storage.S3Store, func() error, error) {
	opts := storage.S3Options{RequestTimeout: cfg.requestTimeout()}
	if cfg.WALStorage == walEmbedded {
		if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", envDataDir, err)
		}
		emb, err := storage.StartEmbeddedS3(filepath.Join(cfg.DataDir, embeddedFile), embeddedBucket, log)
		if err != nil {
			return nil, nil, err
		}
		log.Info("embedded WAL store listening", "endpoint", emb.Endpoint(), "file", filepath.Join(cfg.DataDir, embeddedFile))
		return storage.NewS3Store(loop, emb.Client(), emb.Bucket(), opts), emb.Close, nil
	}
	client, err := storage.NewS3ClientFromEnv(ctx, storage.S3ClientOptions{PathStyle: cfg.PathStyle})
	if err != nil {
		return nil, nil, err
	}
	store := storage.NewS3Store(loop, client, cfg.Bucket, opts)
	checkCtx, cancel := context.WithTimeout(ctx, checkBucketWait)
	defer cancel()
	// A missing bucket must not read as an empty WAL (S3Store.CheckBucket).
	if err := store.CheckBucket(checkCtx); err != nil {
		store.Close()
		return nil, nil, fmt.Errorf("bucket %q (%s / %s): %w", cfg.Bucket, envWALBucket, envBucket, err)
	}
	return store, nil, nil
}

// serve recovers, runs the source and prints progress until ctx ends
// (the first signal) or the source fails, then shuts down gracefully.
func (d *daemon) serve(ctx context.Context, stdout io.Writer, started time.Time) int {
	stopTroubles := make(chan struct{})
	troublesLogged := d.watchTroubles(stopTroubles)
	defer func() { close(stopTroubles); <-troublesLogged }()
	d.log.Info("recovering the WAL", "fence_wait", d.ecfg.FenceWait, "give_up_after", d.ecfg.RecoveryGiveUp)
	if err := d.host.Start(ctx); err != nil {
		if ctx.Err() != nil {
			d.log.Info("stopped during recovery")
			// Recovery had not finished, so the engine holds nothing and
			// Close may answer ErrClosed: that is a clean stop.
			if err := d.host.Close(context.Background()); err != nil && !errors.Is(err, engine.ErrClosed) {
				d.log.Error("close", "err", err)
				return 1
			}
			return 0
		}
		d.log.Error("recovery failed", "err", err)
		code := d.close(1)
		d.logAlerts(context.Background()) // the host has stopped: its state is frozen
		return code
	}
	offsets, err := d.host.Offsets(ctx)
	if err != nil {
		return d.close(0) // only ctx ends Offsets on a running host
	}
	origin, err := d.host.Origin(ctx)
	if err != nil {
		return d.close(0)
	}
	d.log.Info("ready", "startup", time.Since(started).Round(time.Millisecond), "pipeline", origin.Pipeline, "wal_id", origin.WAL.String())
	d.chaos.ready(d.log, d.stopSelf)
	srcCtx, stopSources := context.WithCancel(context.Background())
	defer stopSources()
	done := make(chan sourceEnd, len(d.sources))
	for _, src := range d.sources {
		go func() { done <- sourceEnd{src, src.run(srcCtx, d.host, offsets)} }()
	}
	code, running := d.watch(ctx, stdout, started, done, len(d.sources))
	finished := code == 0 // in once mode: every source delivered what it held at start

	d.log.Info("shutting down: committing what is held (signal again to exit at once)")
	stopSources()
	code = max(code, d.close(0)) // answers the units in flight, so the sources can stop
	for range running {
		if end := <-done; end.err != nil && !errors.Is(end.err, engine.ErrClosed) {
			d.log.Warn("source stopped with an error", append(end.src.describe(), "err", end.err)...)
		}
	}
	st, ok := d.printProgressWithin(stdout, started, finalStatsWait)
	switch {
	case d.cfg.Once:
		code = max(code, d.onceVerdict(st, ok, finished))
	case !ok:
		d.log.Warn("no last progress line: the engine did not answer", "within", finalStatsWait)
	case st.LiveSegments > 0:
		d.log.Info("stopped with segments not yet applied: the next start applies them (a sink failing while stopping, or SKIPPR_STOP_GRACE_SECONDS ran out)",
			"live_segments", st.LiveSegments, "stop_grace", d.ecfg.StopGrace)
	}
	for _, src := range d.sources {
		if g, ok := src.(*genSource); ok {
			d.log.Info("generator stopped at", offsetAttrs(g.gen.Positions())...)
			d.logCommitted(g.gen.Positions())
		}
	}
	return code
}

// logCommitted logs the WAL's committed offsets of the keys of acked: where
// the next start resumes. A unit the WAL committed while its source was
// stopping may never have been answered to it, so these may be ahead of
// what the source was acked — never behind.
func (d *daemon) logCommitted(acked segment.Offsets) {
	ctx, cancel := context.WithTimeout(context.Background(), adminQueryWait)
	defer cancel()
	all, err := d.host.Offsets(ctx)
	if err != nil {
		return
	}
	mine := make(segment.Offsets, 0, len(acked)) // acked's keys, in its order
	for _, o := range acked {
		v, _ := all.Get(o.Key) // 0: nothing of it committed
		mine = append(mine, segment.Offset{Key: o.Key, Value: v})
	}
	d.log.Info("the WAL committed up to", offsetAttrs(mine)...)
}

// sourceEnd is how a source's run ended.
type sourceEnd struct {
	src source
	err error
}

// watch prints progress every second until ctx ends or a source fails —
// or, in once mode, until every source has finished (delivered what it
// held at start, all of it acked). It returns the exit code so far and
// how many sources still run.
func (d *daemon) watch(ctx context.Context, stdout io.Writer, started time.Time, done chan sourceEnd, running int) (int, int) {
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	d.printProgress(stdout, started)
	for {
		select {
		case <-ctx.Done():
			if d.cfg.Once {
				d.log.Error("once: stopped by a signal before every source had delivered what it held at start; the next run goes on from what was acked",
					"sources_running", running)
				return 1, running
			}
			return 0, running
		case end := <-done:
			running--
			if end.err != nil {
				d.log.Error("source failed", append(end.src.describe(), "err", end.err)...)
				return 1, running
			}
			d.log.Info("source finished", end.src.describe()...)
			if d.cfg.Once && running == 0 {
				d.log.Info("once: every source delivered what it held at start and had it acked; applying it to the sinks")
				return 0, running
			}
		case <-tick.C:
			d.printProgress(stdout, started)
		}
	}
}

// close closes the host gracefully and returns code, or 1 if the close
// failed.
func (d *daemon) close(code int) int {
	if err := d.host.Close(context.Background()); err != nil {
		d.log.Error("close", "err", err)
		return 1
	}
	return code
}

func (d *daemon) printProgress(w io.Writer, started time.Time) {
	d.printProgressWithin(w, started, statsWait) // the loop is busy if not: the next tick will do
}

// printProgressWithin prints a progress line if the engine answers
// within wait, and reports whether it did, with the stats it printed.
func (d *daemon) printProgressWithin(w io.Writer, started time.Time, wait time.Duration) (engine.Stats, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	st, err := d.host.Stats(ctx)
	if err != nil {
		return engine.Stats{}, false
	}
	var ingested, acked uint64
	for _, src := range d.sources {
		i, a := src.stats()
		ingested, acked = ingested+i, acked+a
	}
	fmt.Fprintln(w, progressOf(time.Since(started), ingested, acked, st, d.ecfg.Disk != nil))
	if st.Alerts > d.alertSeq {
		d.logAlerts(ctx)
	}
	return st, true
}

// logAlerts logs each engine alert raised since the last one logged,
// once, with its kind and reason, and how many the engine's bounded
// queue dropped before they could be logged (metrics count every alert
// by kind, dropped or not).
func (d *daemon) logAlerts(ctx context.Context) {
	alerts, dropped, err := d.host.AlertsSince(ctx, d.alertSeq)
	if err != nil {
		return // the loop is busy; the next tick will do
	}
	if dropped > 0 {
		d.log.Error("engine alerts dropped from the queue before they were logged; see skipprd_alerts_total", "dropped", dropped)
	}
	for _, a := range alerts {
		d.log.Error("engine alert: an operator must look at this",
			"kind", a.Kind.String(), "seq", a.Seq, "reason", a.Err)
		d.alertSeq = a.Seq
	}
}

// offsetAttrs turns offsets into log attributes, key=value each.
func offsetAttrs(o segment.Offsets) []any {
	attrs := make([]any, 0, 2*len(o))
	for _, e := range o {
		attrs = append(attrs, e.Key, e.Value)
	}
	return attrs
}
