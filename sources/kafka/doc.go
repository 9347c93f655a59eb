// Package kafka is the Kafka source: it reads every partition of a list
// of topics through github.com/twmb/franz-go and hands their records to
// the host as units, each partition's progress carried in the unit as a
// source offset. It owns fetching, cutting records into units and
// decoding them; it owns no durable state. Where each partition resumes
// is the host's offsets view, which only the host writes, with the rows
// (sources/doc.go) — the consumer's offsets live in the WAL, not in the
// broker, which is what lets a new host with an empty disk resume
// exactly once. The daemon wires a Source to storage.Host.Ingest and
// hands Run storage.Host.ResumeOffsets.
//
// # Partitions and offsets
//
// Partitions are assigned directly (no consumer group): every partition
// of every topic, found at the start and looked up again every
// Config.Metadata for partitions added since (read from their start).
// A partition's offset key is "kafka/{Name}/{topic}/{partition}" (the
// topic hashed when the key would pass 256 bytes) and its value the
// offset of the next record: the unit's last record's offset + 1. The
// engine max-merges offsets, so a partition's committed offset is its
// latest unit's. A partition with a recovered offset resumes there; one
// without starts at Config.Start (earliest by default).
//
// Records the broker removed before they were ingested — a recovered
// offset below the log's start, or a fetch that finds its offset gone
// (the client is told never to reset an offset on its own) — are a
// *GapError naming the partition and the range, and stop the source
// (OnGapStop), or are logged, counted and passed over (OnGapSkip): never
// a silent jump. A recovered offset beyond the log's end is an
// *AheadError (the topic was created again): the source stops.
//
// # Units
//
// A unit holds records of one topic, from partitions no other unit in
// flight holds, up to Config.UnitBytes of values; up to Config.InFlight
// units await their answers at once. Values are JSON objects (FormatJSON,
// decoded as the HTTP source decodes a JSON-lines body: its inference,
// its limits; a pretty-printed value is compacted first), or one "value"
// column of text or bytes. Every row gets the record's partition,
// offset, timestamp and key (ColPartition, ColOffset, ColTimestamp,
// ColKey); a tombstone (no value) is a row of those alone. A value that
// cannot be a row is a *RecordError naming the topic, partition and
// offset, and stops the source; nothing at or after it in its unit is
// ingested. Each topic's rows go to the namespace of its name
// (NamespaceOf) unless Config.Namespace names one.
//
// # Backpressure
//
// Records fetched and not yet acked are held up to Config.BufferBytes;
// past it the poller stops polling, so franz-go holds at most one more
// fetch per broker, and fetching resumes as units are acked. Memory is
// bounded whatever the sink's speed.
//
// Invariants, each checked where it could break:
//   - One unit in flight per partition, and a partition's records enter
//     units in offset order (buffer: busy partitions; build: offsets
//     ascend within a unit), so its offsets only grow and are acked in
//     order.
//   - A record is never fetched twice into units: each fetched offset is
//     at or after the partition's expected position (run.advance).
//   - Every record of a unit is a row: rows = records (decodeJSON).
//
// Answers of ingest are sources.Judge's: a refusal for backpressure or
// an unknown outcome resends the very same unit after a backoff; the
// unit in flight is not abandoned when the context ends (ingest runs
// without its cancellation), so a host closing gracefully can ack it.
//
// Not built yet: consumer groups, committing progress to the broker for
// lag tools, topic regexes, headers as a column.
package kafka
