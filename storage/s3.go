package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/recordpath"
)

// Defaults for S3Options.
const (
	s3ConcurrencyDefault    = 16
	s3RequestTimeoutDefault = 30 * time.Second
	s3ListPageSizeDefault   = 1000 // S3's own maximum for both listings
)

// errStoreClosed: a request issued after S3Store.Close. It is definite —
// the request was never sent.
var errStoreClosed = errors.New("storage: s3 store closed")

// S3Options tune S3Store. Zero values take the defaults.
type S3Options struct {
	// Concurrency bounds the requests in flight (default 16). Requests
	// beyond it wait for a slot; the wait does not count against
	// RequestTimeout.
	Concurrency int
	// RequestTimeout bounds one request from send to the last body byte
	// (default 30s). A request that runs out of time fails with
	// ErrAmbiguous: it may still take effect, but only within this window
	// plus the store's own processing — the bound the ObjectStore contract
	// speaks of.
	RequestTimeout time.Duration
	// ListPageSize is MaxKeys for ListObjects and MaxUploads for
	// ListMultipartUploads (default 1000). Tests shrink it to exercise
	// pagination.
	ListPageSize int32
}

func (o S3Options) withDefaults() S3Options {
	if o.Concurrency <= 0 {
		o.Concurrency = s3ConcurrencyDefault
	}
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = s3RequestTimeoutDefault
	}
	if o.ListPageSize <= 0 {
		o.ListPageSize = s3ListPageSizeDefault
	}
	return o
}

// S3Store is engine.ObjectStore over aws-sdk-go-v2 for one bucket. Each
// request runs on its own goroutine, at most Concurrency at a time, with a
// per-request timeout, and its completion is posted to the loop.
//
// The SDK's retries are turned off for every request: the engine owns
// retry policy (backoff with jitter, an attempt budget per step, settling
// in-doubt commits with a HEAD), and SDK retries underneath would multiply
// attempts, hold a concurrency slot through their backoff, hide throttling
// from the engine, and let a client-wide retry quota turn into errors of
// its own.
type S3Store struct {
	loop   *Loop
	client *s3.Client
	bucket string
	opts   S3Options

	slots  chan struct{} // a counting semaphore of opts.Concurrency
	counts s3Counters    // requests by operation and outcome (Stats)
	ctx    context.Context
	cancel context.CancelFunc
}

var _ engine.ObjectStore = (*S3Store)(nil)

// NewS3Store returns a store for bucket through client, completing on l.
func NewS3Store(l *Loop, client *s3.Client, bucket string, opts S3Options) *S3Store {
	if l == nil || client == nil || bucket == "" {
		panic(fmt.Sprintf("storage: NewS3Store(loop=%v, client=%v, bucket=%q)", l != nil, client != nil, bucket))
	}
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &S3Store{
		loop: l, client: client, bucket: bucket, opts: opts,
		slots: make(chan struct{}, opts.Concurrency),
		ctx:   ctx, cancel: cancel,
	}
}

// Close cancels requests in flight (they complete with ErrAmbiguous, if
// the loop still runs) and makes later requests fail without being sent.
func (s *S3Store) Close() { s.cancel() }

// CheckBucket verifies, blocking, that the bucket exists and is reachable.
// Call it at start-up: a HEAD against a missing bucket is a bodiless 404,
// indistinguishable from a missing key, so without this check a wrong
// bucket name would read as "no commit markers".
func (s *S3Store) CheckBucket(ctx context.Context) error {
	_, err := s.client.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &s.bucket}, noRetries)
	if err != nil {
		return fmt.Errorf("storage: s3 bucket %q: %w", s.bucket, err)
	}
	return nil
}

// noRetries is the per-request SDK option that makes each engine request
// exactly one HTTP attempt (see S3Store).
func noRetries(o *s3.Options) { o.Retryer = aws.NopRetryer{} }

// do runs call (a request of op) on a worker goroutine, counts its
// outcome and posts complete(err) to the loop. call's results travel
// through its closure; the Post orders its writes before complete reads
// them.
func (s *S3Store) do(op S3Op, call func(ctx context.Context) error, complete func(err error)) {
	recordpath.Spine()
	go func() {
		err := s.attempt(call)
		s.counts[op][s3OutcomeOf(err)].Add(1)
		s.loop.Post(func() { recordpath.Spine(); complete(err) })
	}()
}

// attempt waits for a concurrency slot, then runs call under the request
// timeout.
func (s *S3Store) attempt(call func(ctx context.Context) error) error {
	select {
	case s.slots <- struct{}{}:
	case <-s.ctx.Done():
		return errStoreClosed
	}
	defer func() { <-s.slots }()
	if s.ctx.Err() != nil {
		// select picks at random when a slot is free and the store is
		// closed; a closed store must never send.
		return errStoreClosed
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.RequestTimeout)
	defer cancel()
	return call(ctx)
}

// unixMs converts an SDK timestamp; a missing one is 0.
func unixMs(t *time.Time) int64 {
	if t == nil {
		return 0
	}
	return t.UnixMilli()
}

// optional returns nil for "" so that empty markers are not sent at all.
func optional(v string) *string {
	if v == "" {
		return nil
	}
	return &v
}
