package main

import (
	"context"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// lanesOf loads text (a pipeline file) and resolves its lanes in env; it
// returns the limits by sink, or the errors' lines.
func lanesOf(t *testing.T, text string, env map[string]string) (map[string]engine.LaneLimits, []string) {
	t.Helper()
	path := writePipeline(t, text)
	p := mustLoad(t, path)
	cfg, err := parseConfig(envOf(env))
	if err != nil {
		t.Fatalf("parseConfig: %v", err)
	}
	if err := p.resolveLanes(cfg.Lake); err != nil {
		var lines []string
		for _, pe := range pipelineErrors(t, err) {
			lines = append(lines, strings.Replace(pe.Error(), path, "skipprd.yaml", 1))
		}
		return nil, lines
	}
	return p.engineLanes(), nil
}

const mib = 1 << 20

// What file_bytes and flush_interval accept, and what each sink ends up
// with: the file's key, else (Parquet sinks) the environment's, else the
// kind's default, each limit on its own.
func TestSinkLanes(t *testing.T) {
	lake := map[string]string{envLakeFileBytes: "256MiB", envLakeFlushInterval: "1m"}
	for _, tc := range []struct {
		name string
		sink string // the flow mapping's keys after kind and its own
		env  map[string]string
		want engine.LaneLimits
	}{
		// Defaults by kind.
		{"parquet-dir", "kind: parquet-dir, path: lake", nil, engine.LaneLimits{FileBytes: 128 * mib, FlushInterval: 5 * time.Minute}},
		{"parquet-s3", "kind: parquet-s3, bucket: b12", nil, engine.LaneLimits{FileBytes: 128 * mib, FlushInterval: 5 * time.Minute}},
		{"postgres", "kind: postgres, url_env: PG", nil, engine.LaneLimits{}},
		{"postgres with file_bytes", "kind: postgres, url_env: PG, file_bytes: 64MiB", nil, engine.LaneLimits{FileBytes: 64 * mib, FlushInterval: 5 * time.Minute}},
		{"postgres with both", "kind: postgres, url_env: PG, file_bytes: 64MiB, flush_interval: 30s", nil, engine.LaneLimits{FileBytes: 64 * mib, FlushInterval: 30 * time.Second}},
		{"postgres with an interval alone", "kind: postgres, url_env: PG, flush_interval: 30s", nil, engine.LaneLimits{}},

		// Accepted values.
		{"file_bytes 0", "kind: parquet-dir, path: lake, file_bytes: 0", nil, engine.LaneLimits{}},
		{"file_bytes 0 with interval 0", "kind: parquet-dir, path: lake, file_bytes: 0, flush_interval: 0", nil, engine.LaneLimits{}},
		{"file_bytes 0 with an interval", "kind: parquet-dir, path: lake, file_bytes: 0, flush_interval: 1h", nil, engine.LaneLimits{}},
		{"file_bytes 1MiB", "kind: parquet-dir, path: lake, file_bytes: 1MiB", nil, engine.LaneLimits{FileBytes: mib, FlushInterval: 5 * time.Minute}},
		{"file_bytes 1GiB", "kind: parquet-dir, path: lake, file_bytes: 1 GiB", nil, engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: 5 * time.Minute}},
		{"file_bytes in bytes", "kind: parquet-dir, path: lake, file_bytes: 5000000", nil, engine.LaneLimits{FileBytes: 5_000_000, FlushInterval: 5 * time.Minute}},
		{"file_bytes in MB", "kind: parquet-dir, path: lake, file_bytes: 100MB", nil, engine.LaneLimits{FileBytes: 100_000_000, FlushInterval: 5 * time.Minute}},
		{"flush_interval 1s", "kind: parquet-dir, path: lake, flush_interval: 1s", nil, engine.LaneLimits{FileBytes: 128 * mib, FlushInterval: time.Second}},
		{"flush_interval 24h", "kind: parquet-dir, path: lake, flush_interval: 24h", nil, engine.LaneLimits{FileBytes: 128 * mib, FlushInterval: 24 * time.Hour}},
		{"flush_interval 1m30s", "kind: parquet-dir, path: lake, flush_interval: 1m30s", nil, engine.LaneLimits{FileBytes: 128 * mib, FlushInterval: 90 * time.Second}},

		// The environment, and the file over it.
		{"the environment", "kind: parquet-dir, path: lake", lake, engine.LaneLimits{FileBytes: 256 * mib, FlushInterval: time.Minute}},
		{"the environment on S3", "kind: parquet-s3, bucket: b12", lake, engine.LaneLimits{FileBytes: 256 * mib, FlushInterval: time.Minute}},
		{"not on postgres", "kind: postgres, url_env: PG", lake, engine.LaneLimits{}},
		{"not on postgres' interval", "kind: postgres, url_env: PG, file_bytes: 2MiB", lake, engine.LaneLimits{FileBytes: 2 * mib, FlushInterval: 5 * time.Minute}},
		{"the file's file_bytes wins", "kind: parquet-dir, path: lake, file_bytes: 1MiB", lake, engine.LaneLimits{FileBytes: mib, FlushInterval: time.Minute}},
		{"the file's interval wins", "kind: parquet-dir, path: lake, flush_interval: 2s", lake, engine.LaneLimits{FileBytes: 256 * mib, FlushInterval: 2 * time.Second}},
		{"the file's 0 wins", "kind: parquet-dir, path: lake, file_bytes: 0", lake, engine.LaneLimits{}},
		{"the environment's 0", "kind: parquet-dir, path: lake", map[string]string{envLakeFileBytes: "0"}, engine.LaneLimits{}},
		{"the environment's 0 and the file's interval 0", "kind: parquet-dir, path: lake, flush_interval: 0",
			map[string]string{envLakeFileBytes: "0"}, engine.LaneLimits{}},
		{"the environment's 0 under the file's file_bytes", "kind: parquet-dir, path: lake, file_bytes: 8MiB",
			map[string]string{envLakeFileBytes: "0", envLakeFlushInterval: "3s"}, engine.LaneLimits{FileBytes: 8 * mib, FlushInterval: 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, errs := lanesOf(t, doc("sinks: {s: {"+tc.sink+"}}", "sources: [{name: a, kind: http, sink: s}]"), tc.env)
			if errs != nil {
				t.Fatalf("refused: %s", strings.Join(errs, "\n"))
			}
			if want := map[string]engine.LaneLimits{"s": tc.want}; !maps.Equal(got, want) {
				t.Fatalf("lanes %v, want %v", got, want)
			}
			if err := got["s"].Validate("s"); err != nil {
				t.Fatalf("the engine refuses %v: %v", got["s"], err)
			}
		})
	}
}

