// Package httpsrc is the HTTP ingest source: POST /v1/ingest/{namespace}
// (Handler), and the decoding of request bodies: Decode reads one body,
// in the Format its Content-Type names (FormatOf), and returns its rows
// as Arrow record batches.
//
// # Requests and answers
//
// A request is checked and decoded (Handler.Prepare) before anything is
// handed to the host, so a refused request changes nothing: 401 without
// the configured bearer token, 503 (Retry-After) until the host has
// recovered, 400 for a bad namespace (sources.CheckNamespace), a missing
// or malformed Idempotency-Key (1–255 printable ASCII; required unless the
// namespace is at-least-once) or bad input (naming the line and field),
// 404 for a namespace the source does not take, 415 for an unknown
// Content-Type, 413 over the body cap. A request that passes becomes one
// unit, handed to the host; it is answered 200 with its row count only
// once the host acked it — durable in the WAL. The host's refusals map to
// what a client should do: backpressure 429 with Retry-After; anything
// that leaves the outcome unknown (not ready, closed, an fsync error, a
// wait cut short) 503 with Retry-After — retrying with the same key is
// safe.
//
// The Idempotency-Key, scoped to its namespace, is the unit's idempotency
// key in the engine: a retry of a committed key, during, after or across
// a crash and restart, is answered 200 again and not stored twice, for as
// long as the engine's idempotency window (24 h). The answer's row count
// is that of the retried body; a retry must resend the same body (a
// different body under a used key is not stored).
//
// Prepare and Answer are separate from handing the unit over, so that the
// same code runs behind net/http (ServeHTTP, blocking on the host) and in
// a simulated world (its own clients and host).
//
// # Formats
//
//	Content-Type                         Format
//	application/x-ndjson                 JSONLines
//	application/jsonl                    JSONLines
//	application/x-jsonlines              JSONLines
//	application/json-lines               JSONLines
//	text/csv                             CSV
//	application/vnd.apache.arrow.stream  ArrowIPC
//
// A charset parameter, if any, must be utf-8. Text bodies may start with
// a UTF-8 byte order mark, which is dropped.
//
// # Errors
//
// Bad input is an *InputError (the server answers 400) naming the line
// (1-based; 0 for an Arrow stream or a body with no rows), the field if
// one is involved, and the values: `line 7, field "price": a string where
// earlier lines had numbers`. A body over Limits.BodyBytes, or one that
// would decode to more than 8× that in Arrow memory (Arrow keeps a slot
// for every null, so a sparse body can otherwise demand gigabytes from a
// few megabytes), wraps ErrTooLarge (413). A type this package does not
// decode wraps ErrUnsupportedType (415). Decode reads no more than
// BodyBytes+1 bytes of a body, and holds nothing allocated when it fails.
//
// Every format: at most Limits.Rows rows and Limits.Fields fields (at
// least one of each), in batches of at most Limits.BatchRows rows. Field
// names are non-empty, valid UTF-8, at most 256 bytes, and unique.
//
// # JSON lines
//
// Each non-empty line (blank and whitespace-only lines are skipped; a
// line may end "\r\n") is one JSON object, at most Limits.LineBytes long
// and valid UTF-8. Anything else on a line, or a key repeated in one
// object, is bad input, as is a body of only empty objects. A field a
// line does not have, or has as null, is null in that row.
//
// # CSV
//
// RFC 4180, as encoding/csv reads it: the first record is the header,
// naming the columns; every later record has as many fields. No line, and
// no record (a quoted value may span lines), is longer than
// Limits.LineBytes. An empty cell is null (a quoted empty cell too: the
// reader cannot tell them apart); cells are not trimmed. Columns keep the
// header's order: a CSV file's column order is part of what it says.
//
// # Type inference
//
// JSON lines and CSV carry no schema, so the body's own values choose
// each column's type, over the whole body: the same body always gives the
// same schema. Every column is nullable, and a column with no value but
// null is utf8.
//
// A JSON field holds one kind of value. Integers (no fraction or
// exponent, fitting int64) are int64; other numbers are float64, and a
// field with both is float64 — its integers converted exactly, so one
// beyond ±2^53, which float64 would round, is bad input. true and false
// are bool. Strings are utf8, except a field whose every string is an
// RFC 3339 timestamp: timestamp[µs, UTC], converted to UTC, finer digits
// truncated. Objects and arrays (either, in one field) are utf8 holding
// the value's compact JSON text: a schema stays the same however the
// nested values vary, and a sink that reads JSON can take them apart.
// A field with two kinds (a string where earlier lines had numbers, a
// boolean and a number, a string and an object) is bad input, naming the
// first line that breaks the pattern. Fields are sorted by name (byte
// order), so the same fields give the same schema, and the same schema
// fingerprint, whatever order each line lists them in.
//
// A CSV column takes the first of these types its every non-empty cell
// parses as: int64 (base 10); float64 (decimal only: NaN, Inf, hex and
// 1_000 are text; and, as in JSON, not if an integer cell is beyond
// ±2^53); bool (exactly true, false, TRUE, FALSE, True, False);
// timestamp[µs, UTC] (RFC 3339); else utf8. A CSV cell never makes a
// body bad input by its type: a column of mixed cells is utf8.
//
// # Arrow IPC streams
//
// The schema is taken as it comes, nested types included; at least one
// field. Batches are validated in full (offsets, UTF-8, dictionary
// indices: arrow-go's reader checks the framing only) and re-sliced to
// Limits.BatchRows; empty batches are dropped. Every message's lengths
// are checked against the body limit before anything is allocated, and
// its flatbuffer metadata is verified before arrow-go reads it (arrow-go
// sizes allocations by what the metadata claims). Compressed record
// batches and pre-0.15 framing are refused; a stream may end without its
// end-of-stream marker, but nothing may follow the marker.
package httpsrc
