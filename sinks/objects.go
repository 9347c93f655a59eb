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
// attempt landed — if the object there is this job's. The key alone
// cannot say so (another log's job under the same id would take the same
// key), so on a 412 the sink reads the object's footer (existing.go): a
// HEAD for its size, a ranged GET of its last 64 KiB, and a second
// ranged GET only for a longer footer; then compares, on the Executor,
// the skipprd.content it records with Job.Content. The job's own content
// ⇒ applied, success; another ⇒ ErrCannotApply wrapping ErrIDCollision
// (the object is left alone). An ambiguous PUT (timeout, lost response)
// is reported as an error; the engine's retry then either creates the
// object or gets the 412.
//
// One PUT per job: a job holds at most one segment's rows, and a segment
// body is at most segment.BodyBytesMax (1 GiB), well under S3's 5 GiB
// single-PUT limit, so no multipart upload (whose completion gofakes3 does
// not condition) is needed.
type ParquetObjects struct {
	store  engine.ObjectStore
	exec   engine.Executor
	prefix string
	stats  parquetStats
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

// Stats returns the sink's counts of replays, trusted legacy objects and
// collisions.
func (p *ParquetObjects) Stats() ParquetStats { return p.stats.get() }

// Apply implements engine.Sink: encode in the executor, then one
// create-only PUT; on a 412, the existing object's footer decides.
// Errors name the job, its namespace and the key.
func (p *ParquetObjects) Apply(job *engine.Job, done func(err error)) {
	if job == nil || done == nil {
		panic("sinks: ParquetObjects Apply with a nil job or callback")
	}
	key := ObjectKey(p.prefix, job)
	p.WriteObject(job, key, func() ([]byte, error) { return encodeJob(job) }, func(_ int64, err error) { done(err) })
}

// WriteObject puts one object of job at key (the whole key: the prefix
// is not added) exactly once, as Apply does: encode on the Executor, a
// create-only PUT, and on a 412 the existing object's footer decides.
// done gets the object's size. The Iceberg sink writes its data files
// through it.
func (p *ParquetObjects) WriteObject(job *engine.Job, key string, encode func() ([]byte, error), done func(size int64, err error)) {
	if job == nil || encode == nil || done == nil {
		panic("sinks: ParquetObjects WriteObject with a nil job, encoder or callback")
	}
	fail := func(err error) {
		done(0, fmt.Errorf("sinks: apply job %s (namespace %q) to object %s: %w", job.ID, job.Namespace, key, err))
	}
	var body []byte
	var encErr error
	p.exec.Go(func() { body, encErr = encode() }, func() {
		if encErr != nil {
			fail(encErr)
			return
		}
		in := engine.PutObjectInput{Key: key, Body: body, IfNoneMatch: true}
		p.store.PutObject(in, func(_ string, err error) {
			switch {
			case err == nil:
				done(int64(len(in.Body)), nil)
			case errors.Is(err, engine.ErrPreconditionFailed):
				body = nil
				p.checkExisting(job, key, done, fail)
			default:
				fail(err)
			}
		})
	})
}

// checkExisting answers for a job whose key is taken: done(size, nil) if
// the object there is the job's, fail otherwise.
func (p *ParquetObjects) checkExisting(job *engine.Job, key string, done func(int64, error), fail func(error)) {
	p.store.HeadObject(key, func(info engine.ObjectInfo, err error) {
		if err != nil {
			// Not found: deleted since the 412; the retry creates it.
			fail(fmt.Errorf("the key is taken (412), and reading its size: %w", err))
			return
		}
		size := info.Size
		read := func(off, n int64, done func([]byte, error)) {
			in := engine.GetObjectInput{Key: key, Range: &engine.ByteRange{Start: off, Length: n}, Limit: n}
			p.store.GetObject(in, func(b []byte, got engine.ObjectInfo, err error) {
				switch {
				case err != nil:
					done(nil, err)
				case int64(len(b)) != n || got.Size != size:
					done(nil, fmt.Errorf("asked %d bytes at %d of an object of %d bytes, got %d of one of %d: it changed, or the answer was cut short",
						n, off, size, len(b), got.Size))
				default:
					done(b, nil)
				}
			})
		}
		checkExisting(p.exec, "parquet-objects", "the existing object", job, size, read, func(legacy bool, err error) {
			p.stats.count(legacy, err)
			if err != nil {
				fail(err)
				return
			}
			done(size, nil)
		})
	})
}
