// Package duckdb lets tests read what skipprd wrote the way a user's
// reader would: SQL in DuckDB (the @duckdb/node-api package, run by
// Node.js), e.g. read_parquet('lake/events/**/*.parquet',
// union_by_name=true). Install it with `npm ci --prefix internal/duckdb`
// (.ci/run does). Where Node.js or the package is missing a test is
// skipped with a loud message — unless CI=true, where it fails.
package duckdb

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Query runs sql and returns its rows, each column by name.
func Query(t testing.TB, sql string) []map[string]any {
	t.Helper()
	script := available(t)
	cmd := exec.Command("node", script, sql)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("duckdb: %s: %v\n%s", sql, err, stderr.String())
	}
	var rows []map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		t.Fatalf("duckdb: %s: its output does not decode: %v\n%.2000s", sql, err, out)
	}
	return rows
}

// available returns query.mjs's path once Node.js and the package are
// there, and skips (fails under CI=true) t otherwise.
func available(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "Node.js is not installed"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", "@duckdb", "node-api")); err != nil {
		why = "the DuckDB package is not installed (npm ci --prefix internal/duckdb)"
	}
	if why == "" {
		return filepath.Join(dir, "query.mjs")
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s: this test reads the lake with DuckDB", why)
	}
	t.Skipf("SKIPPING: %s: this test reads the lake with DuckDB", why)
	return ""
}
