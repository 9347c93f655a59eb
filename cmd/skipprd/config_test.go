package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

func envOf(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := parseConfig(envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		DataDir: "./data", WALStorage: walDisk, Pipeline: "default", WALPrefix: "wal",
		BufferThresholdBytes: 8 << 20, MaxDelay: 60 * time.Second, IngestThreads: runtime.NumCPU(),
		Disk: *engine.DefaultDiskWAL(), AdminAddr: "127.0.0.1:9090", LogFormat: "text", RecoveryGiveUp: 2 * time.Minute, StopGrace: 10 * time.Second,
		Lake: engine.LaneLimits{FileBytes: 128 << 20, FlushInterval: 5 * time.Minute},
	}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	// The documented defaults, spelled out.
	d := c.Disk
	if d.Sync != engine.SyncEveryBatch || d.BatchSyncInterval != 10*time.Millisecond || d.CommitInterval != 200*time.Microsecond ||
		d.SegmentBytes != 32<<20 || d.Partitions != 1 {
		t.Fatalf("disk WAL defaults %+v", d)
	}
	// The default is the local-disk WAL with its segments under DATA_DIR.
	if !c.localSegments() || c.engineConfig().Disk == nil {
		t.Fatalf("default: local segments %v, engine disk WAL %v", c.localSegments(), c.engineConfig().Disk)
	}
}

