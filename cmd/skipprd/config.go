package main

import (
	"errors"
	"fmt"
	"math"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/wal"
)

// The daemon's environment. Every variable is optional; the defaults run
// the whole pipeline on one machine with nothing else installed.
const (
	envDataDir        = "DATA_DIR"
	envWALStorage     = "WAL_STORAGE"
	envBufferBytes    = "BUFFER_THRESHOLD_BYTES"
	envMaxDelay       = "WAL_MAX_DELAY_SECONDS"
	envIngestThreads  = "INGEST_THREADS"
	envPipeline       = "SKIPPR_PIPELINE"
	envPipelineFile   = "SKIPPR_CONFIG"
	envWALPrefix      = "SKIPPR_WAL_PREFIX"
	envWALBucket      = "SKIPPR_WAL_S3_BUCKET"
	envBucket         = "SKIPPR_S3_BUCKET"
	envS3PathStyle    = "SKIPPR_S3_PATH_STYLE"
	envS3Timeout      = "SKIPPR_S3_REQUEST_TIMEOUT_SECONDS"
	envAdminAddr      = "SKIPPR_ADMIN_ADDR"
	envLogFormat      = "SKIPPR_LOG_FORMAT"
	defaultDataDir    = "./data"
	defaultBuffer     = 8 << 20
	defaultPipeline   = "default"
	defaultWALPrefix  = "wal"
	maxDelaySecondMax = 24 * 60 * 60 // a ceiling of a day is already no ceiling
	ingestThreadsMax  = 4096
	pipelineBytesMax  = 128
)

// The admin listener's default is loopback: metrics and health say
// nothing secret, but nothing outside the machine should reach them
// unless the operator says so.
const (
	defaultAdminAddr = "127.0.0.1:9090"
	adminOff         = "off"
)

// The local-disk WAL's variables (used with WAL_STORAGE=disk), and the
// ceilings of its timings: beyond them an ack would wait longer than any
// source's timeout, so such a value is a typo.
const (
	envWALSyncMode          = "WAL_SYNC_MODE"
	envWALBatchSyncInterval = "WAL_BATCH_SYNC_INTERVAL_MS"
	envWALCommitInterval    = "WAL_COMMIT_INTERVAL_US"
	envWALSegmentBytes      = "WAL_SEGMENT_BYTES"
	envWALPartitions        = "WAL_PARTITIONS"
	batchSyncIntervalMsMax  = 60_000    // a minute
	commitIntervalUsMax     = 1_000_000 // a second
)

// walStorage says where the write-ahead log lives.
type walStorage string

const (
	// walDisk (the default): the local-disk WAL under DATA_DIR/wal; a unit
	// is acked at the group-commit fsync that covers it. Segments go to
	// the S3 bucket when one is configured, else to a local segment store
	// under DATA_DIR/segments.
	walDisk walStorage = "disk"
	// walEmbedded: an S3-compatible store inside the process, persisted to
	// one file under DATA_DIR (storage.StartEmbeddedS3).
	walEmbedded walStorage = "embedded"
	// walS3: a real bucket, through the standard AWS configuration.
	walS3 walStorage = "s3"
)

