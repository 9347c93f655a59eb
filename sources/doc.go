// Package sources holds source plugins: HTTP ingest, files or an object
// prefix, a Postgres database's changes (postgrescdc), and a generator. A source hands Arrow record batches to the host
// with an offset or an idempotency key and waits for the ACK; it never
// writes offsets itself — the host is the only writer of durable progress.
package sources