// The local-disk WAL's variables map into engine.DiskWAL; the modes
// choose the engine's WAL and the segments' store.
func TestParseConfigDiskWAL(t *testing.T) {
	c, err := parseConfig(envOf(map[string]string{
		envWALSyncMode: "batch_sync", envWALBatchSyncInterval: "25", envWALCommitInterval: "50",
		envWALSegmentBytes: "1048576", envWALPartitions: "64",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := *engine.DefaultDiskWAL()
	want.Sync, want.BatchSyncInterval, want.CommitInterval = engine.BatchSync, 25*time.Millisecond, 50*time.Microsecond
	want.SegmentBytes, want.Partitions = 1<<20, 64
	if c.Disk != want {
		t.Fatalf("disk WAL %+v, want %+v", c.Disk, want)
	}
	ec := c.engineConfig()
	if ec.Disk == nil || *ec.Disk != want {
		t.Fatalf("engine disk WAL %+v, want %+v", ec.Disk, want)
	}
	if err := ec.Validate(); err != nil {
		t.Fatal(err)
	}
	// A segment smaller than the default group-commit batch bounds the
	// batch, so the engine accepts it.
	c, err = parseConfig(envOf(map[string]string{envWALSegmentBytes: "8192", envWALSyncMode: "SYNC"}))
	if err != nil || c.Disk.SegmentBytes != 8192 || c.Disk.BatchBytes != 8192 || c.Disk.Sync != engine.SyncEveryBatch {
		t.Fatalf("small segment: %+v, %v", c.Disk, err)
	}

	cases := []struct {
		env       map[string]string
		mode      walStorage
		disk      bool // the engine runs the disk WAL
		local     bool // segments in DATA_DIR/segments
		fenceWait time.Duration
	}{
		{nil, walDisk, true, true, 0},
		{map[string]string{envWALStorage: "DISK"}, walDisk, true, true, 0},
		{map[string]string{envWALStorage: "disk", envBucket: "lake"}, walDisk, true, false, 35 * time.Second},
		{map[string]string{envWALStorage: "disk", envWALBucket: "segs"}, walDisk, true, false, 35 * time.Second},
		{map[string]string{envWALStorage: "embedded"}, walEmbedded, false, false, embeddedRequestTimeout * 5 / 4},
		{map[string]string{envWALStorage: "embedded", envBucket: "ignored"}, walEmbedded, false, false, embeddedRequestTimeout * 5 / 4},
		{map[string]string{envWALStorage: "s3", envBucket: "b"}, walS3, false, false, 35 * time.Second},
		{map[string]string{envWALStorage: "s3", envBucket: "b", envS3Timeout: "30"}, walS3, false, false, 35 * time.Second},
		{map[string]string{envWALStorage: "s3", envBucket: "b", envS3Timeout: "6"}, walS3, false, false, 7 * time.Second},
		{map[string]string{envWALStorage: "disk", envBucket: "b", envS3Timeout: "12"}, walDisk, true, false, 14 * time.Second},
		{map[string]string{envWALStorage: "embedded", envS3Timeout: "60"}, walEmbedded, false, false, embeddedRequestTimeout * 5 / 4},
		{map[string]string{envS3Timeout: "60"}, walDisk, true, true, 0},
	}
	for _, tc := range cases {
		c, err := parseConfig(envOf(tc.env))
		if err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
		ec := c.engineConfig()
		if c.WALStorage != tc.mode || (ec.Disk != nil) != tc.disk || c.localSegments() != tc.local || ec.FenceWait != tc.fenceWait {
			t.Fatalf("%v: mode %s, disk WAL %v, local segments %v, fence %v; want %s %v %v %v",
				tc.env, c.WALStorage, ec.Disk != nil, c.localSegments(), ec.FenceWait, tc.mode, tc.disk, tc.local, tc.fenceWait)
		}
		if err := ec.Validate(); err != nil {
			t.Fatalf("%v: %v", tc.env, err)
		}
	}
}

func TestParseConfigValues(t *testing.T) {
	c, err := parseConfig(envOf(map[string]string{
		envDataDir: "/var/lib/skipprd", envBufferBytes: "33554432", envMaxDelay: "0.5",
		envIngestThreads: "12", envPipeline: "orders-prod", envWALPrefix: "/tenant/ws/",
		envWALStorage: "S3", envBucket: "shared", envS3PathStyle: "true", envRecoveryGiveUp: "0",
		envStopGrace: "25", envLakeFileBytes: " 256 MiB", envLakeFlushInterval: "90s",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		DataDir: "/var/lib/skipprd", WALStorage: walS3, Pipeline: "orders-prod", WALPrefix: "tenant/ws",
		BufferThresholdBytes: 32 << 20, MaxDelay: 500 * time.Millisecond, IngestThreads: 12,
		Bucket: "shared", PathStyle: true, Disk: *engine.DefaultDiskWAL(), AdminAddr: "127.0.0.1:9090", LogFormat: "text",
		Lake:      engine.LaneLimits{FileBytes: 256 << 20, FlushInterval: 90 * time.Second},
		StopGrace: 25 * time.Second,
	}
	if c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	// The dedicated WAL bucket wins over the shared one.
	c, err = parseConfig(envOf(map[string]string{envWALStorage: "s3", envBucket: "shared", envWALBucket: "wal-only"}))
	if err != nil || c.Bucket != "wal-only" {
		t.Fatalf("bucket %q, %v", c.Bucket, err)
	}
}

// Every invalid value is refused with an error naming its variable.
// S3_PATH_STYLE reaches the lake's and the sources' S3 clients whatever
// the WAL's storage: a MinIO lake beside the local-disk or embedded WAL
// (no bucket of its own) is addressed by path too.
func TestParseConfigPathStyleWithoutABucket(t *testing.T) {
	for _, storage := range []string{"disk", "embedded"} {
		c, err := parseConfig(envOf(map[string]string{envWALStorage: storage, envS3PathStyle: "true"}))
		if err != nil || !c.PathStyle {
			t.Errorf("WAL_STORAGE=%s, %s=true: path style %v (%v), want true", storage, envS3PathStyle, c.PathStyle, err)
		}
	}
}

func TestParseConfigRejects(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		varName string
		says    string
	}{
		{"unknown WAL", map[string]string{envWALStorage: "tape"}, envWALStorage, "disk (the default), embedded or s3"},
		{"disk WAL bad path style", map[string]string{envWALStorage: "disk", envBucket: "b", envS3PathStyle: "yes please"}, envS3PathStyle, "true or false"},
		{"sync mode unknown", map[string]string{envWALSyncMode: "FSYNC"}, envWALSyncMode, "SYNC"},
		{"sync mode empty word", map[string]string{envWALSyncMode: "batch"}, envWALSyncMode, "BATCH_SYNC"},
		{"batch sync interval zero", map[string]string{envWALBatchSyncInterval: "0"}, envWALBatchSyncInterval, "wal_batch_sync_interval_ms must be a positive"},
		{"batch sync interval zero with BATCH_SYNC", map[string]string{envWALSyncMode: "BATCH_SYNC", envWALBatchSyncInterval: "0"}, envWALBatchSyncInterval, "wal_batch_sync_interval_ms"},
		{"batch sync interval negative", map[string]string{envWALBatchSyncInterval: "-5"}, envWALBatchSyncInterval, "positive"},
		{"batch sync interval fraction", map[string]string{envWALBatchSyncInterval: "2.5"}, envWALBatchSyncInterval, "whole number"},
		{"batch sync interval unit", map[string]string{envWALBatchSyncInterval: "10ms"}, envWALBatchSyncInterval, "milliseconds"},
		{"batch sync interval beyond a minute", map[string]string{envWALBatchSyncInterval: "60001"}, envWALBatchSyncInterval, "60000"},
		{"commit interval below the minimum", map[string]string{envWALCommitInterval: "49"}, envWALCommitInterval, "50..1000000"},
		{"commit interval zero", map[string]string{envWALCommitInterval: "0"}, envWALCommitInterval, "microseconds"},
		{"commit interval beyond a second", map[string]string{envWALCommitInterval: "1000001"}, envWALCommitInterval, "50..1000000"},
		{"segment bytes unaligned", map[string]string{envWALSegmentBytes: "33554433"}, envWALSegmentBytes, "multiple of 4096"},
		{"segment bytes one page", map[string]string{envWALSegmentBytes: "4096"}, envWALSegmentBytes, "8192.."},
		{"segment bytes zero", map[string]string{envWALSegmentBytes: "0"}, envWALSegmentBytes, "multiple of 4096"},
		{"segment bytes beyond a GiB", map[string]string{envWALSegmentBytes: "1073745920"}, envWALSegmentBytes, "1073741824"},
		{"segment bytes with a unit", map[string]string{envWALSegmentBytes: "32MiB"}, envWALSegmentBytes, "multiple of 4096"},
		{"partitions zero", map[string]string{envWALPartitions: "0"}, envWALPartitions, "1..64"},
		{"partitions beyond 64", map[string]string{envWALPartitions: "65"}, envWALPartitions, "1..64"},
		{"partitions words", map[string]string{envWALPartitions: "two"}, envWALPartitions, "whole number"},
		{"s3 without bucket", map[string]string{envWALStorage: "s3"}, envWALBucket, envBucket},
		{"bad path style", map[string]string{envWALStorage: "s3", envBucket: "b", envS3PathStyle: "sometimes"}, envS3PathStyle, "true or false"},
		{"request timeout zero", map[string]string{envWALStorage: "s3", envBucket: "b", envS3Timeout: "0"}, envS3Timeout, "1..600"},
		{"request timeout beyond 10 minutes", map[string]string{envS3Timeout: "601"}, envS3Timeout, "1..600"},
		{"request timeout with a unit", map[string]string{envS3Timeout: "5s"}, envS3Timeout, "whole number of seconds"},
		{"give-up negative", map[string]string{envRecoveryGiveUp: "-1"}, envRecoveryGiveUp, "0..86400"},
		{"give-up with a unit", map[string]string{envRecoveryGiveUp: "2m"}, envRecoveryGiveUp, "whole seconds"},
		{"stop grace zero", map[string]string{envStopGrace: "0"}, envStopGrace, "1..3600"},
		{"stop grace beyond an hour", map[string]string{envStopGrace: "3601"}, envStopGrace, "1..3600"},
		{"stop grace with a unit", map[string]string{envStopGrace: "30s"}, envStopGrace, "whole seconds"},
		{"lake file bytes words", map[string]string{envLakeFileBytes: "lots"}, envLakeFileBytes, "want a whole number of bytes"},
		{"lake file bytes below a MiB", map[string]string{envLakeFileBytes: "512KiB"}, envLakeFileBytes,
			`="512KiB": is 524288 bytes; want 0 (a job per segment) or 1MiB (1048576) .. 1GiB (1073741824)`},
		{"lake file bytes beyond a GiB", map[string]string{envLakeFileBytes: "2GiB"}, envLakeFileBytes, "is 2147483648 bytes"},
		{"lake file bytes negative", map[string]string{envLakeFileBytes: "-1"}, envLakeFileBytes, "want a whole number of bytes"},
		{"lake flush interval zero", map[string]string{envLakeFlushInterval: "0"}, envLakeFlushInterval,
			`="0": want a duration in 1s..24h, e.g. 5m or 30s; for a job per segment set SKIPPR_LAKE_FILE_BYTES=0`},
		{"lake flush interval short", map[string]string{envLakeFlushInterval: "500ms"}, envLakeFlushInterval, "1s..24h"},
		{"lake flush interval long", map[string]string{envLakeFlushInterval: "25h"}, envLakeFlushInterval, "1s..24h"},
		{"lake flush interval seconds", map[string]string{envLakeFlushInterval: "30"}, envLakeFlushInterval, "e.g. 5m or 30s"},
		{"buffer not a number", map[string]string{envBufferBytes: "8MiB"}, envBufferBytes, "bytes"},
		{"buffer zero", map[string]string{envBufferBytes: "0"}, envBufferBytes, "positive"},
		{"buffer negative", map[string]string{envBufferBytes: "-1"}, envBufferBytes, "positive"},
		{"delay zero", map[string]string{envMaxDelay: "0"}, envMaxDelay, "seconds"},
		{"delay NaN", map[string]string{envMaxDelay: "NaN"}, envMaxDelay, "seconds"},
		{"delay infinite", map[string]string{envMaxDelay: "+Inf"}, envMaxDelay, "seconds"},
		{"delay words", map[string]string{envMaxDelay: "a minute"}, envMaxDelay, "seconds"},
		{"delay beyond a day", map[string]string{envMaxDelay: "100000"}, envMaxDelay, "seconds"},
		{"threads zero", map[string]string{envIngestThreads: "0"}, envIngestThreads, "whole number"},
		{"threads fraction", map[string]string{envIngestThreads: "1.5"}, envIngestThreads, "whole number"},
		{"pipeline with slash", map[string]string{envPipeline: "a/b"}, envPipeline, "[A-Za-z0-9._-]"},
		{"pipeline hidden", map[string]string{envPipeline: ".x"}, envPipeline, "dot"},
		{"pipeline too long", map[string]string{envPipeline: strings.Repeat("p", 129)}, envPipeline, "128"},
		{"prefix with empty part", map[string]string{envWALPrefix: "a//b"}, envWALPrefix, "empty"},
		{"prefix climbing", map[string]string{envWALPrefix: "../x"}, envWALPrefix, "dot"},
		{"drain pipeline with slash", map[string]string{envDrainPipeline: "a/b"}, envDrainPipeline, "[A-Za-z0-9._-]"},
		{"drain the pipeline started", map[string]string{envPipeline: "b", envDrainPipeline: "b"}, envDrainPipeline, "names the pipeline being started"},
		{"drain the default pipeline", map[string]string{envDrainPipeline: "default"}, envDrainPipeline, envPipeline},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parseConfig(envOf(c.env))
			var ce *configError
			if !errors.As(err, &ce) || ce.Var != c.varName {
				t.Fatalf("error %v, want one naming %s", err, c.varName)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, c.varName) || !strings.Contains(msg, c.says) {
				t.Fatalf("message %q should start with %s and say %q", msg, c.varName, c.says)
			}
		})
	}
}

// An invalid environment exits 2 before anything starts, and the log
// names the variable.
func TestRunExitsTwoOnInvalidEnvironment(t *testing.T) {
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	dir := t.TempDir()
	code := run(context.Background(), envOf(map[string]string{envDataDir: dir, envWALStorage: "tape"}), io.Discard, log)
	if code != 2 || !strings.Contains(logs.String(), envWALStorage) {
		t.Fatalf("exit %d, logs:\n%s", code, logs.String())
	}
}

// The engine configuration is valid in every mode with an S3 store, and
// the fence wait exceeds the store's request timeout
// (engine.Config.FenceWait).
func TestEngineConfigFenceExceedsRequestTimeout(t *testing.T) {
	for _, env := range []map[string]string{
		{envWALStorage: "embedded"}, {envWALStorage: "s3", envBucket: "b"}, {envWALStorage: "disk", envBucket: "b"},
		{envWALStorage: "s3", envBucket: "b", envS3Timeout: "1"}, {envWALStorage: "disk", envBucket: "b", envS3Timeout: "600"},
	} {
		c, err := parseConfig(envOf(env))
		if err != nil {
			t.Fatal(err)
		}
		ec := c.engineConfig()
		if err := ec.Validate(); err != nil {
			t.Fatalf("%s: %v", c.WALStorage, err)
		}
		if ec.FenceWait <= c.requestTimeout() {
			t.Fatalf("%s: fence wait %v ≤ request timeout %v", c.WALStorage, ec.FenceWait, c.requestTimeout())
		}
		if ec.Prefix != "wal" || ec.Pipeline != "default" || ec.TargetBytes != 8<<20 || ec.MaxDelay != engine.DefaultMaxDelay {
			t.Fatalf("%s: %+v", c.WALStorage, ec)
		}
	}
	c, _ := parseConfig(envOf(map[string]string{envWALStorage: "embedded"}))
	if fw := c.engineConfig().FenceWait; fw > 10*time.Second {
		t.Fatalf("embedded fence wait %v: start-up would be slow", fw)
	}
	// The local segment store has no requests in flight beyond the
	// process: no fence, and start-up is immediate.
	c, _ = parseConfig(envOf(nil))
	if fw := c.engineConfig().FenceWait; fw != 0 {
		t.Fatalf("local segment store fence wait %v, want 0", fw)
	}
}

func TestProgressLine(t *testing.T) {
	cases := []struct {
		p    progress
		want string
	}{
		{progress{Uptime: 12400 * time.Millisecond, Ingested: 240000, Acked: 236000, Applied: 180000,
			LiveSegments: 3, AckDelay: 212345 * time.Microsecond, PersistEMA: 41 * time.Millisecond},
			"progress up=12s ingested=240000 acked=236000 applied=180000 live_segments=3 ack_delay=212ms persist_ema=41ms"},
		{progress{Uptime: 6 * time.Second},
			"progress up=6s ingested=0 acked=0 applied=0 live_segments=0 ack_delay=- persist_ema=-"},
		{progress{Uptime: time.Hour, AckDelay: 300 * time.Microsecond, PersistEMA: 1500 * time.Millisecond},
			"progress up=1h0m0s ingested=0 acked=0 applied=0 live_segments=0 ack_delay=<1ms persist_ema=1.5s"},
		{progressOf(3*time.Second, 10, 10,
			engine.Stats{RowsAcked: 7, AckDelayEMA: 1200 * time.Microsecond, WALSyncs: 42, WALSyncFailures: 1}, true),
			"progress up=3s ingested=10 acked=10 applied=0 live_segments=0 ack_delay=1ms persist_ema=- wal_syncs=42 wal_sync_failures=1"},
		{progressOf(3*time.Second, 0, 0, engine.Stats{WALSyncs: 42}, false),
			"progress up=3s ingested=0 acked=0 applied=0 live_segments=0 ack_delay=- persist_ema=-"},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

// The WAL lock is exclusive within a process too (flock locks belong to
// the open file), so this test stands in for a second daemon: it fails
// naming the file, the holder and the reason, and succeeds once the first
// holder is gone.
func TestWALLockExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), walLockFile)
	unlock, err := lockWAL(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = lockWAL(path)
	if !errors.Is(err, errWALLocked) {
		t.Fatalf("second lock: %v, want errWALLocked", err)
	}
	for _, says := range []string{path, "another skipprd holds it", fmt.Sprintf("pid %d", os.Getpid())} {
		if !strings.Contains(err.Error(), says) {
			t.Fatalf("message %q should say %q", err, says)
		}
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	unlock, err = lockWAL(path)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	_ = unlock()
}

// A daemon finding DATA_DIR/wal.lock held exits 1 before it touches the
// log, and the log names the lock file.
func TestRunRefusesHeldWALLock(t *testing.T) {
	dir := t.TempDir()
	lock := filepath.Join(dir, walLockFile)
	unlock, err := lockWAL(lock)
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	var logs strings.Builder
	log := slog.New(slog.NewTextHandler(&logs, nil))
	code := run(context.Background(), envOf(map[string]string{envDataDir: dir, envAdminAddr: "off"}), io.Discard, log)
	if code != 1 || !strings.Contains(logs.String(), lock) || !strings.Contains(logs.String(), "another skipprd holds it") {
		t.Fatalf("exit %d, logs:\n%s", code, logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused daemon touched the log: %v", err)
	}
}