// Request timeouts of the S3 stores. The engine's FenceWait must exceed
// the request timeout (engine.Config.FenceWait): recovery waits that long
// before it reads the log, and settling an in-doubt commit waits that long
// before it trusts a HEAD, so that a request still in flight has landed or
// died. A short timeout therefore makes start-up quick.
//
//   - The embedded store answers from the same process over loopback; its
//     slowest request is one 8 MiB part written to bolt and fsynced, far
//     under 5 s on any disk the daemon should run on, so 5 s times out
//     only a store that is stuck, and recovery waits 6.25 s. (At start-up
//     no earlier incarnation's request can be in flight at all — that
//     process and its server are gone, and bolt's file lock keeps a second
//     one out — but the engine uses one FenceWait for both purposes.)
//   - Real S3 keeps S3Store's 30 s default (large parts over a slow
//     uplink), with DeriveConfig's 35 s fence. SKIPPR_S3_REQUEST_TIMEOUT_SECONDS
//     sets another timeout T (a store nearby answers far sooner), and
//     the fence is then T + T/6, the same ratio (30 s → 35 s).
//
// The local segment store (WAL_STORAGE=disk without a bucket) has no
// request timeout and needs no fence: every request of it is disk calls
// made by this process, and it answers only once they have returned, so
// none outlives its answer, and none outlives the process — a process's
// system calls end before the kernel releases its files, wal.lock among
// them, and the lock keeps the next daemon out until then. The fence is
// therefore zero and a restart reads the log at once.
const (
	embeddedRequestTimeout = 5 * time.Second
	s3RequestTimeout       = 30 * time.Second
	s3RequestTimeoutMax    = 600 // seconds: a request longer than 10 minutes is stuck
	localFenceWait         = 0
)

// config is the daemon's configuration, parsed from the environment.
type config struct {
	DataDir              string
	WALStorage           walStorage
	Pipeline             string
	WALPrefix            string
	BufferThresholdBytes int64
	MaxDelay             time.Duration
	IngestThreads        int
	Bucket               string        // WAL_STORAGE=s3; with disk, the segments' bucket ("" for the local store)
	PathStyle            bool          // with Bucket
	AdminAddr            string        // the admin listener's host:port; "" when SKIPPR_ADMIN_ADDR=off
	LogFormat            string        // "text" or "json" (read by main before run; checked here)
	RecoveryGiveUp       time.Duration // 0: never give up (SKIPPR_RECOVERY_GIVE_UP_SECONDS=0)
	StopGrace            time.Duration // SKIPPR_STOP_GRACE_SECONDS
	DrainPipeline        string        // SKIPPR_DRAIN_PIPELINE: the pipeline whose WAL in DATA_DIR is applied first; "" for none
	Once                 bool          // SKIPPR_ONCE (run --once): ingest what the sources hold at start, apply it, exit (once.go)
	// S3Timeout is the bucket's request timeout, 0 for s3RequestTimeout
	// (parsed in every mode, used with a bucket).
	S3Timeout time.Duration
	// Disk is the local-disk WAL's tuning; parsed (and checked) in every
	// mode, used with WAL_STORAGE=disk only.
	Disk engine.DiskWAL
	// Lake is the lane limits of the Parquet sinks whose entries leave
	// them out (SKIPPR_LAKE_FILE_BYTES, SKIPPR_LAKE_FLUSH_INTERVAL;
	// lanes.go).
	Lake engine.LaneLimits
}

// configError is an invalid environment variable; the daemon exits 2.
type configError struct {
	Var, Value, Want string
}

func (e *configError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Var, e.Want)
	}
	return fmt.Sprintf("%s=%q: %s", e.Var, e.Value, e.Want)
}

// parseConfig reads the environment through getenv. Errors are
// *configError and name the variable.
func parseConfig(getenv func(string) string) (config, error) {
	c := config{
		DataDir:              defaultDataDir,
		WALStorage:           walDisk,
		Pipeline:             defaultPipeline,
		WALPrefix:            defaultWALPrefix,
		BufferThresholdBytes: defaultBuffer,
		MaxDelay:             engine.DefaultMaxDelay,
		IngestThreads:        runtime.NumCPU(),
		Disk:                 *engine.DefaultDiskWAL(),
		AdminAddr:            defaultAdminAddr,
		LogFormat:            logText,
		RecoveryGiveUp:       defaultRecoveryGiveUp,
		StopGrace:            engine.CloseReclaimGrace,
		Lake:                 engine.LaneLimits{FileBytes: defaultLakeFileBytes, FlushInterval: defaultFlushInterval},
	}
	get := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv(name))
		return v, v != ""
	}
	if v, ok := get(envDataDir); ok {
		c.DataDir = v
	}
	// Every group is parsed, so that skipprd check lists every problem;
	// the daemon refuses to start on any.
	var errs []error
	for _, parse := range []func(func(string) (string, bool), *config) error{
		parseWALStorage, parseSizes, parseNames,
		func(get func(string) (string, bool), c *config) error { return parseDiskWAL(get, &c.Disk) },
		func(get func(string) (string, bool), c *config) error { return parseLakeLanes(get, &c.Lake) },
		parseOps, parseOnce,
	} {
		if err := parse(get, &c); err != nil {
			errs = append(errs, err)
		}
	}
	return c, errors.Join(errs...)
}

