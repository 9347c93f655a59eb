package sinks

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine"
)

// ParquetObjects applies each job as one Parquet object at
// ObjectKey(prefix, job), created with If-None-Match: *.
//
// Why that is exactly once: the key is a pure function of the job (its ID
// and its segment's date), the object appears atomically or not at all,
// and a create-only PUT that finds the key taken (412) means an earlier
// attempt landed — the job is applied, and Apply reports success. An
// ambiguous PUT (timeout, lost response) is reported as an error; the
// engine's retry then either creates the object or gets the 412.
//
// One PUT per job: a job holds at most one segment's rows, and a segment
// body is at most segment.BodyBytesMax (1 GiB), well under S3's 5 GiB
// single-PUT limit, so no multipart upload (whose completion gofakes3 does
// not condition) is needed.
type ParquetObjects struct {
	store  engine.ObjectStore
	exec   engine.Executor
	prefix string
}

var _ engine.Sink = (*ParquetObjects)(nil)

// NewParquetObjects returns a sink writing under prefix ("" for the bucket
// root) of store; encoding runs in exec.
func NewParquetObjects(store engine.ObjectStore, exec engine.Executor, prefix string) *ParquetObjects {
	if store == nil || exec == nil {
		panic("sinks: NewParquetObjects with a nil store or executor")
	}
	return &ParquetObjects{store: store, exec: exec, prefix: prefix}
}

// Apply implements engine.Sink: encode in the executor, then one
// create-only PUT. Errors name the job, its namespace and the key.
func (p *ParquetObjects) Apply(job *engine.Job, done func(err error)) {
	if job == nil || done == nil {
		panic("sinks: ParquetObjects Apply with a nil job or callback")
	}
	key := ObjectKey(p.prefix, job)
	fail := func(err error) {
		done(fmt.Errorf("sinks: apply job %s (namespace %q) to object %s: %w", job.ID, job.Namespace, key, err))
	}
	var body []byte
	var encErr error
	p.exec.Go(func() { body, encErr = encodeJob(job) }, func() {
		if encErr != nil {
			fail(encErr)
			return
		}
		in := engine.PutObjectInput{Key: key, Body: body, IfNoneMatch: true}
		p.store.PutObject(in, func(_ string, err error) {
			switch {
			case err == nil, errors.Is(err, engine.ErrPreconditionFailed):
				done(nil) // created now, or by an earlier attempt
			default:
				fail(err)
			}
		})
	})
}
