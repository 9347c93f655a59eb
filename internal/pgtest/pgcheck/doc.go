// Command pgcheck says, before the tests run, whether the Postgres tests
// will run: go test shows a skipped test's reason only with -v, so make
// test prints this instead. It exits 1 under CI=true when they would not
// all run (CI must reach a server with wal_level=logical), 0 otherwise.
package main
