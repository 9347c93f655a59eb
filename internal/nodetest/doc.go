// Package nodetest runs what the tests need from Node.js: DuckDB (the
// @duckdb/node-api package), to read what skipprd wrote the way a user's
// reader would — e.g. read_parquet('lake/events/**/*.parquet',
// union_by_name=true) — and Playwright (playwright-core) driving a real
// Chromium on the live WAL view. Install them with
// `npm ci --prefix internal/nodetest` (.ci/run does). Where Node.js or
// the packages are missing a test is skipped with a loud message —
// unless CI=true, where it fails.
package nodetest