// A flush_interval of 0 over a file_bytes the file does not give is
// refused at start-up, naming where the file_bytes came from.
func TestSinkLanesZeroIntervalOverDefaults(t *testing.T) {
	text := doc("sinks:", "  lake: {kind: parquet-dir, path: lake, flush_interval: 0}", "  s3:", "    kind: parquet-s3",
		"    bucket: b12", "    flush_interval: 0s", "  pg: {kind: postgres, url_env: PG, flush_interval: 0}",
		"sources: [{name: a, kind: http, sink: lake, namespaces: {x: {sink: s3}, y: {sink: pg}}}]")
	_, got := lanesOf(t, text, nil)
	want := []string{
		`skipprd.yaml:2: sink "lake": flush_interval 0 with file_bytes 134217728 (the default of Parquet sinks, or SKIPPR_LAKE_FILE_BYTES): ` +
			`a lane that never fills its file would wait for ever; want a duration in 1s..24h, or file_bytes: 0 for a job per segment`,
		`skipprd.yaml:6: sink "s3": flush_interval 0 with file_bytes 134217728 (the default of Parquet sinks, or SKIPPR_LAKE_FILE_BYTES): ` +
			`a lane that never fills its file would wait for ever; want a duration in 1s..24h, or file_bytes: 0 for a job per segment`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("got\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	_, got = lanesOf(t, text, map[string]string{envLakeFileBytes: "0"})
	if got != nil {
		t.Fatalf("with %s=0: %v", envLakeFileBytes, got)
	}
}

// The daemon refuses such a file with exit 2, before DATA_DIR is
// touched.
func TestRunRefusesZeroIntervalExits2(t *testing.T) {
	path := writePipeline(t, doc("sinks: {lake: {kind: parquet-dir, path: lake, flush_interval: 0}}",
		"sources: [{name: a, kind: http, sink: lake, listen: '127.0.0.1:0'}]"))
	dataDir := filepath.Join(t.TempDir(), "data")
	code, logs := runPipelineEnv(t, map[string]string{envPipelineFile: path, envDataDir: dataDir})
	if code != 2 || !strings.Contains(logs, "invalid pipeline file") || !strings.Contains(logs, `skipprd.yaml:1: sink \"lake\": flush_interval 0 with file_bytes 134217728`) {
		t.Fatalf("exit %d, want 2 naming the line; logs:\n%s", code, logs)
	}
	code, logs = runPipelineEnv(t, map[string]string{envLakeFlushInterval: "1ms", envDataDir: dataDir})
	if code != 2 || !strings.Contains(logs, envLakeFlushInterval) {
		t.Fatalf("a bad %s: exit %d, want 2 naming it; logs:\n%s", envLakeFlushInterval, code, logs)
	}
}

// The engine the daemon builds takes every sink's limits by its name, its
// sink_ref, and each sink's start-up line says them.
func TestDaemonEngineLanes(t *testing.T) {
	path := writePipeline(t, doc("sinks:",
		"  lake: {kind: parquet-dir, path: lake}",
		"  small: {kind: parquet-dir, path: small, file_bytes: 2MiB, flush_interval: 3s}",
		"  each: {kind: parquet-dir, path: each, file_bytes: 0}",
		"sources: [{name: a, kind: http, sink: lake, listen: '127.0.0.1:0', namespaces: {x: {sink: small}, y: {sink: each}, z: }}]"))
	env := envOf(map[string]string{envPipelineFile: path, envDataDir: t.TempDir(), envLakeFlushInterval: "7s"})
	pf, err := pipelineOf(env)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig(env)
	if err != nil {
		t.Fatal(err)
	}
	if err := pf.resolveLanes(cfg.Lake); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	d, err := newDaemon(context.Background(), cfg, pf, env, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.host.Kill()
		_, _ = d.fail(nil, nil)
	})
	want := map[string]engine.LaneLimits{
		"lake":  {FileBytes: 128 * mib, FlushInterval: 7 * time.Second},
		"small": {FileBytes: 2 * mib, FlushInterval: 3 * time.Second},
		"each":  {},
	}
	if !maps.Equal(d.ecfg.Lanes, want) || d.ecfg.DefaultLanes != (engine.LaneLimits{}) {
		t.Fatalf("engine lanes %v, default %v; want %v, a job per segment", d.ecfg.Lanes, d.ecfg.DefaultLanes, want)
	}
	if err := d.ecfg.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`msg="sink: Parquet folder" sink=lake dir=` + filepath.Join(cfg.DataDir, "lake") + ` jobs="span segments" file_bytes=134217728 flush_interval=7s`,
		`msg="sink: Parquet folder" sink=small dir=` + filepath.Join(cfg.DataDir, "small") + ` jobs="span segments" file_bytes=2097152 flush_interval=3s`,
		`msg="sink: Parquet folder" sink=each dir=` + filepath.Join(cfg.DataDir, "each") + ` jobs="one per segment" file_bytes=0`,
	} {
		if !strings.Contains(logs.String(), line) {
			t.Errorf("the start-up log does not say\n\t%s\nlogs:\n%s", line, logs.String())
		}
	}
}

