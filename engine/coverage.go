package engine

// Coverage marks name the engine's rare branches: the retries, races,
// refusals and recoveries that a test must reach for them to be tested at
// all. The engine counts each mark it passes; the simulator adds the
// counts of every incarnation of a world and reports, over a sweep, which
// marks no world reached (simulate -coverage). A mark no seed reaches is a
// path the simulator does not test.
//
// Marks are per engine (no global state), cost one array increment, and
// never influence behaviour.

// Mark is one rare branch.
type Mark uint8

// Marks. The values index counters: append only, and give each a name.
const (
	// Writer and commit protocol (persist.go, retry.go).
	MarkMultipart             Mark = iota // a body went up as a multipart upload
	MarkMultipart3                        // a multipart upload of three parts or more completed
	MarkPartRetry                         // an UploadPart was tried again after a failure
	MarkCompleteSettledByHead             // an ambiguous Complete answered NoSuchUpload: a HEAD settled it
	MarkUploadAborted                     // a failed persist aborted its multipart upload
	MarkPersistFailed                     // a persist failed: units back in the accumulator
	MarkMarkerExists                      // a marker PUT found its key taken (only a writer sharing the epoch could)
	MarkInDoubtCommitted                  // an in-doubt marker was found by a later read: committed
	MarkInDoubtAbsent                     // an in-doubt marker was found absent: not committed
	MarkFencedLive                        // a live superseded writer's commit hit the fence
	// Recovery and the sweeper (recovery.go, epoch.go, sweep.go).
	MarkRecoveryRetry       // a transient failure restarted recovery
	MarkClaimRetry          // an epoch claim lost a race or went unheard, and read again
	MarkClaimLanded         // an unheard claim of ours was found to have landed
	MarkSealRetry           // the seal write was refused or unheard and the writer object re-read
	MarkMarkerBodyUnlisted  // LIST showed a marker without its body: a HEAD found the body
	MarkListedMarkerGone    // LIST showed a marker that was gone when read
	MarkResumedFromBitmap   // recovery registered a segment with bits already set
	MarkOrphanSwept         // the sweeper deleted an orphan body or bitmap
	MarkOrphanHasMarker     // an orphan candidate's marker existed after all (LIST lag)
	MarkFencedMarkerSwept   // the sweeper deleted a marker beyond its epoch's seal
	MarkDanglingUploadAbort // the sweeper aborted a stale multipart upload
	// Compaction, bitmaps, reclaim (compact.go, apply.go, reclaim.go, cache.go).
	MarkBodyFetched        // a body was read with one GET
	MarkBodyStreamed       // a body larger than the cache was streamed in ranges
	MarkBodyUncached       // a fetched body did not fit the cache any more and was used once
	MarkCacheEvicted       // the body cache evicted an entry
	MarkWaitPinned         // a job waited for pinned bodies to make room in the cache
	MarkBodyMismatch       // a fetched body failed its marker's checksum (and was read again)
	MarkJobRefused         // a job was refused for good: its slices cannot be read
	MarkSinkCannotApply    // a sink said a job can never be applied
	MarkSinkRetry          // a failed job was retried after a backoff
	MarkBitmapUnreadable   // a completion bitmap could not be read: its segment is kept
	MarkBitmapConflict     // a bitmap write was refused or unheard and re-read, merged, rewritten
	MarkCheckpointConflict // an offsets checkpoint object's write was refused or unheard, re-read and retried
	MarkReclaimWaitsSettle // a reclaim waited for an in-doubt marker PUT's lifetime
	MarkCloseSinkFailing   // a job failed during a graceful close and was left for the next start
	// Ingest (ingest.go).
	MarkBackpressureMemory // a unit was refused: admission memory full
	MarkBackpressureWAL    // a unit was refused: the WAL backlog is at LiveSegmentsMax
	MarkBackpressureOffset // a unit was refused: its offset key has an unanswered unit
	MarkBackpressureQueue  // a unit was refused: snapshot limits reached and the queue full
	MarkBackpressureView   // a unit was refused: the offsets view is full
	MarkDuplicateCommitted // a retried idempotency key was answered from the key store
	MarkDuplicateJoined    // a retry joined its pending unit's answer
	MarkOffsetsCovered     // a replayed unit was already covered by the offsets: acked, not stored
	MarkIdempotencyExpired // idempotency keys past their window were dropped
	// Verified reads (read.go).
	MarkReadDamaged // a marker, bitmap, checkpoint or writer object failed its check and was read again
	// Zombies (fence.go).
	MarkFencedBeforeReclaim // a superseded writer found out before deleting anything
	MarkReclaimedElsewhere  // a segment's body and marker were gone: another writer reclaimed it
	// Offsets checkpoint (checkpoint.go).
	MarkCheckpointOldFormat // an _offsets or bucket object holding idempotency keys was read: they move to runs
	MarkIdemBucketSwept     // the sweeper deleted an expired idempotency-key bucket object
	// Idempotency-key store (keystore*.go).
	MarkIdemLookup       // a key the filters admitted was looked up in a run block
	MarkIdemFalseHit     // a looked-up block did not hold the key (a filter's false hit)
	MarkIdemRunsMerged   // runs of a bucket were merged into one
	MarkIdemBlockGone    // a looked-up run was gone (merged or expired): the manifest was read again
	MarkIdemRunLost      // a manifest listed a run whose object is missing
	MarkIdemManifestLost // a manifest we had written was gone: it is written again
	MarkIdemManifestFull // a bucket's manifest was full: its keys wait for a merge
	MarkBackpressureKeys // a unit was refused: idempotency keys use their share of the memory pool
	// Streaming (stream.go).
	MarkChunkReread // a streamed chunk disagreed with the previous pass and was read again
	// Local-disk WAL (wal_disk*.go).
	MarkBackpressureWALDisk // a unit was refused: its WAL partition is over PartitionBytesMax
	MarkWALBacklog          // a durable unit waited for room in live (snapshot limits, queue full)
	MarkWALPoisoned         // a log write or fsync failed: the segment is poisoned, the batch outcome-unknown
	MarkWALOpenRetry        // creating a log segment failed and is retried
	MarkWALValveAge         // a log segment pinned past PinnedMax forced a flush
	MarkWALValveSize        // the WAL over TotalBytesMax forced a flush
	MarkWALHaltedKeep       // a segment with units in a halted partition is kept
	MarkWALTornTail         // recovery truncated a torn tail
	MarkWALCorrupt          // recovery found mid-segment corruption: the partition halts
	MarkWALReplayedSealed   // recovery replayed a sealed generation under its own snapshot id
	MarkWALReplayedLive     // recovery replayed unsealed units into the memtable
	MarkWALStaleDiscarded   // recovery ignored entries of a poisoned batch (a later segment superseded them)
	MarkWALOwnedFlushed     // recovery found a logged generation's segment owned: logged it flushed
	MarkWALPrepared         // a unit prepared off the loop (PrepareUnit) was taken as prepared
	MarkWALReplayJoined     // a retry of a replayed unit was answered when its generation committed
	MarkWALFlushedPartly    // recovery found a generation's flushed record in some of its partitions only: logged it again
	// Recovery giving up (recovery.go).
	MarkRecoveryGaveUp // recovery stopped: refused for good, or failing for Config.RecoveryGiveUp
	// WAL identities (compact.go).
	MarkLegacyOrigin // a segment committed before WAL identities was registered: its jobs keep their old ids
	// Spanning jobs and their cuts (cut.go, compact.go).
	MarkCutSize         // a job was cut: its bytes reached the sink's file size
	MarkCutInterval     // a job was cut: its oldest PART waited the flush interval
	MarkCutValve        // a job was cut by the WAL pressure valve
	MarkCutClose        // a job was cut by a graceful close
	MarkCutShape        // a job was cut: its lane's schema or CDC-ness changed
	MarkValveOpen       // a cut decision found the WAL at its pressure valve
	MarkCutOnlySegment  // a segment without PARTs was sealed to carry cuts
	MarkJobSpans        // a job holding PARTs of two segments or more started
	MarkCutReplayed     // recovery formed a job from a live cut and offered it to its sink again
	MarkCutFoundApplied // a cut's job was found applied (a bit set, or a segment of it reclaimed)
	MarkCutJobGone      // a cut's job had no live segment left: applied
	MarkReclaimWaitsCut // a cut's segment waited for its job's bits to be durable elsewhere
	// The writer's pipeline (persist.go).
	MarkBodyAhead        // a queued snapshot's body was encoded and uploaded while an earlier one committed
	MarkBodyAheadDropped // a body made ahead was dropped: an earlier snapshot's persist failed
	// Recovery (compact.go).
	MarkLostBitsInferred // PARTs in a segment whose bitmap was unreadable lay before a live cut (or a shape change) of their lane: applied by an earlier job
	// The local-disk WAL (wal_disk_replay.go).
	MarkWALCommittedUnflushed // recovery found a generation's segment owned and no flushed record of it in the log
	// The idempotency-key store (keystore_io.go).
	MarkIdemWriteWaitsRead // a round's write of a key bucket waited for a lookup's re-read of its manifest
	// Ingest (ingest.go).
	MarkLiveBytesFull // a unit found no room in live for its bytes (Config.LiveBytesMax): live is sealed first
	// The writer's pipeline (persist.go).
	MarkPersistFailedResealed // a failed persist's sets did not fit one segment together: some were sealed again apart
	// The local-disk WAL (wal_disk_replay.go).
	MarkWALReplaySealed // replay sealed live: the log's unsealed units fill more than one segment
	NumMarks
)

