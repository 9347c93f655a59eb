package nodetest

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// DuckDB runs sql in an in-memory DuckDB and returns its rows, each
// column by name (numbers as json.Number).
func DuckDB(t testing.TB, sql string) []map[string]any {
	t.Helper()
	out := node(t, "@duckdb/node-api", nil, "duckdb.mjs", sql)
	var rows []map[string]any
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&rows); err != nil {
		t.Fatalf("duckdb: %s: its output does not decode: %v\n%.2000s", sql, err, out)
	}
	return rows
}

// node runs script (in this directory) with args once pkg is installed,
// and returns its stdout.
func node(t testing.TB, pkg string, env []string, script string, args ...string) []byte {
	t.Helper()
	cmd := nodeCmd(t, pkg, env, script, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node %s %v: %v\n%s", script, args, err, stderr.String())
	}
	return out
}

// nodeCmd is the command that runs script (in this directory) with args,
// once pkg is installed; without Node.js or pkg the test is skipped
// loudly (failed under CI=true).
func nodeCmd(t testing.TB, pkg string, env []string, script string, args ...string) *exec.Cmd {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	dir := filepath.Dir(file)
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "Node.js is not installed"
	} else if _, err := os.Stat(filepath.Join(dir, "node_modules", filepath.FromSlash(pkg))); err != nil {
		why = pkg + " is not installed (npm ci --prefix internal/nodetest)"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and %s: this test needs it", why)
		}
		t.Skipf("SKIPPING: %s: this test needs it", why)
	}
	cmd := exec.Command("node", append([]string{filepath.Join(dir, script)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	return cmd
}

// IcebergRead is an Iceberg table as iceberg.mjs read it, without
// iceberg-go: the metadata file's snapshots, the data files the current
// snapshot's manifests list (Avro, read by avsc), and their rows
// (DuckDB's read_parquet), each a list of values in Columns' order.
type IcebergRead struct {
	Snapshot  string            `json:"snapshot"`
	Snapshots []IcebergSnapshot `json:"snapshots"`
	Files     []IcebergFile     `json:"files"`
	Columns   []string          `json:"columns"`
	Rows      [][]any           `json:"rows"`
}

// IcebergSnapshot is one snapshot of the metadata file.
type IcebergSnapshot struct {
	ID      string            `json:"id"`
	Parent  string            `json:"parent"`
	Summary map[string]string `json:"summary"`
}

// IcebergFile is one live data file of the current snapshot.
type IcebergFile struct {
	Path    string `json:"path"`
	Records string `json:"records"`
}

// Iceberg reads the table whose current metadata file is metadata,
// selecting columns (e.g. "id") from its rows. Locations that start with
// from are read at to instead (a bucket downloaded to a folder); "" for
// none.
func Iceberg(t testing.TB, metadata, columns, from, to string) IcebergRead {
	t.Helper()
	args := []string{metadata, columns}
	if from != "" {
		args = append(args, from, to)
	}
	out := node(t, "avsc", nil, "iceberg.mjs", args...)
	var r IcebergRead
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("iceberg.mjs %s: its output does not decode: %v\n%.2000s", metadata, err, out)
	}
	return r
}
