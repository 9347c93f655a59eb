package main

import (
	"context"
	"fmt"
	"time"

	"github.com/skipprd/skipprd/engine"
)

const (
	drainPoll     = 200 * time.Millisecond
	drainLogEvery = 2 * time.Second
	// drainCloseWait bounds the drained engine's graceful close; past it
	// the host is killed (what it holds stays in the WAL for next time).
	drainCloseWait = time.Minute
)

// drainLanes are the drain engine's lanes, every sink's: a job per
// segment, so that a lane the old pipeline left open is cut at once (the
// engine cuts an open job of a sink without limits as soon as it is
// registered) instead of waiting for the pipeline file's flush interval;
// the drain writes nothing else.
var drainLanes = engine.LaneLimits{}

// drainOwner runs the engine of rec's pipeline — the same storage
// settings, this pipeline file's sinks, no sources — until it owns no
// segment and holds nothing, then closes it gracefully. Its recovery
// replays that pipeline's log and registers its committed segments;
// compaction applies them; reclaim deletes them. An engine alert (a
// segment whose sink_ref this file does not configure, a sink refusing
// a job for good, corruption) ends it with an error naming the alert; a
// signal ends it with errDrainStopped. A sink that fails and retries is
// logged as the daemon logs it, and the drain waits.
func (d *daemon) drainOwner(ctx context.Context, rec ownerRecord, pf *pipelineFile, getenv func(string) string) error {
	oc := d.cfg
	oc.Pipeline, oc.WALPrefix = rec.Pipeline, rec.Prefix
	od := &daemon{cfg: oc, ecfg: oc.engineConfig(), log: d.log.With("drain_pipeline", rec.Pipeline)}
	od.ecfg.DefaultLanes = drainLanes
	sinksOnly := &pipelineFile{Path: pf.Path, Settings: pf.Settings, Sinks: pf.Sinks}
	od, err := od.open(ctx, sinksOnly, getenv)
	if err != nil {
		return fmt.Errorf("draining pipeline %q: %w", rec.Pipeline, err)
	}
	defer func() {
		for _, c := range od.closers {
			c()
		}
		if od.closeWAL != nil {
			if err := od.closeWAL(); err != nil {
				od.log.Error("closing the embedded store", "err", err)
			}
		}
	}()
	stopTroubles := make(chan struct{})
	troublesLogged := od.watchTroubles(stopTroubles)
	defer func() { close(stopTroubles); <-troublesLogged }()
	err = od.drainRun(ctx)
	cctx, cancel := context.WithTimeout(context.Background(), drainCloseWait)
	defer cancel()
	if cerr := od.host.Close(cctx); cerr != nil && err == nil {
		err = fmt.Errorf("draining pipeline %q: close: %w", rec.Pipeline, cerr)
	}
	if err == nil {
		if st, serr := od.host.Stats(context.Background()); serr == nil && st.Alerts > 0 {
			err = od.drainAlert(rec.Pipeline)
		}
	}
	return err
}

// drainRun recovers and waits until the engine owns no segment and holds
// no unit.
func (od *daemon) drainRun(ctx context.Context) error {
	old := od.cfg.Pipeline
	od.log.Info("draining: recovering the old pipeline's WAL", "fence_wait", od.ecfg.FenceWait)
	if err := od.host.Start(ctx); err != nil {
		if ctx.Err() != nil {
			return errDrainStopped
		}
		od.logAlerts(context.Background())
		return fmt.Errorf("draining pipeline %q: recovery failed: %w", old, err)
	}
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	var logged time.Time
	for {
		sctx, cancel := context.WithTimeout(ctx, statsWait)
		st, err := od.host.Stats(sctx)
		cancel()
		if err == nil {
			if st.Alerts > 0 {
				return od.drainAlert(old)
			}
			done := st.LiveSegments == 0 && st.HeldBytes == 0
			if done || time.Since(logged) >= drainLogEvery {
				od.log.Info("draining", "live_segments", st.LiveSegments, "held_bytes", st.HeldBytes,
					"replayed_units", st.WALReplayedUnits, "rows_applied", st.RowsApplied, "done", done)
				logged = time.Now()
			}
			if done {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			od.log.Info("stopped while draining; what is left stays in the WAL for the next start")
			return errDrainStopped
		case <-tick.C:
		}
	}
}

// drainAlert logs the drained engine's alerts and returns the first as
// the drain's error.
func (od *daemon) drainAlert(old string) error {
	ctx, cancel := context.WithTimeout(context.Background(), statsWait)
	defer cancel()
	alerts, _, err := od.host.AlertsSince(ctx, 0)
	od.logAlerts(ctx)
	if err != nil || len(alerts) == 0 {
		return fmt.Errorf("draining pipeline %q: the engine raised an alert (see the log)", old)
	}
	a := alerts[0]
	return fmt.Errorf("draining pipeline %q stopped on an engine alert, kind %s: %v; "+
		"what is not applied stays in its WAL: fix it (a sink_ref needs its sink in this pipeline file) and start again with %s=%s, "+
		"or start pipeline %q again", old, a.Kind, a.Err, envDrainPipeline, old, old)
}