var markNames = [NumMarks]string{
	"multipart", "multipart-3-parts", "part-retry", "complete-settled-by-head", "upload-aborted",
	"persist-failed", "marker-exists", "in-doubt-committed", "in-doubt-absent", "fenced-live-writer",
	"recovery-retry", "claim-retry", "claim-landed", "seal-retry", "marker-body-unlisted",
	"listed-marker-gone", "resumed-from-bitmap", "orphan-swept", "orphan-has-marker",
	"fenced-marker-swept", "dangling-upload-aborted",
	"body-fetched", "body-streamed", "body-uncached", "cache-evicted", "wait-pinned",
	"body-checksum-mismatch", "job-refused", "sink-cannot-apply", "sink-retry",
	"bitmap-unreadable", "bitmap-conflict", "checkpoint-conflict", "reclaim-waits-settle",
	"close-sink-failing",
	"backpressure-memory", "backpressure-wal", "backpressure-offset", "backpressure-queue",
	"backpressure-view", "duplicate-committed", "duplicate-joined", "offsets-covered",
	"idempotency-expired", "read-damaged", "fenced-before-reclaim", "reclaimed-elsewhere",
	"checkpoint-old-format", "idem-bucket-swept",
	"idem-lookup", "idem-false-hit", "idem-runs-merged", "idem-block-gone", "idem-run-lost",
	"idem-manifest-lost", "idem-manifest-full", "backpressure-keys",
	"chunk-reread",
	"backpressure-wal-disk", "wal-backlog", "wal-poisoned", "wal-open-retry", "wal-valve-age",
	"wal-valve-size", "wal-halted-keep", "wal-torn-tail", "wal-corrupt", "wal-replayed-sealed",
	"wal-replayed-live", "wal-stale-discarded", "wal-owned-flushed", "wal-prepared",
	"wal-replay-joined", "wal-flushed-partly",
	"recovery-gave-up",
	"legacy-origin",
	"cut-size", "cut-interval", "cut-valve", "cut-close", "cut-shape", "valve-open",
	"cut-only-segment", "job-spans", "cut-replayed", "cut-found-applied", "cut-job-gone",
	"reclaim-waits-cut",
	"body-ahead", "body-ahead-dropped",
	"lost-bits-inferred",
	"wal-committed-unflushed",
	"idem-write-waits-read",
	"live-bytes-full",
	"persist-failed-resealed",
	"wal-replay-sealed",
}

// String returns the mark's name.
func (m Mark) String() string {
	if m < NumMarks {
		return markNames[m]
	}
	return "mark?"
}

// MarkByName returns the mark called name.
func MarkByName(name string) (Mark, bool) {
	for m, n := range markNames {
		if n == name {
			return Mark(m), true
		}
	}
	return 0, false
}

// Marks counts how often each mark was passed.
type Marks [NumMarks]uint64

// Add adds o's counts to m.
func (m *Marks) Add(o Marks) {
	for i := range m {
		m[i] += o[i]
	}
}

func (e *Engine) mark(m Mark) { e.marks[m]++ }

// Marks returns how often this engine passed each mark.
func (e *Engine) Marks() Marks { return e.marks }
