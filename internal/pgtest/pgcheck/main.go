package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/skipprd/skipprd/internal/pgtest"
	"github.com/skipprd/skipprd/internal/pgurl"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	server := pgurl.Redact(pgtest.ServerURL())
	level, err := pgtest.Probe(ctx)
	var problem string
	switch {
	case err != nil:
		problem = fmt.Sprintf("PostgreSQL at %s does not answer (%v): every Postgres test will SKIP; start it (docs/PIPELINE.md, Postgres) or set SKIPPR_TEST_PG_URL", server, err)
	case level != "logical":
		problem = fmt.Sprintf("PostgreSQL at %s runs with wal_level=%s: the CDC source's tests will SKIP; make pg-setup sets wal_level=logical", server, level)
	default:
		fmt.Printf("postgres: the Postgres tests run against %s (wal_level=logical)\n", server)
		return
	}
	banner := "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"
	fmt.Fprintf(os.Stderr, "%s\npostgres: %s\n%s\n", banner, problem, banner)
	if os.Getenv("CI") == "true" {
		fmt.Fprintln(os.Stderr, "postgres: CI=true: refusing to run the tests without them")
		os.Exit(1)
	}
}
