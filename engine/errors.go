package engine

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine/wal"
)

// Port errors. Ports wrap these so the engine can branch on errors.Is.
var (
	// ErrAmbiguous: the request may or may not have taken effect.
	ErrAmbiguous = errors.New("outcome unknown")
	// ErrNotFound: no such key (or file). The Disk port's (package wal).
	ErrNotFound = wal.ErrNotFound
	// ErrPreconditionFailed: an If-None-Match / If-Match condition failed;
	// the write did not happen.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrThrottled: the store asked us to slow down (503 SlowDown); the
	// request did not take effect.
	ErrThrottled = errors.New("throttled")
	// ErrNoSuchUpload: the multipart upload is unknown, completed or aborted.
	ErrNoSuchUpload = errors.New("no such upload")
	// ErrTooLarge: an object is larger than the caller's limit.
	ErrTooLarge = errors.New("object exceeds read limit")
	// ErrExists: Disk.Open with Create found the path already present.
	ErrExists = wal.ErrExists
	// ErrRefused: the store refused the request for a reason no retry
	// changes until an operator acts — access denied (401, 403), a
	// missing bucket. It did not take effect. The engine keeps retrying
	// it where it holds data (nothing is lost, nothing acked), but
	// recovery, which holds nothing yet, gives up on it at once.
	ErrRefused = errors.New("refused by the store")
)

// Engine errors returned to callers.
var (
	// ErrResourceExhausted: ingest admission is full; retry later
	// (backpressure, never data loss).
	ErrResourceExhausted = errors.New("engine: resource exhausted")
	// ErrOffsetsViewFull is the ErrResourceExhausted of a unit that
	// would grow the source offsets past what _offsets holds
	// (Config.OffsetsViewMax): it waits for keys to be retired, which
	// only floors do (segment.FloorKey).
	ErrOffsetsViewFull = fmt.Errorf("%w: offsets view full", ErrResourceExhausted)
	// ErrClosed: the engine is shutting down or has failed closed.
	ErrClosed = errors.New("engine: closed")
	// ErrNotReady: recovery has not finished.
	ErrNotReady = errors.New("engine: recovery not finished")
	// ErrCorrupt: the WAL holds something that fails its checksums or
	// invariants; the engine halts rather than skip it.
	ErrCorrupt = errors.New("engine: corrupt WAL")
	// ErrCannotApply: a sink's answer that a job can never be applied as
	// it is (a type the destination cannot hold, a reserved column name).
	// The engine refuses the job: it alerts, keeps the segment and stops
	// that (sink, namespace) lane, instead of retrying forever.
	ErrCannotApply = errors.New("sink cannot apply this job")
	// ErrIDCollision: a sink found a job's compaction id already applied,
	// but with other content (Job.Content differs, or for a destination
	// written before contents were recorded, its rows or schema do): a
	// job of another log under the same id. Sinks return it together with
	// ErrCannotApply, so the job is refused and alerted
	// (AlertIDCollision), never called applied.
	ErrIDCollision = errors.New("another job's content under this compaction id")
	// ErrFenced: a newer writer has claimed the pipeline; this engine
	// stops without acking anything more.
	ErrFenced = errors.New("engine: fenced by a newer writer")
	// ErrInvariant: a broken invariant of the engine itself — a bug; the
	// engine stops rather than act on a state it cannot trust. It fails
	// closed (nothing more is acked or deleted) with a message naming the
	// invariant and the values involved; a restart recovers from the
	// store, which never depended on the state that broke (assert.go).
	ErrInvariant = errors.New("engine: invariant broken")
	// ErrRecoveryGaveUp: recovery could not make progress — the store
	// refused it for good (ErrRefused), or it kept failing for
	// Config.RecoveryGiveUp — and the engine stopped, naming the last
	// failure. Nothing was acked; a restart tries again.
	ErrRecoveryGaveUp = errors.New("engine: recovery gave up")
)
