// Package pgurl shows Postgres connection strings without their secrets.
//
// A connection string can carry its password in three places: the URL's
// user info (postgres://u:secret@h/db), the URL's query
// (postgres://u@h/db?password=secret) and a key=value string
// (host=h password=secret). Redact hides all three; Scrub removes the
// password from any message, such as a driver's error, that may quote it.
// Nothing that passes through here prints a password.
package pgurl
