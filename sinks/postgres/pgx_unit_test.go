package postgres

import (
	"context"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/internal/pgurl"
)

// Commit's errors: the server refusing (ERROR) or a commit that rolled
// back are definite; a broken connection, an ended context, or a FATAL
// session end may have committed.
func TestCommitErrorClassification(t *testing.T) {
	for _, c := range []struct {
		desc      string
		err       error
		ambiguous bool
	}{
		{"serialization failure", &pgconn.PgError{Severity: "ERROR", SeverityUnlocalized: "ERROR", Code: "40001"}, false},
		{"localized ERROR", &pgconn.PgError{Severity: "FEHLER", SeverityUnlocalized: "ERROR", Code: "23505"}, false},
		{"rolled back", pgx.ErrTxCommitRollback, false},
		{"admin shutdown", &pgconn.PgError{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: "57P01"}, true},
		{"EOF", io.ErrUnexpectedEOF, true},
		{"deadline", context.DeadlineExceeded, true},
	} {
		err := commitError("j", c.err)
		if errors.Is(err, ErrAmbiguous) != c.ambiguous || !errors.Is(err, c.err) {
			t.Errorf("%s: %v, want ambiguous=%t and the cause kept", c.desc, err, c.ambiguous)
		}
	}
	if commitError("j", nil) != nil {
		t.Errorf("commitError(nil) is not nil")
	}
}

// Server errors no retry can get past become refusals; others stay
// retryable.
func TestRefuseIfPermanent(t *testing.T) {
	tx := &Tx{JobID: "j", Table: "t"}
	for code, permanent := range map[string]bool{"22P05": true, "22003": true, "54011": true, "42P10": true, "40001": false, "53300": false, "42P01": false} {
		err := refuseIfPermanent(tx, &pgconn.PgError{Severity: "ERROR", Code: code})
		if errors.Is(err, engine.ErrCannotApply) != permanent {
			t.Errorf("SQLSTATE %s: %v, want permanent=%t", code, err, permanent)
		}
	}
}

func TestHasNULEscape(t *testing.T) {
	for raw, want := range map[string]bool{
		`"a"`:                false,
		`"\u0000"`:           true,
		`{"k":"x\u0000y"}`:   true,
		`"\\u0000"`:          false, // an escaped backslash, then text
		`"\\\u0000"`:         true,
		`"\u00001"`:          true,
		`"\u0001"`:           false,
		`"\`:                 false,
		`"\u000"`:            false,
		`["\\\\", "\u0000"]`: true,
	} {
		if got := hasNULEscape([]byte(raw)); got != want {
			t.Errorf("hasNULEscape(%s) = %t", raw, got)
		}
	}
}

func TestMicros(t *testing.T) {
	for _, c := range []struct {
		v    int64
		unit arrow.TimeUnit
		us   int64
		ok   bool
	}{
		{1, arrow.Second, 1_000_000, true},
		{-1, arrow.Millisecond, -1_000, true},
		{7, arrow.Microsecond, 7, true},
		{-1, arrow.Nanosecond, -1, true},
		{-1000, arrow.Nanosecond, -1, true},
		{-1001, arrow.Nanosecond, -2, true},
		{1999, arrow.Nanosecond, 1, true},
		{math.MaxInt64/1_000_000 + 1, arrow.Second, 0, false},
		{math.MinInt64/1_000 - 1, arrow.Millisecond, 0, false},
	} {
		us, ok := micros(c.v, c.unit)
		if ok != c.ok || (ok && us != c.us) {
			t.Errorf("micros(%d, %s) = %d, %t; want %d, %t", c.v, c.unit, us, ok, c.us, c.ok)
		}
	}
}

// OpenPGX's errors never show the URL's password, whether the URL does
// not parse or the server does not answer.
func TestOpenPGXHidesPassword(t *testing.T) {
	const secret = "s3cr3t-Pa55"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, url := range []string{
		"postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"postgres://u:" + secret + "@[::1/db",
		"postgres://u:" + secret + "@127.0.0.1:1/db?sslmode=bogus",
		"postgres://u@127.0.0.1:1/db?password=" + secret + "&connect_timeout=2",
		"postgres://u@127.0.0.1:1/db?password=" + secret + "&sslmode=bogus",
		"host=127.0.0.1 port=1 user=u password=" + secret + " sslmode=bogus",
	} {
		db, err := OpenPGX(ctx, url, PGXOptions{MaxConns: 1})
		if err == nil {
			db.Close()
			t.Fatalf("OpenPGX succeeded against %s", pgurl.Redact(url))
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: the error shows the password: %v", pgurl.Redact(url), err)
		}
	}
}

func TestOpenPGXOptions(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []PGXOptions{{MaxConns: 0}, {MaxConns: PGXConnsMax + 1}, {MaxConns: 1, Schema: strings.Repeat("s", 64)}} {
		if _, err := OpenPGX(ctx, "postgres://127.0.0.1:1/x", opts); err == nil {
			t.Errorf("OpenPGX accepted %+v", opts)
		}
	}
}

// The DDL lock keys of different tables differ, also when the names'
// dots would make "schema.table" strings equal.
func TestTableLockKey(t *testing.T) {
	if tableLockKey("a.b", "c") == tableLockKey("a", "b.c") || tableLockKey("public", "t") == tableLockKey("public", "u") {
		t.Fatalf("lock keys collide")
	}
}

// The limits' relations: the identity bound is below the segment
// format's (else Plan's check would be dead) and below a btree entry's
// 2704 bytes; the date bounds are Postgres's first and past-last days,
// 4714-11-24 BC (astronomical year -4713) and 5874898-01-01.
func TestLimits(t *testing.T) {
	if IdentityBytesMax >= segment.SidecarIdentityBytesMax || IdentityBytesMax > 2704-64 {
		t.Errorf("IdentityBytesMax %d: want below %d and well below 2704", IdentityBytesMax, segment.SidecarIdentityBytesMax)
	}
	first := time.Date(-4713, time.November, 24, 0, 0, 0, 0, time.UTC).Unix() / 86400
	end := time.Date(5874898, time.January, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400
	if first != dateUnixDaysMin || end != dateUnixDaysEnd || timestampMicrosMin != first*86_400_000_000 {
		t.Errorf("date bounds %d..%d, want %d..%d", dateUnixDaysMin, dateUnixDaysEnd, first, end)
	}
	if PGXConnsMax < 2 || ColumnsMax < len(cdcColumns)+1 {
		t.Errorf("PGXConnsMax %d, ColumnsMax %d", PGXConnsMax, ColumnsMax)
	}
}