// parseSizes reads the segment target, the ack delay ceiling and the
// ingest threads.
func parseSizes(get func(string) (string, bool), c *config) error {
	var errs []error
	if v, ok := get(envBufferBytes); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			errs = append(errs, &configError{envBufferBytes, v, "want a positive whole number of bytes, e.g. 8388608"})
		}
		c.BufferThresholdBytes = n
	}
	if v, ok := get(envMaxDelay); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > maxDelaySecondMax {
			errs = append(errs, &configError{envMaxDelay, v, fmt.Sprintf("want seconds in (0, %d], e.g. 60 or 0.5", maxDelaySecondMax)})
		}
		c.MaxDelay = time.Duration(f * float64(time.Second))
	}
	if v, ok := get(envIngestThreads); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ingestThreadsMax {
			errs = append(errs, &configError{envIngestThreads, v, fmt.Sprintf("want a whole number in 1..%d", ingestThreadsMax)})
		}
		c.IngestThreads = n
	}
	return errors.Join(errs...)
}

// parseNames reads the pipeline's name, the WAL's key prefix and the
// pipeline to drain first.
func parseNames(get func(string) (string, bool), c *config) error {
	var errs []error
	if v, ok := get(envPipeline); ok {
		if !validName(v) {
			errs = append(errs, &configError{envPipeline, v, fmt.Sprintf("want 1..%d of [A-Za-z0-9._-], not starting with a dot", pipelineBytesMax)})
		}
		c.Pipeline = v
	}
	if v, ok := get(envWALPrefix); ok {
		p := strings.Trim(v, "/")
		for _, seg := range strings.Split(p, "/") {
			if !validName(seg) {
				errs = append(errs, &configError{envWALPrefix, v, "want /-separated parts of [A-Za-z0-9._-], none empty or starting with a dot"})
				break
			}
		}
		c.WALPrefix = p
	}
	if v, ok := get(envDrainPipeline); ok {
		switch {
		case !validName(v):
			errs = append(errs, &configError{envDrainPipeline, v, fmt.Sprintf("want the name of the pipeline that owned DATA_DIR before: 1..%d of [A-Za-z0-9._-], not starting with a dot", pipelineBytesMax)})
		case v == c.Pipeline:
			errs = append(errs, &configError{envDrainPipeline, v, fmt.Sprintf("names the pipeline being started (%s); want the pipeline that owned DATA_DIR before, or unset it", envPipeline)})
		}
		c.DrainPipeline = v
	}
	return errors.Join(errs...)
}

