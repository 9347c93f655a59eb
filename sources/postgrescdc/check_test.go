package postgrescdc

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/internal/pgtest"
)

// Check passes against a ready server and fails, naming the cause and
// never the password, against one that does not answer.
func TestCheck(t *testing.T) {
	pgtest.RequireLogical(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	good, err := New(Config{URL: pgtest.Database(t), Publication: "p", Slot: "s", SinkRef: "lake"})
	if err != nil {
		t.Fatal(err)
	}
	if err := good.Check(ctx); err != nil {
		t.Fatalf("Check against the test server: %v", err)
	}
	bad, err := New(Config{URL: "postgres://u:s3cret@127.0.0.1:1/db", Publication: "p", Slot: "s", SinkRef: "lake"})
	if err != nil {
		t.Fatal(err)
	}
	err = bad.Check(ctx)
	if err == nil || !strings.Contains(err.Error(), "connect") || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Check against a closed port: %v; want a connect error without the password", err)
	}
}
