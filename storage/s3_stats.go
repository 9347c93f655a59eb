package storage

import (
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/skipprd/skipprd/engine"
)

// S3Op is one kind of request S3Store sends.
type S3Op uint8

const (
	S3Put S3Op = iota
	S3Get
	S3Head
	S3List
	S3Delete
	S3CreateUpload
	S3UploadPart
	S3CompleteUpload
	S3AbortUpload
	S3ListUploads
	s3OpCount
)

var s3OpNames = [s3OpCount]string{
	S3Put: "put", S3Get: "get", S3Head: "head", S3List: "list", S3Delete: "delete",
	S3CreateUpload: "create-mpu", S3UploadPart: "upload-part", S3CompleteUpload: "complete",
	S3AbortUpload: "abort", S3ListUploads: "list-uploads",
}

func (o S3Op) String() string {
	if o >= s3OpCount {
		return fmt.Sprintf("s3-op-%d", uint8(o))
	}
	return s3OpNames[o]
}

// S3Outcome is how a request ended, as the engine sees it (the sentinel
// its error carries; s3_errors.go).
type S3Outcome uint8

const (
	S3OK           S3Outcome = iota
	S3NotFound               // engine.ErrNotFound or engine.ErrNoSuchUpload
	S3Precondition           // engine.ErrPreconditionFailed
	S3Throttled              // engine.ErrThrottled
	S3Ambiguous              // engine.ErrAmbiguous: may or may not have taken effect
	S3Error                  // any other failure: definite, not sent, or closed
	s3OutcomeCount
)

var s3OutcomeNames = [s3OutcomeCount]string{
	S3OK: "ok", S3NotFound: "not-found", S3Precondition: "precondition",
	S3Throttled: "throttled", S3Ambiguous: "ambiguous", S3Error: "error",
}

func (o S3Outcome) String() string {
	if o >= s3OutcomeCount {
		return fmt.Sprintf("s3-outcome-%d", uint8(o))
	}
	return s3OutcomeNames[o]
}

// S3Ops and S3Outcomes list every value, in order.
func S3Ops() []S3Op {
	ops := make([]S3Op, s3OpCount)
	for i := range ops {
		ops[i] = S3Op(i)
	}
	return ops
}

func S3Outcomes() []S3Outcome {
	outs := make([]S3Outcome, s3OutcomeCount)
	for i := range outs {
		outs[i] = S3Outcome(i)
	}
	return outs
}

// s3OutcomeOf classifies a request's final error.
func s3OutcomeOf(err error) S3Outcome {
	switch {
	case err == nil:
		return S3OK
	case errors.Is(err, engine.ErrNotFound), errors.Is(err, engine.ErrNoSuchUpload):
		return S3NotFound
	case errors.Is(err, engine.ErrPreconditionFailed):
		return S3Precondition
	case errors.Is(err, engine.ErrThrottled):
		return S3Throttled
	case errors.Is(err, engine.ErrAmbiguous):
		return S3Ambiguous
	}
	return S3Error
}

// s3Counters count requests by operation and outcome; written by request
// goroutines, read by any goroutine.
type s3Counters [s3OpCount][s3OutcomeCount]atomic.Uint64

// S3Stats is a snapshot of S3Store's request counts. Each count is read
// atomically, the snapshot as a whole is not: a request completing
// meanwhile may be in it or not.
type S3Stats struct {
	Requests [s3OpCount][s3OutcomeCount]uint64
}

// Count returns the requests of op that ended with outcome.
func (s S3Stats) Count(op S3Op, outcome S3Outcome) uint64 { return s.Requests[op][outcome] }

// Stats returns the requests sent so far by operation and outcome; safe
// from any goroutine.
func (s *S3Store) Stats() S3Stats {
	var st S3Stats
	for op := range s.counts {
		for out := range s.counts[op] {
			st.Requests[op][out] = s.counts[op][out].Load()
		}
	}
	return st
}
