package pgurl

import (
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// hidden replaces a password.
const hidden = "xxxxx"

// Redact returns conn fit for a log line: a URL with its password
// replaced, a key=value string as a placeholder (its keys are not worth
// the risk of parsing them ourselves), an unparsable string as another.
// User, host, port and database stay, so an operator can tell which
// connection failed.
func Redact(conn string) string {
	if !strings.Contains(conn, "://") {
		return "(a key=value connection string, not shown)"
	}
	u, err := url.Parse(conn)
	if err != nil {
		return "(a connection URL that does not parse, not shown)"
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", hidden)
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// Scrub returns msg with every password conn carries — in whatever form
// the driver would read it, and as it would appear escaped in a URL —
// replaced.
func Scrub(msg, conn string) string {
	for _, pw := range passwords(conn) {
		for _, form := range []string{pw, url.QueryEscape(pw), url.PathEscape(pw)} {
			msg = strings.ReplaceAll(msg, form, hidden)
		}
	}
	return msg
}

// passwords lists what conn may hold as a password: the driver's reading
// of it (which also covers PGPASSWORD), and the URL's own fields in case
// the driver refuses the string.
func passwords(conn string) []string {
	var out []string
	add := func(pw string) {
		if pw != "" {
			out = append(out, pw)
		}
	}
	if cfg, err := pgconn.ParseConfig(conn); err == nil {
		add(cfg.Password)
	}
	if u, err := url.Parse(conn); err == nil {
		if u.User != nil {
			pw, _ := u.User.Password()
			add(pw)
		}
		add(u.Query().Get("password"))
	} else {
		add(rawUserPassword(conn))
	}
	return out
}

// rawUserPassword reads the password of a URL that url.Parse refuses:
// what lies between the user's ':' and the last '@' of the authority.
func rawUserPassword(conn string) string {
	_, rest, ok := strings.Cut(conn, "://")
	if !ok {
		return ""
	}
	authority, _, _ := strings.Cut(rest, "/")
	userinfo := authority[:max(strings.LastIndex(authority, "@"), 0)]
	_, pw, _ := strings.Cut(userinfo, ":")
	return pw
}
