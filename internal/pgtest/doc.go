// Package pgtest gives tests a database of their own on the real
// PostgreSQL server: SKIPPR_TEST_PG_URL, or postgres://postgres@127.0.0.1:5432/test
// (trust auth) by default. When no server answers a test is skipped with
// a loud message — unless CI=true, where it fails: CI must reach one.
package pgtest
