package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/skipprd/skipprd/internal/pgurl"
)

// DefaultURL is the server the project's machines run.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// ServerURL returns the URL of the maintenance database tests connect to.
func ServerURL() string {
	if u := os.Getenv("SKIPPR_TEST_PG_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Probe connects to the server and reads its wal_level: what decides
// which Postgres tests run.
func Probe(ctx context.Context) (walLevel string, err error) {
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	err = conn.QueryRow(ctx, "SHOW wal_level").Scan(&walLevel)
	return walLevel, err
}

// Unreachable skips t (or fails it under CI=true) because no server
// answered.
func Unreachable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("PostgreSQL at %s does not answer (%v): start it (see docs/PIPELINE.md, Postgres) or set SKIPPR_TEST_PG_URL", pgurl.Redact(ServerURL()), err)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", msg)
	}
	t.Skipf("SKIPPING: %s", msg)
}

// Connect opens a connection to the server's maintenance database.
func Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, ServerURL())
	if err != nil {
		Unreachable(t, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// Database creates a fresh, empty database for t and returns its URL;
// it is dropped when t ends.
func Database(t testing.TB) string {
	t.Helper()
	admin := Connect(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "skipprd_t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(ServerURL())
	if err != nil {
		t.Fatalf("SKIPPR_TEST_PG_URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

// RequireLogical skips t (fails under CI=true) unless the server runs
// with wal_level=logical, which logical replication needs.
func RequireLogical(t testing.TB) {
	t.Helper()
	var level string
	if err := Connect(t).QueryRow(context.Background(), "SHOW wal_level").Scan(&level); err != nil {
		t.Fatalf("SHOW wal_level: %v", err)
	}
	if level == "logical" {
		return
	}
	msg := fmt.Sprintf("the server at %s runs with wal_level=%s; logical replication needs wal_level=logical (make pg-setup applies it and restarts the server)", pgurl.Redact(ServerURL()), level)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and %s", msg)
	}
	t.Skipf("SKIPPING: %s", msg)
}
