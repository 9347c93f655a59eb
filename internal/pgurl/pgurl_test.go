package pgurl

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactHidesEveryPassword(t *testing.T) {
	for _, c := range []struct{ conn, want string }{
		{"postgres://u:s3cret@h:5432/db", "postgres://u:xxxxx@h:5432/db"},
		{"postgres://u@h/db?password=s3cret&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"postgres://u@h/db", "postgres://u@h/db"},
		{"host=h user=u password=s3cret", "(a key=value connection string, not shown)"},
		{"postgres://u:s3cret@h:bad port/db", "(a connection URL that does not parse, not shown)"},
	} {
		if got := Redact(c.conn); got != c.want {
			t.Errorf("Redact(%q) = %q, want %q", c.conn, got, c.want)
		}
	}
}

func TestScrubRemovesPasswordsFromMessages(t *testing.T) {
	for _, conn := range []string{
		"postgres://u:s3cret@h/db",
		"postgres://u@h/db?password=s3cret",
		"host=h user=u password=s3cret",
		"host=h user=u password='s3cret'",
		"postgres://u:s3cret@h:bad port/db",
	} {
		msg := errors.New("connect to " + conn + " failed: password s3cret refused").Error()
		if got := Scrub(msg, conn); strings.Contains(got, "s3cret") {
			t.Errorf("Scrub(…, %q) kept the password: %q", conn, got)
		}
	}
	if got := Scrub("p%40ss and p@ss", "postgres://u:p%40ss@h/db"); strings.Contains(got, "p@ss") || strings.Contains(got, "p%40ss") {
		t.Errorf("escaped password kept: %q", got)
	}
}
