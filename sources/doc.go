// Package sources holds source plugins: HTTP ingest, files or an object
// prefix, a Postgres database's changes (postgrescdc), Kafka topics,
// a NATS JetStream stream (natsjs), MQTT topics, and a generator,
// and what they share: the namespace rules (names.go) and the one
// decision a resending source takes on the host's answer to a unit
// (answer.go, Judge: ack, stop, give up, or resend the same unit). A source hands Arrow
// record batches to the host with an offset or an idempotency key (or,
// for an HTTP namespace configured at-least-once, neither) and waits for
// the ACK; it never writes offsets itself — the host is the only writer
// of the WAL's durable progress, and a source resumes from the host's
// recovered offsets. The one durable mark a source sets outside the WAL,
// the Postgres CDC source's replication-slot position on the source
// server, only ever follows what the host has acked. docs/DESIGN.md §15
// says how the sources fit the design.
package sources
