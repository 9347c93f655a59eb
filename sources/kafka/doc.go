// Package kafka is the Kafka source: it reads the partitions of a list
// of topics, or of the topics a regular expression matches — all of
// them, or those a consumer group assigns — through
// github.com/twmb/franz-go and hands their records to the host as units,
// each partition's progress carried in the unit as a source offset. It
// owns fetching, cutting records into units and decoding them; it owns
// no durable state. Where each partition resumes
// is the host's offsets view, which only the host writes, with the rows
// (sources/doc.go) — the consumer's offsets live in the WAL, not in the
// broker, which is what lets a new host with an empty disk resume
// exactly once; in a consumer group the group's committed offsets also
// count (below). The daemon wires a Source to storage.Host.Ingest and
// hands Run storage.Host.ResumeOffsets.
//
// # Topics
//
// Config.Topics lists the topics; each must exist. Config.TopicRegex
// instead matches whole topic names (CompileTopicRegex): the cluster's
// topics are matched at the start and at every look-up (Config.Metadata),
// and a topic matched later is read from its start. Kafka's internal
// topics, and any whose name starts with "__", never match. Without
// Config.Namespace each topic goes to a namespace of its own name; two
// matched topics that would share one stop the source, naming both. A
// topic of the set that disappears stops it too, as a listed one does.
//
// # Partitions and offsets
//
// Without Config.Group partitions are assigned directly: every
// partition of every topic, found at the start and looked up again every
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
// # Consumer groups
//
// With Config.Group the group assigns the partitions (franz-go's group
// consumer, cooperative-sticky, autocommit off). On every assignment the
// group's committed offsets of the partitions assigned are fetched —
// retried with a backoff and logged while the coordinator does not
// answer, the partitions not consumed meanwhile, never done without —
// and each partition resumes from the higher of its offset in the host's
// view as it is then (Config.Offsets, max-merged with what this Run was
// given and acked) and its committed offset; from Start with neither.
// The offset chosen is checked against its log as above. After each
// unit is acked, a committer goroutine commits its offsets to the group
// (CommitOffsetsSync, one at a time, the latest per partition): best
// effort, failures logged and counted (Stats.CommitErrors), ingest never
// waits for it; a view offset above the group's is committed on the
// assignment. group.go says what a revoke and a loss do to the units in
// flight: in short, a revoked partition's queued records are dropped, a
// unit holding it is abandoned once an answer says nothing of it is
// held (its other partitions' records go back to the buffer) or resent
// whole while its outcome is unknown, and the revoke returns only once
// none is in flight, then commits the partition's acked offset.
//
// Why the higher of the two: an offset is committed to the group only
// after the host acked the records before it — they are in the owning
// daemon's WAL — so a committed offset is a lower bound of what some
// daemon's WAL holds. Within one daemon its WAL stays the truth: a
// committed offset below its view's is ignored (no rewind), and it
// resumes exactly once across kills and new hosts from its own WAL. A
// committed offset above its view's means another daemon ingested the
// records between into its own WAL: they are not read again (an offset
// reset by hand in the group, when higher, is taken as well: the records
// before it are skipped). So a
// partition handed between daemons is at least once: the new owner
// reads again only the records the old one acked after its last commit
// to the group — none when the revoke's commit succeeded; after a loss
// (the old owner fenced, or its session expired: nothing committed) or
// a failed commit, those since its last commit, and a unit of the old
// owner in flight may still be committed after the new owner began. A
// partition with neither offset starts at Start each time it is
// assigned: with StartLatest, one handed over before any unit of it was
// acked and committed begins at its end again, and the records between
// are skipped. Members sharing one view (only tests do) hand partitions
// over without loss or duplicates.
//
// # Units
//
// A unit holds records of one topic, from partitions no other unit in
// flight holds, up to Config.UnitBytes of values; up to Config.InFlight
// units await their answers at once. Values are JSON objects (FormatJSON,
// decoded as the HTTP source decodes a JSON-lines body: its inference,
// its limits; a pretty-printed value is compacted first), or one "value"
// column of text or bytes. Every row gets the record's partition,
// offset, timestamp, key and headers (ColPartition, ColOffset,
// ColTimestamp, ColKey, ColHeaders: a list of {key, value} in the
// record's order, duplicates kept, empty when it has none, so units with
// and without headers share a schema); a tombstone (no value) is a row
// of those alone. A header key that is not UTF-8 is a *RecordError. A value that
// cannot be a row is a *RecordError naming the topic, partition and
// offset, and stops the source: the records before it are ingested
// (a unit halves until the bad record comes first, messages.ErrSplit),
// none at or after it. Each topic's rows go to the namespace of its name
// (NamespaceOf) unless Config.Namespace names one.
//
// # Backpressure
//
// Records fetched and not yet acked are held up to Config.BufferBytes;
// past it the poller stops polling, so franz-go holds at most one more
// fetch per broker, and fetching resumes as units are acked. Memory is
// bounded whatever the sink's speed. A topic's partitions take turns
// starting units, so none waits while others have records.
//
// Invariants, each checked where it could break:
//   - One unit in flight per partition, and a partition's records enter
//     units in offset order (buffer: busy partitions; build: offsets
//     ascend within a unit), so its offsets only grow and are acked in
//     order.
//   - A record is never fetched twice into units: each fetched offset is
//     at or after the partition's expected position (run.advance).
//   - Every record of a unit is a row: rows = records (decodeJSON).
//   - Only records of partitions the run owns are queued (poll), and
//     only their offsets committed to a group (committer.take).
//
// Answers of ingest are sources.Judge's: a refusal for backpressure or
// an unknown outcome resends the very same unit after a backoff; the
// unit in flight is not abandoned when the context ends (ingest runs
// without its cancellation), so a host closing gracefully can ack it.
//
// # Once
//
// With Config.Once (not with a Group) a Run ends on its own (once.go):
// once every partition found at its start is ingested and acked up to
// its high watermark at start (the last stable offset with
// ReadCommitted). Transaction markers are fetched too
// (kgo.KeepControlRecords) so that a partition whose last offsets are
// markers is seen passed; they never become rows.
package kafka
