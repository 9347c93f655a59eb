package engine

import "time"

// Stats are the engine's counters, for progress lines and for the
// simulator's summary. They never influence behaviour.
type Stats struct {
	UnitsSubmitted    uint64
	UnitsAcked        uint64 // acks for units this incarnation committed
	UnitsDuplicate    uint64 // submissions answered from the offsets view or joined to a pending unit
	UnitsRejected     uint64
	RowsAcked         uint64
	BytesAcked        uint64
	Commits           uint64
	PersistFailures   uint64
	InDoubt           uint64 // marker outcomes settled by a later read
	JobsApplied       uint64 // compaction jobs applied to their sinks
	RowsApplied       uint64
	SinkFailures      uint64
	SegmentsReclaimed uint64
	Requests          uint64 // object-store requests issued (including retries)
	RecoveryRuns      uint64
	RecoveryOps       uint64 // requests of the last successful recovery, retries included
	OrphansSwept      uint64
	UploadsAborted    uint64
	Alerts            uint64

	// Idempotency keys (keystore*.go).
	KeyLookups    uint64 // submissions whose key the filters admitted, looked up in runs
	KeyBlockReads uint64 // run blocks read by lookups
	KeyFalseHits  uint64 // blocks read that did not hold the key
	KeyRuns       int    // runs listed in the key store's buckets
	KeyMemBytes   int64  // what the key store holds in memory

	// Local-disk WAL.
	WALSyncs           uint64 // group commits (fsyncs) that succeeded
	WALSyncFailures    uint64 // writes or fsyncs that failed (each poisons a segment)
	WALSegmentsCreated uint64
	WALSegmentsDeleted uint64
	WALReplayedUnits   uint64 // units recovery replayed from the log
	WALCorruptions     uint64 // partitions halted on corruption

	LiveSegments int           // owned segments not yet reclaimed
	PersistEMA   time.Duration // moving average of one snapshot's persist time
	AckDelayEMA  time.Duration // moving average of submit-to-ack time
}

// Stats returns a copy of the counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.LiveSegments = len(e.segs)
	s.KeyRuns, s.KeyMemBytes = e.keys.runs(), e.keys.memBytes()
	s.PersistEMA = e.persistEMA
	s.AckDelayEMA = e.ackDelayEMA
	return s
}
