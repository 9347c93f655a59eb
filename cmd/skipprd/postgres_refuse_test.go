package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/logbuf"
	"github.com/skipprd/skipprd/internal/pgtest"
)

// A change the Postgres sink cannot apply — text into the bigint column
// it created from earlier rows — is an alert an operator sees, naming the
// table and the column, and it loses nothing: the request was acked and
// its rows wait in the WAL. Once the operator widens the column, the next
// start applies them.
func TestDaemonPostgresRefusesAnIncompatibleColumn(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the daemon against the Postgres server")
	}
	dst := pgtest.Database(t)
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  wh: {kind: postgres, url_env: PG_DST}\n"+
		"sources:\n  - {name: api, kind: http, sink: wh, listen: \"127.0.0.1:0\"}\n")
	env := map[string]string{envPipelineFile: pipeline, envDataDir: t.TempDir(), envAdminAddr: "off", "PG_DST": dst}
	db := connectPG(t, dst)
	count := func() (n int) {
		if err := db.QueryRow(context.Background(), "SELECT count(*) FROM things").Scan(&n); err != nil {
			return -1 // not created yet
		}
		return n
	}

	logs, stop := runInProcess(t, env)
	base := "http://" + waitLog(t, logs, "kind=http", "listen=") + "/v1/ingest/things"
	waitLog(t, logs, "msg=ready", "")
	postJSONLines(t, base, "k1", `{"id":1,"n":7}`+"\n")
	waitUntil(t, "the first row in the table", func() bool { return count() == 1 })
	postJSONLines(t, base, "k2", `{"id":2,"n":"seven"}`+"\n")
	alert := waitLog(t, logs, "kind=cannot-apply", "reason=")
	for _, want := range []string{`things`, `column \"n\"`, "bigint"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the alert does not name %s: %s", want, alert)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d after the alert (a refused job is kept, not fatal):\n%s", code, logs.String())
	}
	if n := count(); n != 1 {
		t.Fatalf("%d rows after the refusal, want the first only", n)
	}

	if _, err := db.Exec(context.Background(), "ALTER TABLE things ALTER COLUMN n TYPE text"); err != nil {
		t.Fatal(err)
	}
	logs, stop = runInProcess(t, env)
	waitUntil(t, "the kept row applied after the fix", func() bool { return count() == 2 })
	if code := stop(); code != 0 {
		t.Fatalf("exit %d:\n%s", code, logs.String())
	}
	var n string
	if err := db.QueryRow(context.Background(), "SELECT n FROM things WHERE id = 2").Scan(&n); err != nil || n != "seven" {
		t.Fatalf("the kept row: n=%q, %v", n, err)
	}
}

// runInProcess runs the daemon in this process; stop cancels it and
// returns its exit code.
func runInProcess(t *testing.T, env map[string]string) (*logbuf.Buffer, func() int) {
	t.Helper()
	logs := &logbuf.Buffer{}
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	go func() { exited <- run(ctx, envOf(env), io.Discard, slog.New(slog.NewTextHandler(logs, nil))) }()
	stopped := false
	stop := func() int {
		stopped = true
		cancel()
		return <-exited
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return logs, stop
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(e2eWait)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within %v", what, e2eWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
