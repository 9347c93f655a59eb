// Package generator is a replayable synthetic source: several namespaces
// of realistic-looking Arrow data at different rates, for the daemon's
// no-configuration run, demos and end-to-end tests.
//
// # Workload
//
// DefaultStreams is what `make run` ingests:
//
//	namespace  partitions  rows/s   batch  kind
//	events     4           20 000   1 000  busy stream (ids, types, countries, values)
//	sessions   1           500      100    moderate stream
//	pageviews  1           20       10     trickle (a nullable referrer column)
//	orders     1           2 000    1 000  snapshot of 10 000 rows, then stops
//
// Every table has ids (UUID-shaped strings or integers), strings,
// microsecond UTC timestamps and floats; Tables lists them.
//
// # Replay
//
// Each (namespace, partition) has an offset key,
// {KeyPrefix}/{namespace}/{partition} (generator/events/0, …); a unit
// covering records [a, b) carries the offset b. A record's content is a
// pure function of (namespace, partition, offset) and the fixed epoch —
// event times are epoch + offset × the table's step, not the wall clock —
// so Run, given the host's recovered offsets (storage.Host.Offsets),
// regenerates precisely the records a crashed run had not committed,
// whatever the batch boundaries were. The generator never writes offsets:
// the host commits them with the rows (docs/DESIGN.md §2, §5).
//
// One unit per offset key is in flight at a time: offsets are high-water
// marks, and a later unit committed ahead of a refused earlier one would
// make the host skip the earlier one forever (engine.Unit.Offsets).
// Backpressure (engine.ErrResourceExhausted), a host still recovering
// (engine.ErrNotReady) and an unknown outcome (engine.ErrUnknownOutcome —
// a log write failed, say on a full disk — or storage.ErrUnanswered) are
// retried with the same unit after a backoff: the host recognises a unit
// it committed by its offset. Only a unit the host can never take
// (engine.ErrInvalidUnit) or a host that refuses units for good
// (engine.ErrClosed, failed closed) stops the partition, and Run.
//
// # Pace
//
// A stream's rate is split evenly over its partitions; each partition
// sends a unit when its last row is due. A partition that falls more than
// a second behind (backpressure) restarts its schedule instead of
// bursting, so the rate is a shape, not a debt.
package generator