// parseOps reads the operator's variables: the admin listener and the
// log format.
func parseOps(get func(string) (string, bool), c *config) error {
	var errs []error
	if v, ok := get(envAdminAddr); ok {
		addr, err := parseAdminAddr(v)
		if err != nil {
			errs = append(errs, &configError{envAdminAddr, v, fmt.Sprintf("want host:port (e.g. %s, or :9090 for every interface) or %s; %v", defaultAdminAddr, adminOff, err)})
		}
		c.AdminAddr = addr
	}
	if v, ok := get(envLogFormat); ok {
		f, err := parseLogFormat(v)
		if err != nil {
			errs = append(errs, &configError{envLogFormat, v, "want text (the default) or json"})
		}
		c.LogFormat = f
	}
	if v, ok := get(envRecoveryGiveUp); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > recoveryGiveUpSecondsMax {
			errs = append(errs, &configError{envRecoveryGiveUp, v, fmt.Sprintf("want whole seconds in 0..%d (0: keep retrying), e.g. 120", recoveryGiveUpSecondsMax)})
		}
		c.RecoveryGiveUp = time.Duration(n) * time.Second
	}
	if v, ok := get(envStopGrace); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > stopGraceSecondsMax {
			errs = append(errs, &configError{envStopGrace, v, fmt.Sprintf("want whole seconds in 1..%d, e.g. 25", stopGraceSecondsMax)})
		}
		c.StopGrace = time.Duration(n) * time.Second
	}
	return errors.Join(errs...)
}

// parseAdminAddr checks a listen address: host:port with a port in
// 0..65535 (0 picks a free one), or "off" ("").
func parseAdminAddr(v string) (string, error) {
	if strings.EqualFold(v, adminOff) {
		return "", nil
	}
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return "", err
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil { // also refuses "" and > 65535
		return "", fmt.Errorf("port %q is not a number in 0..65535", port)
	}
	return v, nil
}

// parseWALStorage reads WAL_STORAGE and the bucket and addressing it
// uses: s3 needs a bucket, disk takes one for its segments if given.
func parseWALStorage(get func(string) (string, bool), c *config) error {
	var errs []error
	if v, ok := get(envS3Timeout); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > s3RequestTimeoutMax {
			errs = append(errs, &configError{envS3Timeout, v, fmt.Sprintf("want a whole number of seconds in 1..%d, e.g. 30 (the default)", s3RequestTimeoutMax)})
		}
		c.S3Timeout = time.Duration(n) * time.Second
	}
	// Path-style addressing is for every S3 client — the WAL's, a
	// parquet-s3 or Iceberg lake's, an objects source's — whatever the
	// WAL's storage.
	if s, ok := get(envS3PathStyle); ok {
		b, err := strconv.ParseBool(s)
		if err != nil {
			errs = append(errs, &configError{envS3PathStyle, s, "want true or false"})
		}
		c.PathStyle = b
	}
	v, _ := get(envWALStorage)
	switch strings.ToLower(v) {
	case "", string(walDisk):
		c.WALStorage = walDisk
	case string(walEmbedded):
		c.WALStorage = walEmbedded
		return errors.Join(errs...)
	case string(walS3):
		c.WALStorage = walS3
	default:
		return errors.Join(append(errs, &configError{envWALStorage, v, "want disk (the default), embedded or s3"})...)
	}
	c.Bucket, _ = get(envWALBucket)
	if c.Bucket == "" {
		c.Bucket, _ = get(envBucket)
	}
	if c.Bucket == "" {
		if c.WALStorage == walS3 {
			return errors.Join(append(errs, &configError{envWALBucket, "", fmt.Sprintf("WAL_STORAGE=s3 needs a bucket: set %s (or %s, shared with the lake)", envWALBucket, envBucket)})...)
		}
	}
	return errors.Join(errs...) // disk without a bucket: segments in the local store
}

