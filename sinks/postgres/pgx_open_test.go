package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/pgtest"
)

// OpenPGX creates the applied-jobs table with the promised columns, in
// the schema it is given, and a second open finds it in place.
func TestOpenPGXCreatesAppliedJobs(t *testing.T) {
	url := pgtest.Database(t)
	s := openServer(t, url, url, 1)
	if _, err := s.conn.Exec(ctxT(t), "CREATE SCHEMA other"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		db, err := OpenPGX(ctxT(t), url, PGXOptions{MaxConns: 1, Schema: "other"})
		if err != nil {
			t.Fatalf("OpenPGX: %v", err)
		}
		db.Close()
	}
	got := s.texts(t, `SELECT n.nspname::text, a.attname::text, format_type(a.atttypid, a.atttypmod), a.attnotnull::text
		FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE c.relname = 'skipprd_applied_jobs' AND a.attnum > 0 ORDER BY n.nspname, a.attnum`)
	want := "other compaction_id text true|other table_name text true|other rows bigint true|other applied_at timestamp with time zone true|" +
		"other content text false|other pipeline text false|other wal_id text false|" +
		"public compaction_id text true|public table_name text true|public rows bigint true|public applied_at timestamp with time zone true|" +
		"public content text false|public pipeline text false|public wal_id text false|"
	var b strings.Builder
	for _, r := range got {
		b.WriteString(strings.Join(r, " ") + "|")
	}
	if b.String() != want {
		t.Fatalf("applied-jobs tables:\n%s\nwant\n%s", b.String(), want)
	}
	if _, err := OpenPGX(ctxT(t), url, PGXOptions{MaxConns: 1, Schema: "missing"}); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("OpenPGX with a missing schema: %v", err)
	}
}

// Applied waits for a transaction in flight that holds the job's id: it
// answers only once that transaction ended, with its outcome. (A plain
// SELECT would answer false at once.)
func TestPGXAppliedWaitsForInFlight(t *testing.T) {
	s := newServer(t, 2)
	for _, commit := range []bool{true, false} {
		id := "inflight-" + map[bool]string{true: "commit", false: "rollback"}[commit]
		tx, err := s.conn.Begin(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctxT(t), "INSERT INTO skipprd_applied_jobs (compaction_id, table_name, rows) VALUES ($1, 't', 0)", id); err != nil {
			t.Fatal(err)
		}
		answer := make(chan bool, 1)
		go func() {
			// The row is an older build's (no content), of table t and no rows.
			found, err := s.db.Applied(ctxT(t), &Tx{JobID: id, Table: "t"})
			if err != nil {
				t.Errorf("Applied: %v", err)
			}
			answer <- found == FoundLegacy
		}()
		select {
		case a := <-answer:
			t.Fatalf("Applied answered %t while the transaction holding %s was open", a, id)
		case <-time.After(300 * time.Millisecond):
		}
		if commit {
			err = tx.Commit(ctxT(t))
		} else {
			err = tx.Rollback(ctxT(t))
		}
		if err != nil {
			t.Fatal(err)
		}
		if a := <-answer; a != commit {
			t.Fatalf("Applied = %t after the transaction ended with commit=%t", a, commit)
		}
	}
	if n := s.appliedRows(t, "inflight-rollback"); n != 0 {
		t.Fatalf("the lookup left a row behind")
	}
}

// The pool never opens more than MaxConns connections: with all of them
// taken, the next acquire waits until its context ends, and succeeds once
// one is released. A connection left inside a transaction is dropped,
// not reused.
func TestPGXPoolBound(t *testing.T) {
	s := newServer(t, 2)
	a, err := s.db.pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.db.pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var idle, keepalive string
	if err := b.QueryRow(ctxT(t), "SELECT current_setting('idle_in_transaction_session_timeout'), current_setting('tcp_keepalives_idle')").Scan(&idle, &keepalive); err != nil || idle != "1min" || keepalive != "15" {
		t.Fatalf("session settings %q %q (%v), want 1min and 15", idle, keepalive, err)
	}
	short, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if c, err := s.db.pool.Acquire(short); err == nil {
		t.Fatalf("a third connection %p with MaxConns 2", c)
	}
	if _, err := a.Exec(ctxT(t), "BEGIN"); err != nil {
		t.Fatal(err)
	}
	a.Release() // inside a transaction: dropped, not reused
	inTx := "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'skipprd' AND datname = current_database() AND state = 'idle in transaction'"
	for deadline := time.Now().Add(5 * time.Second); s.count(t, inTx) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("a connection inside a transaction went back to the pool (still open after 5s)")
		}
	}
	c, err := s.db.pool.Acquire(ctxT(t))
	if err != nil {
		t.Fatalf("acquire after a release: %v", err)
	}
	b.Release()
	c.Release()
	if n := s.count(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'skipprd' AND datname = current_database()"); n > 2 {
		t.Fatalf("%d sink connections open, MaxConns 2", n)
	}
}
