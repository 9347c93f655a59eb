// Package messages turns the values of a broker's messages — Kafka
// records, JetStream messages — into Arrow batches, one row per
// message: JSON objects decoded as the HTTP source decodes a JSON-lines
// body (its type inference and limits), or each value whole in one
// column of text or bytes; and after the value's columns, the metadata
// columns the caller names (partition, offset, subject, …), filled by
// its AppendMeta. It owns no I/O and no state.
//
// Invariants, checked where they could break: every message is exactly
// one row, in the order given (Decode compares the decoder's row count
// with the messages'); a value's field never takes a metadata column's
// name (a *ValueError).
package messages