// parseDiskWAL reads the local-disk WAL's variables into d (which holds
// the defaults) and checks the result with the engine's own validation.
func parseDiskWAL(get func(string) (string, bool), d *engine.DiskWAL) error {
	if v, ok := get(envWALSyncMode); ok {
		switch strings.ToUpper(v) {
		case "SYNC":
			d.Sync = engine.SyncEveryBatch
		case "BATCH_SYNC":
			d.Sync = engine.BatchSync
		default:
			return &configError{envWALSyncMode, v, "want SYNC (the default: fsync as soon as entries wait) or BATCH_SYNC (fsync on a timer)"}
		}
	}
	if v, ok := get(envWALBatchSyncInterval); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > batchSyncIntervalMsMax {
			return &configError{envWALBatchSyncInterval, v, fmt.Sprintf(
				"wal_batch_sync_interval_ms must be a positive whole number of milliseconds, at most %d, e.g. 10", batchSyncIntervalMsMax)}
		}
		d.BatchSyncInterval = time.Duration(n) * time.Millisecond
	}
	if v, ok := get(envWALCommitInterval); ok {
		lo := engine.WALCommitIntervalMin.Microseconds()
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < lo || n > commitIntervalUsMax {
			return &configError{envWALCommitInterval, v, fmt.Sprintf("want a whole number of microseconds in %d..%d, e.g. 200", lo, commitIntervalUsMax)}
		}
		d.CommitInterval = time.Duration(n) * time.Microsecond
	}
	if v, ok := get(envWALSegmentBytes); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 2*engine.DirectAlign || n > wal.SegmentBytesMax || n%engine.DirectAlign != 0 {
			return &configError{envWALSegmentBytes, v, fmt.Sprintf("want a multiple of %d bytes in %d..%d, e.g. 33554432 (32 MiB)",
				engine.DirectAlign, 2*engine.DirectAlign, wal.SegmentBytesMax)}
		}
		d.SegmentBytes = n
		// One group commit writes at most a segment (a larger entry gets
		// a segment of its own size, and a batch takes at least one).
		d.BatchBytes = min(d.BatchBytes, n)
	}
	if v, ok := get(envWALPartitions); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > engine.WALPartitionsMax {
			return &configError{envWALPartitions, v, fmt.Sprintf("want a whole number in 1..%d", engine.WALPartitionsMax)}
		}
		d.Partitions = n
	}
	// Every value was checked above; this catches a combination the
	// engine refuses (its messages name the variables too).
	if err := d.Validate(); err != nil {
		return &configError{envWALStorage, "disk", err.Error()}
	}
	return nil
}

// validName reports whether s can name a pipeline or a key prefix part.
func validName(s string) bool {
	if s == "" || len(s) > pipelineBytesMax || s[0] == '.' {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return false
		}
	}
	return true
}

// localSegments reports whether segments go to the local segment store
// under DATA_DIR (WAL_STORAGE=disk without a bucket).
func (c config) localSegments() bool { return c.WALStorage == walDisk && c.Bucket == "" }

// requestTimeout is the S3 store's per-request timeout (none is used for
// the local segment store).
func (c config) requestTimeout() time.Duration {
	switch {
	case c.WALStorage == walEmbedded:
		return embeddedRequestTimeout
	case c.S3Timeout > 0:
		return c.S3Timeout
	}
	return s3RequestTimeout
}

// engineConfig derives the engine's configuration (docs/DESIGN.md §6.2): the
// operator gives the buffer threshold, the delay ceiling and the ingest
// threads; everything else is derived or fixed.
func (c config) engineConfig() engine.Config {
	ec := engine.DeriveConfig(c.WALPrefix, c.Pipeline, c.BufferThresholdBytes, c.IngestThreads, c.MaxDelay)
	// FenceWait > the request timeout (see the constants); for real S3
	// DeriveConfig's fence already exceeds s3RequestTimeout, which a test
	// checks.
	switch {
	case c.WALStorage == walEmbedded:
		ec.FenceWait = embeddedRequestTimeout + embeddedRequestTimeout/4
	case c.localSegments():
		ec.FenceWait = localFenceWait
	case c.S3Timeout > 0: // a bucket's, set by the operator
		ec.FenceWait = c.S3Timeout + c.S3Timeout/6
	}
	if c.WALStorage == walDisk {
		d := c.Disk
		ec.Disk = &d
	}
	ec.RecoveryGiveUp = c.RecoveryGiveUp
	ec.StopGrace = c.StopGrace
	return ec
}
