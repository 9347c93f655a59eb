package main

import (
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
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
	envWALPrefix      = "SKIPPR_WAL_PREFIX"
	envWALBucket      = "SKIPPR_WAL_S3_BUCKET"
	envBucket         = "SKIPPR_S3_BUCKET"
	envS3PathStyle    = "SKIPPR_S3_PATH_STYLE"
	defaultDataDir    = "./data"
	defaultBuffer     = 8 << 20
	defaultPipeline   = "default"
	defaultWALPrefix  = "wal"
	maxDelaySecondMax = 24 * 60 * 60 // a ceiling of a day is already no ceiling
	ingestThreadsMax  = 4096
	pipelineBytesMax  = 128
)

// walStorage says where the write-ahead log lives.
type walStorage string

const (
	// walEmbedded: an S3-compatible store inside the process, persisted to
	// one file under DATA_DIR (storage.StartEmbeddedS3).
	walEmbedded walStorage = "embedded"
	// walS3: a real bucket, through the standard AWS configuration.
	walS3 walStorage = "s3"
)

// Request timeouts of the two stores. The engine's FenceWait must exceed
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
//     uplink), with DeriveConfig's 35 s fence.
const (
	embeddedRequestTimeout = 5 * time.Second
	s3RequestTimeout       = 30 * time.Second
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
	Bucket               string // WAL_STORAGE=s3
	PathStyle            bool   // WAL_STORAGE=s3
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
		WALStorage:           walEmbedded,
		Pipeline:             defaultPipeline,
		WALPrefix:            defaultWALPrefix,
		BufferThresholdBytes: defaultBuffer,
		MaxDelay:             engine.DefaultMaxDelay,
		IngestThreads:        runtime.NumCPU(),
	}
	get := func(name string) (string, bool) {
		v := strings.TrimSpace(getenv(name))
		return v, v != ""
	}
	if v, ok := get(envDataDir); ok {
		c.DataDir = v
	}
	if err := parseWALStorage(get, &c); err != nil {
		return c, err
	}
	if v, ok := get(envBufferBytes); ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return c, &configError{envBufferBytes, v, "want a positive whole number of bytes, e.g. 8388608"}
		}
		c.BufferThresholdBytes = n
	}
	if v, ok := get(envMaxDelay); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || f <= 0 || f > maxDelaySecondMax {
			return c, &configError{envMaxDelay, v, fmt.Sprintf("want seconds in (0, %d], e.g. 60 or 0.5", maxDelaySecondMax)}
		}
		c.MaxDelay = time.Duration(f * float64(time.Second))
	}
	if v, ok := get(envIngestThreads); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > ingestThreadsMax {
			return c, &configError{envIngestThreads, v, fmt.Sprintf("want a whole number in 1..%d", ingestThreadsMax)}
		}
		c.IngestThreads = n
	}
	if v, ok := get(envPipeline); ok {
		if !validName(v) {
			return c, &configError{envPipeline, v, fmt.Sprintf("want 1..%d of [A-Za-z0-9._-], not starting with a dot", pipelineBytesMax)}
		}
		c.Pipeline = v
	}
	if v, ok := get(envWALPrefix); ok {
		p := strings.Trim(v, "/")
		for _, seg := range strings.Split(p, "/") {
			if !validName(seg) {
				return c, &configError{envWALPrefix, v, "want /-separated parts of [A-Za-z0-9._-], none empty or starting with a dot"}
			}
		}
		c.WALPrefix = p
	}
	return c, nil
}

// parseWALStorage reads WAL_STORAGE and, for s3, its bucket and
// addressing.
func parseWALStorage(get func(string) (string, bool), c *config) error {
	v, _ := get(envWALStorage)
	switch strings.ToLower(v) {
	case "", string(walEmbedded):
		c.WALStorage = walEmbedded
	case string(walS3):
		c.WALStorage = walS3
		c.Bucket, _ = get(envWALBucket)
		if c.Bucket == "" {
			c.Bucket, _ = get(envBucket)
		}
		if c.Bucket == "" {
			return &configError{envWALBucket, "", fmt.Sprintf("WAL_STORAGE=s3 needs a bucket: set %s (or %s, shared with the lake)", envWALBucket, envBucket)}
		}
		if s, ok := get(envS3PathStyle); ok {
			b, err := strconv.ParseBool(s)
			if err != nil {
				return &configError{envS3PathStyle, s, "want true or false"}
			}
			c.PathStyle = b
		}
	case "disk":
		return &configError{envWALStorage, v, "the local-disk WAL is not implemented yet; " +
			"leave WAL_STORAGE unset for the embedded store under DATA_DIR, or use WAL_STORAGE=s3"}
	default:
		return &configError{envWALStorage, v, "want embedded (the default) or s3"}
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

// requestTimeout is the store's per-request timeout.
func (c config) requestTimeout() time.Duration {
	if c.WALStorage == walEmbedded {
		return embeddedRequestTimeout
	}
	return s3RequestTimeout
}

// engineConfig derives the engine's configuration (DESIGN §6): the
// operator gives the buffer threshold, the delay ceiling and the ingest
// threads; everything else is derived or fixed.
func (c config) engineConfig() engine.Config {
	ec := engine.DeriveConfig(c.WALPrefix, c.Pipeline, c.BufferThresholdBytes, c.IngestThreads, c.MaxDelay)
	// FenceWait > the request timeout (see the constants); for real S3
	// DeriveConfig's fence already exceeds s3RequestTimeout, which a test
	// checks.
	if c.WALStorage == walEmbedded {
		ec.FenceWait = embeddedRequestTimeout + embeddedRequestTimeout/4
	}
	return ec
}
