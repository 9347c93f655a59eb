package engine

import (
	"context"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// Ports are the engine's only way to touch the world. The production
// runtime (storage/) implements them with the OS, the AWS SDK and the real
// clock; the simulator (sim/) implements them with seeded models.
//
// The loop contract, for every port below:
//
//   - The engine calls port methods only from its loop.
//   - Every completion callback (done, fn) is invoked exactly once, later,
//     on the engine's loop — never synchronously inside the call that
//     requested it, and never concurrently with other engine code. The
//     engine's state is therefore consistent whenever a callback runs.
//   - Callbacks of one port are not ordered with respect to each other
//     unless a method says so: two requests in flight may complete in
//     either order.
//   - When the process dies (SIGKILL, or the simulator's crash), pending
//     callbacks never run. A request in flight at that moment may or may
//     not have taken effect.
//   - Buffers passed in are borrowed until done runs; the port must not
//     keep or modify them afterwards. Buffers passed to done belong to
//     the engine, read-only: it may keep them as long as it likes (decoded
//     Arrow columns point into them) but never writes into them, so a
//     port may hand out bytes it keeps itself (the simulator's store
//     does).
type Ports struct {
	Clock  Clock
	Rand   Rand
	Timers Timers
	Exec   Executor
	Store  ObjectStore
	Disk   Disk
	Sinks  Sinks  // destinations by sink_ref; nil: nothing is compacted
	Memory Memory // nil: a fixed 1 GiB hint
}

// Sinks resolves a PartitionKey's sink_ref to its destination.
type Sinks interface {
	// Sink returns the destination named ref, or false if there is none
	// (the engine refuses units for an unknown sink_ref).
	Sink(ref string) (Sink, bool)
}

// Sink applies compaction jobs to one destination (Parquet on object
// storage, Parquet in a directory, Postgres, …).
//
// Replay-safe: Apply is called again with the same job (same ID, same
// slices) after a crash or a failure, possibly many times, and the
// destination must end up as if it was applied once. A successful Apply
// means the job's rows are durable at the destination. A failed Apply
// (any error) may have applied the job or not, but never part of it, in
// the sense that a later successful Apply of the same job completes it
// exactly once. An error wrapping ErrCannotApply says no retry can ever
// succeed (the engine refuses the job and alerts); any other error is
// retried. The engine never applies one job twice at the same time. Apply runs on the loop like every port: it must not
// block; heavy work goes through the Executor, I/O through worker
// goroutines (production) or the simulator's models. job and its slices
// are borrowed until done runs.
type Sink interface {
	Apply(job *Job, done func(err error))
}

// Job is one compaction job: the PARTs of one group — a sink, a
// namespace, a schema and CDC-ness (all or none carry a sidecar) — from
// one or more consecutive segments, in commit order (segment, then
// ordinal). Which PARTs is fixed by the cut that ends the job, committed
// in a segment's marker before the job is first applied, and its ID is a
// pure function of that cut, so a job replayed after a crash has the same
// PARTs and the same ID; it is unique across logs (it includes the WAL
// id), so jobs of several pipelines can share a destination.
//
// A sink records Content beside the ID. Finding the ID already applied,
// it compares the recorded Content with the job's: the same means an
// earlier attempt landed; another means another job under the same id —
// it answers ErrCannotApply wrapping ErrIDCollision, never success. (A
// destination written before contents were recorded holds none; the
// sink then compares what it can cheaply — rows, schema — and says so.)
type Job struct {
	// ID is the compaction_id: "{pipeline}-{32 hex digits}", or 32 hex
	// digits alone for a segment committed before WAL identities (a
	// zero Origin).
	ID string
	// Content fingerprints the job's rows: 32 hex digits of its segments'
	// body checksums and the job's ordinals in them.
	Content string
	// Origin is the log that committed the segments: its WAL id and
	// pipeline (zero for a segment committed before WAL identities).
	Origin    segment.Origin
	SinkRef   string // destination name
	Namespace string // table / stream
	// Segment is the segment whose cut ends the job: the job's name in
	// the log (a segment committed before spanning jobs is its own).
	Segment SnapshotID
	// SegmentCreatedUnixMs is when Segment was sealed (wall clock), for
	// Hive-style date folders — the same for every attempt of the job; a
	// bucketed PART's own time bucket is in its key.
	SegmentCreatedUnixMs int64
	// Segments are the segments holding the job's PARTs, ascending.
	Segments []SnapshotID
	Slices   []*segment.Slice
}

// Rows is the number of rows in the job.
func (j *Job) Rows() (n int64) {
	for _, s := range j.Slices {
		n += s.Entry.Rows
	}
	return n
}

// Memory reports how much memory the machine can give the process: on
// Linux MemAvailable, on macOS total RAM. The engine re-reads it now and
// then and sizes one pool from it (70%), split between ingest admission
// and the body cache (docs/DESIGN.md §10). The simulator varies it.
type Memory interface {
	AvailableBytes() int64
}

// Clock is time as the engine may see it.
type Clock interface {
	// Monotonic returns the time since an arbitrary origin fixed for the
	// life of the process. It never goes backwards. All delays, EMAs and
	// ages are computed from it.
	Monotonic() time.Duration
	// WallUnixMs returns wall-clock time in Unix milliseconds. The engine
	// uses it only for names (p_year= keys, created_at fields) and for
	// comparing against object timestamps the store reports; it never
	// orders events by it.
	WallUnixMs() int64
}

// Rand is the engine's only source of randomness (jitter, nonces). The
// simulator seeds it from the run's root seed.
type Rand interface {
	Uint64() uint64
}

// Timers schedules callbacks on the loop.
type Timers interface {
	// AfterFunc runs fn on the loop once d has elapsed on Clock.Monotonic.
	// cancel stops it: once cancel has returned, fn will not run. Calling
	// cancel after fn ran, or twice, is a no-op.
	AfterFunc(d time.Duration, fn func()) (cancel func())
}

// Blocking runs blocking calls no other port covers — a transaction on a
// database — off the loop. The engine itself never calls it; transactional
// sinks (the Postgres sink) are built with one.
//
// Contract:
//
//   - work runs off the loop (on a worker goroutine in production, inside
//     the simulator's model there), at most the port's limit of calls at
//     once; later calls wait their turn. Like Executor work it touches only
//     what the caller handed over and will not touch until done runs.
//   - ctx ends when the port's time limit for one call passes or the
//     process stops; work must then return promptly with an error.
//   - done runs once on the loop with work's error, unless the process
//     dies first.
//   - Crash: done never runs; work may not have started, may still be
//     running (a COMMIT already sent may still land), or may have
//     finished. Timeout: ctx ends and the effect is just as unknown. So
//     whatever work does must be safe to find half-known: the caller
//     settles it on its next attempt (the Postgres sink looks its job id
//     up in the applied-jobs table it commits with the rows).
type Blocking interface {
	Do(work func(ctx context.Context) error, done func(err error))
}

// Executor runs pure, CPU-heavy work (encoding a segment body) off the
// loop. work may run on another goroutine concurrently with the loop, so
// it must touch only data the engine has handed over to it and will not
// touch until done runs. done runs on the loop after work has returned.
// The simulator runs work inline, so a work function must not depend on
// timing or goroutine scheduling for its result.
type Executor interface {
	Go(work func(), done func())
}

// Background is an Executor that also takes work the engine never
// waits for — dropping its references to a committed generation's
// batches — to run off the loop, at once or soon. An Executor without it
// (the simulator's) has that work run inline, on the loop, which keeps
// the world's schedule unchanged by it.
type Background interface {
	Background(work func())
}

// ObjectStore is an S3-compatible object store scoped to one bucket.
//
// Consistency: PutObject, CompleteMultipartUpload and DeleteObject are
// atomic per key; GetObject and HeadObject are read-after-write
// consistent; ListObjects and ListMultipartUploads may lag — keys created
// recently may be missing and keys deleted recently may linger.
//
// Errors: a request that definitely did not take effect returns an error
// that is not ErrAmbiguous (ErrThrottled, ErrNotFound, ErrPreconditionFailed,
// ErrNoSuchUpload or another definite error). A request whose outcome is
// unknown (timeout, connection reset, a 5xx after the body was sent)
// returns an error wrapping ErrAmbiguous: it may or may not have taken
// effect, and may still take effect later only within the store's own
// request lifetime.
type ObjectStore interface {
	// PutObject writes in.Body at in.Key. With IfNoneMatch it fails with
	// ErrPreconditionFailed if the key exists; with IfMatch (an ETag) it
	// fails with ErrPreconditionFailed unless the key exists with that
	// ETag.
	PutObject(in PutObjectInput, done func(etag string, err error))
	// GetObject reads an object, or the byte range in.Range of it. An
	// object (or range) longer than in.Limit bytes is not read: the call
	// fails with ErrTooLarge. Missing key: ErrNotFound.
	GetObject(in GetObjectInput, done func(body []byte, info ObjectInfo, err error))
	// HeadObject returns an object's metadata. Missing key: ErrNotFound.
	HeadObject(key string, done func(info ObjectInfo, err error))
	// ListObjects returns one page of keys under prefix in ascending key
	// order, starting after the page that returned token ("" for the
	// first page). page.NextToken is "" on the last page.
	ListObjects(prefix, token string, done func(page ListPage, err error))
	// DeleteObject removes a key. Deleting a missing key succeeds.
	DeleteObject(key string, done func(err error))

	// CreateMultipartUpload starts an upload to key.
	CreateMultipartUpload(key string, done func(uploadID string, err error))
	// UploadPart uploads part number n (1-based) of an upload. Uploading
	// the same number again replaces it.
	UploadPart(key, uploadID string, n int32, body []byte, done func(etag string, err error))
	// CompleteMultipartUpload makes the parts, in order, the object at key
	// (atomically). An unknown or finished upload: ErrNoSuchUpload.
	CompleteMultipartUpload(key, uploadID string, parts []CompletedPart, done func(err error))
	// AbortMultipartUpload discards an upload and its parts. An unknown
	// or finished upload: ErrNoSuchUpload.
	AbortMultipartUpload(key, uploadID string, done func(err error))
	// ListMultipartUploads returns one page of uploads in progress under
	// prefix, ordered by key then upload id, starting after the marker
	// pair ("" "" for the first page).
	ListMultipartUploads(prefix, keyMarker, uploadIDMarker string, done func(page UploadsPage, err error))
}

// PutObjectInput is a PutObject request. Body is borrowed until done.
type PutObjectInput struct {
	Key         string
	Body        []byte
	IfNoneMatch bool   // If-None-Match: * — create only
	IfMatch     string // If-Match: ETag — replace only that version ("" = unconditional)
}

// GetObjectInput is a GetObject request.
type GetObjectInput struct {
	Key   string
	Range *ByteRange // nil: the whole object
	Limit int64      // the most bytes the caller will accept; > 0
}

// ByteRange is [Start, Start+Length).
type ByteRange struct {
	Start, Length int64
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key                string
	Size               int64
	ETag               string
	LastModifiedUnixMs int64
}

// ListPage is one page of ListObjects.
type ListPage struct {
	Objects   []ObjectInfo
	NextToken string
}

// CompletedPart names an uploaded part for CompleteMultipartUpload.
type CompletedPart struct {
	Number int32
	ETag   string
}

// Upload is a multipart upload in progress.
type Upload struct {
	Key             string
	UploadID        string
	InitiatedUnixMs int64
}

// UploadsPage is one page of ListMultipartUploads.
type UploadsPage struct {
	Uploads                           []Upload
	NextKeyMarker, NextUploadIDMarker string
	Truncated                         bool
}

// The Disk port is package wal's (the log is its user); these are its
// names here.
type (
	Disk     = wal.Disk
	File     = wal.File
	OpenMode = wal.OpenMode
)

// DirectAlign is the alignment O_DIRECT I/O requires.
const DirectAlign = wal.DirectAlign
