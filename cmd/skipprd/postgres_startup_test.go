package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/internal/pgtest"
)

// A Postgres sink or source that cannot start says why at start-up —
// the variable that is not set, the server that does not answer, the
// schema that does not exist — exits 1, and never prints the URL's
// password. (TestDaemonPostgresRefusesAnIncompatibleColumn starts a sink
// that reaches the server.)
func TestPostgresStartupErrors(t *testing.T) {
	const secret = "s3cret-pw"
	closed := "postgres://u:" + secret + "@127.0.0.1:1/db?connect_timeout=2"
	for _, c := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"sink url unset", "sinks:\n  wh: {kind: postgres, url_env: PG_DST}\nsources:\n  - {name: g, kind: generator, sink: wh}\n",
			nil, []string{`sink \"wh\"`, "PG_DST is not set"}},
		{"sink unreachable", "sinks:\n  wh: {kind: postgres, url_env: PG_DST}\nsources:\n  - {name: g, kind: generator, sink: wh}\n",
			map[string]string{"PG_DST": closed}, []string{`sink \"wh\"`, "URL from PG_DST", "127.0.0.1"}},
		{"source url unset", "sinks:\n  lake: {kind: parquet-dir, path: lake}\nsources:\n  - {name: cdc, kind: postgres-cdc, sink: lake, url_env: PG_SRC}\n",
			nil, []string{`source \"cdc\"`, "PG_SRC is not set"}},
		{"source unreachable", "sinks:\n  lake: {kind: parquet-dir, path: lake}\nsources:\n  - {name: cdc, kind: postgres-cdc, sink: lake, url_env: PG_SRC}\n",
			map[string]string{"PG_SRC": closed}, []string{`source \"cdc\"`, "URL from PG_SRC", "connect"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, logs := runPipeline(t, c.file, c.env)
			if code != 1 {
				t.Fatalf("exit %d, want 1; logs:\n%s", code, logs)
			}
			for _, w := range c.want {
				if !strings.Contains(logs, w) {
					t.Errorf("the log does not say %q:\n%s", w, logs)
				}
			}
			if strings.Contains(logs, secret) {
				t.Errorf("the log prints the password:\n%s", logs)
			}
		})
	}
	t.Run("missing schema", func(t *testing.T) {
		url := pgtest.Database(t)
		code, logs := runPipeline(t, "sinks:\n  wh: {kind: postgres, url_env: PG_DST, schema: nowhere}\nsources:\n  - {name: g, kind: generator, sink: wh}\n",
			map[string]string{"PG_DST": url})
		if code != 1 || !strings.Contains(logs, `schema \"nowhere\" does not exist`) {
			t.Fatalf("exit %d, logs:\n%s", code, logs)
		}
	})
}

// runPipeline runs the daemon in process on a pipeline file until it
// exits (here: at start-up) and returns its exit code and log.
func runPipeline(t *testing.T, file string, env map[string]string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, path, file)
	vars := map[string]string{envPipelineFile: path}
	for k, v := range env {
		vars[k] = v
	}
	return runPipelineEnv(t, vars)
}

// runPipelineEnv runs the daemon in process with env (and a fresh
// DATA_DIR, no admin listener) until it exits, and returns its exit code
// and log.
func runPipelineEnv(t *testing.T, env map[string]string) (int, string) {
	t.Helper()
	vars := map[string]string{envDataDir: filepath.Join(t.TempDir(), "data"), envAdminAddr: "off"}
	for k, v := range env {
		vars[k] = v
	}
	var logs strings.Builder
	code := run(context.Background(), envOf(vars), io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
	return code, logs.String()
}
