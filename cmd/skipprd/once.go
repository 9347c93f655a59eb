package main

// Once mode (skipprd run --once, SKIPPR_ONCE=true): the daemon ingests
// what its sources hold at start, commits it, applies every job to its
// sinks, reclaims, and exits — for a pipeline run by cron or a batch job
// in a container that goes away. Each source that can reach an end is
// built with its once option (the files and objects sources: their
// listing at start; postgres-cdc: the server's WAL position at start;
// nats: the stream's last sequence at start; kafka, without a group:
// the partitions' high watermarks at start),
// and run returns nil once it has delivered everything up to that mark
// and every unit it handed over is acked. When all have, serve stops as
// on a signal, with a stop grace long enough for the close to apply
// every job and reclaim every applied segment; the exit code then says
// whether anything is left in the WAL (onceVerdict).

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// onceStopGrace is the stop grace of a once run whose
// SKIPPR_STOP_GRACE_SECONDS is unset: the run is over only when every
// applied segment is reclaimed, so the close may take the time applying
// a large backlog takes (the default grace, counted from the close's
// start, is shorter than that on a loaded machine); past it the run
// exits 1 and the next one finishes the reclaims.
const onceStopGrace = 10 * time.Minute

// parseOnce reads SKIPPR_ONCE and, in once mode, gives the stop grace
// its once default unless SKIPPR_STOP_GRACE_SECONDS sets it.
func parseOnce(get func(string) (string, bool), c *config) error {
	v, ok := get(envOnce)
	if !ok {
		return nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return &configError{envOnce, v, "want true (ingest what the sources hold at start, apply it, exit) or false (the default: run until stopped)"}
	}
	c.Once = b
	if _, set := get(envStopGrace); b && !set {
		c.StopGrace = onceStopGrace
	}
	return nil
}

// onceRefusals returns, for each source of pf that has no end to reach
// in once mode, a problem naming it and why; nil when all can end.
func onceRefusals(pf *pipelineFile) error {
	var errs []error
	for _, s := range pf.Sources {
		why := onceRefusal(s)
		if why == "" {
			continue
		}
		msg := fmt.Sprintf("source %q (kind %s) cannot run with %s=true (run --once): %s", s.Name, s.Kind, envOnce, why)
		if pf.Path == "" {
			errs = append(errs, errors.New("no pipeline file: "+msg+"; give a pipeline file (--config or "+envPipelineFile+") whose sources are files, objects, postgres-cdc, kafka or nats"))
			continue
		}
		errs = append(errs, &pipelineError{Path: pf.Path, Line: s.Line, Msg: msg})
	}
	return errors.Join(errs...)
}

// onceRefusal says why source s cannot run once, or "" when it can.
func onceRefusal(s sourceSpec) string {
	switch {
	case s.Kafka != nil && s.Kafka.Group != "":
		return fmt.Sprintf("with group %q a consumer group splits the partitions among its members, so no member knows the high watermarks "+
			"it must reach; leave group out to run once (the offsets live in the WAL either way)", s.Kafka.Group)
	case s.Files != nil, s.Objects != nil, s.PGCDC != nil, s.NATS != nil, s.Kafka != nil:
		return ""
	case s.HTTP != nil:
		return "an HTTP endpoint holds nothing at start: it takes what clients send while it listens, so it has no end to reach; run it as a daemon"
	case s.MQTT != nil:
		return "an MQTT subscription holds nothing at start: it takes what is published while it is connected, so it has no end to reach; run it as a daemon"
	case s.Generator:
		return "the generator makes records for ever, so it has no end to reach"
	}
	return "its kind has no once mode"
}

// onceVerdict is a once run's exit code after the close: 0 when every
// source finished and the WAL holds nothing live (every acked record
// applied, every applied segment reclaimed), else 1 with a log line
// naming what is left and why (a source that did not finish has said
// why already). ok is whether the engine answered the last stats query
// (st).
func (d *daemon) onceVerdict(st engine.Stats, ok, finished bool) int {
	switch {
	case !ok:
		d.log.Error("once: the engine did not answer after the close: whether everything was applied is unknown; the next run applies what is left",
			"within", finalStatsWait)
		return 1
	case st.LiveSegments == 0 && !finished:
		d.log.Info("once: what was acked is applied and the WAL holds nothing live, but the run did not finish (above); the next run goes on",
			"rows_applied", st.RowsApplied, "segments_reclaimed", st.SegmentsReclaimed)
		return 1
	case st.LiveSegments == 0:
		d.log.Info("once: done: everything the sources held at start is applied and the WAL holds nothing live",
			"rows_applied", st.RowsApplied, "jobs_applied", st.JobsApplied, "segments_reclaimed", st.SegmentsReclaimed)
		return 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), statsWait)
	defer cancel()
	troubles, _ := d.host.Troubles(ctx) // the host has stopped: its state is frozen
	if len(troubles) == 0 {
		d.log.Error("once: stopped with segments left in the WAL: the stop grace ran out before their reclaims finished; the next run finishes them",
			"live_segments", st.LiveSegments, "stop_grace", d.ecfg.StopGrace, "setting", envStopGrace)
		return 1
	}
	for _, t := range troubles {
		d.log.Error("once: stopped with segments left in the WAL, which the next run applies: still failing",
			"live_segments", st.LiveSegments, "op", t.Op, "attempts", t.Attempts, "err", t.Err)
	}
	return 1
}
