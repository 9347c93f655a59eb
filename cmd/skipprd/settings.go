package main

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// A setting the daemon accepts but does not use as given — a value it
// keeps within its bounds, a variable that means nothing with the chosen
// WAL — is said at start-up, naming the variable, the value given and
// the value used (or that it is ignored). Values that cannot work at all
// are refused instead (configError, exit 2).

// adjusted is one setting used otherwise than given.
type adjusted struct {
	Var, Given, Used, Why string
}

// adjustments lists the settings of c (parsed from getenv) used otherwise
// than given.
func (c config) adjustments(getenv func(string) string) []adjusted {
	given := func(name string) string { return strings.TrimSpace(getenv(name)) }
	var out []adjusted
	if v := given(envBufferBytes); v != "" {
		if used := min(max(c.BufferThresholdBytes, engine.TargetBytesMin), engine.TargetBytesMax); used != c.BufferThresholdBytes {
			out = append(out, adjusted{envBufferBytes, v, fmt.Sprint(used),
				fmt.Sprintf("the segment target is kept within %d..%d bytes (4–64 MiB)", engine.TargetBytesMin, engine.TargetBytesMax)})
		}
	}
	if v := given(envIngestThreads); v != "" {
		if used := min(max(c.IngestThreads, engine.QueueCapacityMin), engine.QueueCapacityMax); used != c.IngestThreads {
			out = append(out, adjusted{envIngestThreads, v, fmt.Sprint(used),
				fmt.Sprintf("it sizes the writer queue, kept within %d..%d", engine.QueueCapacityMin, engine.QueueCapacityMax)})
		}
	}
	ignored := func(name, why string) {
		if v := given(name); v != "" {
			out = append(out, adjusted{name, v, "ignored", why})
		}
	}
	switch {
	case c.WALStorage == walEmbedded:
		for _, name := range []string{envWALBucket, envBucket, envS3Timeout} {
			ignored(name, "WAL_STORAGE=embedded keeps the WAL in its own store under DATA_DIR; set WAL_STORAGE=s3 to use a bucket")
		}
	case c.Bucket == "":
		ignored(envS3Timeout, "no bucket is configured (it times the WAL bucket's requests)")
	}
	// S3_PATH_STYLE is never ignored: it addresses the lake's and the
	// sources' S3 clients as well as the WAL's.
	if c.WALStorage != walDisk {
		for _, name := range []string{envWALSyncMode, envWALBatchSyncInterval, envWALCommitInterval, envWALSegmentBytes, envWALPartitions} {
			ignored(name, fmt.Sprintf("local-disk WAL settings are checked but used with WAL_STORAGE=disk only (here %s)", c.WALStorage))
		}
	}
	return out
}

// logAdjustments warns of each setting used otherwise than given.
func logAdjustments(log *slog.Logger, adj []adjusted) {
	for _, a := range adj {
		log.Warn("setting not used as given", "var", a.Var, "given", a.Given, "used", a.Used, "why", a.Why)
	}
}

// The recovery give-up: how long recovery may keep failing before the
// daemon exits 1 with the reason (engine.Config.RecoveryGiveUp).
const (
	envRecoveryGiveUp        = "SKIPPR_RECOVERY_GIVE_UP_SECONDS"
	defaultRecoveryGiveUp    = 2 * time.Minute
	recoveryGiveUpSecondsMax = 24 * 60 * 60
)

// The stop grace: how long, from its start, a graceful stop waits for
// the reclaims of applied segments before it leaves the rest in the WAL
// for the next start (engine.Config.StopGrace); jobs that can start
// always run to their end. Set it below the supervisor's own
// grace (Kubernetes' terminationGracePeriodSeconds, 30 by default).
const (
	envStopGrace        = "SKIPPR_STOP_GRACE_SECONDS"
	stopGraceSecondsMax = 60 * 60
)