// A SKIPPR_LAKE_* variable no sink takes is said at start-up, like any
// setting not used as given.
func TestLaneAdjustments(t *testing.T) {
	env := map[string]string{envLakeFileBytes: "64MiB", envLakeFlushInterval: "1m"}
	for _, tc := range []struct {
		name, sinks, sink string   // sink: the source's
		want              []string // the variables ignored
	}{
		{"a lake sink takes both", "{lake: {kind: parquet-dir, path: lake}}", "lake", nil},
		{"no lake sink", "{pg: {kind: postgres, url_env: PG}}", "pg", []string{envLakeFileBytes, envLakeFlushInterval}},
		{"the file sets file_bytes", "{lake: {kind: parquet-dir, path: lake, file_bytes: 0}}", "lake", []string{envLakeFileBytes}},
		{"one of two sets both", "{lake: {kind: parquet-dir, path: lake, file_bytes: 0, flush_interval: 1s}, b: {kind: parquet-s3, bucket: b12}}",
			"lake, namespaces: {x: {sink: b}}", nil},
		{"both set both", "{lake: {kind: parquet-dir, path: lake, file_bytes: 0, flush_interval: 1s}, b: {kind: parquet-s3, bucket: b12, file_bytes: 2MiB, flush_interval: 2s}}",
			"lake, namespaces: {x: {sink: b}}", []string{envLakeFileBytes, envLakeFlushInterval}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := mustLoad(t, writePipeline(t, doc("sinks: "+tc.sinks, "sources: [{name: a, kind: http, sink: "+tc.sink+"}]")))
			var got []string
			for _, a := range p.laneAdjustments(envOf(env)) {
				if a.Used != "ignored" || a.Given != env[a.Var] || a.Why == "" {
					t.Errorf("adjustment %+v", a)
				}
				got = append(got, a.Var)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ignored %v, want %v", got, tc.want)
			}
		})
	}
}
