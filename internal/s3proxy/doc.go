// Package s3proxy is an S3 endpoint for tests of how skipprd behaves
// when its store misbehaves: a real gofakes3 store (in memory) behind a
// reverse proxy whose mode a test switches — pass every request, refuse
// writes with 403 AccessDenied (credentials that lost write access),
// answer writes 500 (a store that fails them), or cut every connection
// after the request arrived (an outcome unknown) — and it can stop
// listening and start again on the same address (a store that is down:
// connections refused). Test support only; the daemon reaches it through the
// standard AWS variables like any S3-compatible store.
package s3proxy
