package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
		DataDir: "./data", WALStorage: walEmbedded, Pipeline: "default", WALPrefix: "wal",
		BufferThresholdBytes: 8 << 20, MaxDelay: 60 * time.Second, IngestThreads: runtime.NumCPU(),
	}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
}

func TestParseConfigValues(t *testing.T) {
	c, err := parseConfig(envOf(map[string]string{
		envDataDir: "/var/lib/skipprd", envBufferBytes: "33554432", envMaxDelay: "0.5",
		envIngestThreads: "12", envPipeline: "orders-prod", envWALPrefix: "/tenant/ws/",
		envWALStorage: "S3", envBucket: "shared", envS3PathStyle: "true",
	}))
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		DataDir: "/var/lib/skipprd", WALStorage: walS3, Pipeline: "orders-prod", WALPrefix: "tenant/ws",
		BufferThresholdBytes: 32 << 20, MaxDelay: 500 * time.Millisecond, IngestThreads: 12,
		Bucket: "shared", PathStyle: true,
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
func TestParseConfigRejects(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		varName string
		says    string
	}{
		{"disk WAL", map[string]string{envWALStorage: "disk"}, envWALStorage, "not implemented"},
		{"unknown WAL", map[string]string{envWALStorage: "tape"}, envWALStorage, "embedded"},
		{"s3 without bucket", map[string]string{envWALStorage: "s3"}, envWALBucket, envBucket},
		{"bad path style", map[string]string{envWALStorage: "s3", envBucket: "b", envS3PathStyle: "sometimes"}, envS3PathStyle, "true or false"},
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
	code := run(context.Background(), envOf(map[string]string{envDataDir: dir, envWALStorage: "disk"}), io.Discard, log)
	if code != 2 || !strings.Contains(logs.String(), envWALStorage) {
		t.Fatalf("exit %d, logs:\n%s", code, logs.String())
	}
}

// The engine configuration is valid in both modes, and the fence wait
// exceeds the store's request timeout (engine.Config.FenceWait).
func TestEngineConfigFenceExceedsRequestTimeout(t *testing.T) {
	for _, env := range []map[string]string{nil, {envWALStorage: "s3", envBucket: "b"}} {
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
	c, _ := parseConfig(envOf(nil))
	if fw := c.engineConfig().FenceWait; fw > 10*time.Second {
		t.Fatalf("embedded fence wait %v: start-up would be slow", fw)
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
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}
