package engine

import "strings"

// countingStore counts every request the engine issues (retries included)
// so that recovery's cost can be stated and checked, and records each
// answer as a trouble of its request kind (trouble.go): a failure starts
// or continues one, a success — or an answer that says something definite,
// such as not found (isAnswer) — clears it. A quiet one only counts: its
// requests are best-effort clean-ups (a failed persist's body, a merged
// run) whose failure leaves an orphan for the sweeper, not an operation
// being retried; as troubles they would never clear.
//
// It also checks each request before it goes out (checkKey, the bounds
// of a GET, an uploaded part, a completion and an abort, a PUT's
// conditions, the objects never deleted, a multipart upload's object):
// a request that breaks one is not issued — the engine fails closed, and
// the request is answered with its error later on the loop, as a port
// would answer it.
type countingStore struct {
	ObjectStore
	e     *Engine
	quiet bool
}

// writerName and checkpointName are the writer object's and _offsets'
// names under the root (Layout.WriterKey, Layout.CheckpointKey), which a
// request's key is compared with without building them.
const (
	writerName     = "_writer"
	checkpointName = "_offsets"
)

// s3PartsMax is the most parts a multipart upload may have (S3's limit;
// part numbers are 1..s3PartsMax).
const s3PartsMax = 10000

// bestEffort is the store for requests whose failure nobody retries.
func (e *Engine) bestEffort() ObjectStore {
	c := e.p.Store.(countingStore)
	c.quiet = true
	return c
}

// seen records one answer of method.
func (c countingStore) seen(method string, err error) {
	if c.quiet {
		return
	}
	if err == nil || isAnswer(err) {
		c.e.succeeded(troubleStore(method))
		return
	}
	c.e.failing(troubleStore(method), err)
}

// checkKey: every key the engine reads, writes or deletes, and every
// prefix it lists, is under its pipeline's root (Layout.Root): a key
// outside it is another pipeline's object, or anyone's — for a delete,
// data the engine does not own. O(len(root)), no allocation.
func (c countingStore) checkKey(method, key string) bool {
	if root := c.e.layout.Root(); !strings.HasPrefix(key, root) {
		c.e.broken("a store request names a key under the pipeline's root: %s %q, root %q", method, key, root)
		return false
	}
	return true
}

// refused answers a request that a failed check kept from being issued,
// or a DELETE asked of an engine that had failed before: later, on the
// loop, as the port would have (never inside the call), with the error
// the engine failed closed on.
//
// REQUIRES: the engine failed: answered with no error,
// a refused PUT or DELETE would read as done.
func (c countingStore) refused(answer func(error)) {
	e := c.e
	if e.err == nil {
		e.broken("a store request is refused only by a failed check: state %d", e.state)
	}
	e.p.Timers.AfterFunc(0, func() { answer(e.err) })
}

// PutObject: a conditional PUT asks for one version or for absence, not
// both (no object matches both: the write could never land). The writer
// object and _offsets are only ever written conditionally: an
// unconditional write could overwrite a newer writer's claim, or the
// offsets another writer added (fencing, docs/DESIGN.md §11).
func (c countingStore) PutObject(in PutObjectInput, done func(string, error)) {
	if !c.checkKey("put", in.Key) {
		c.refused(func(err error) { done("", err) })
		return
	}
	if in.IfMatch != "" && in.IfNoneMatch {
		c.e.broken("a conditional PUT asks for a version or for absence, not both: %s, If-Match %q with If-None-Match", in.Key, in.IfMatch)
		c.refused(func(err error) { done("", err) })
		return
	}
	if rest := in.Key[len(c.e.layout.Root()):]; (rest == writerName || rest == checkpointName) && in.IfMatch == "" && !in.IfNoneMatch {
		c.e.broken("the writer object and _offsets are written only conditionally: %s put with no If-Match and no If-None-Match", in.Key)
		c.refused(func(err error) { done("", err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.PutObject(in, func(etag string, err error) { c.seen("put", err); done(etag, err) })
}

// GetObject: a read is bounded (GetObjectInput.Limit > 0) and a range
// one the limit admits — a read past its limit fails every time
// (ErrTooLarge), retried until it counts as an outage. Its answer is
// within the limit too (the port's contract): a longer one is not used.
func (c countingStore) GetObject(in GetObjectInput, done func([]byte, ObjectInfo, error)) {
	if !c.checkKey("get", in.Key) {
		c.refused(func(err error) { done(nil, ObjectInfo{}, err) })
		return
	}
	if r := in.Range; in.Limit <= 0 || r != nil && (r.Start < 0 || r.Length <= 0 || r.Length > in.Limit) {
		start, length := int64(-1), int64(-1)
		if r != nil {
			start, length = r.Start, r.Length
		}
		c.e.broken("a GET is bounded, its range within its limit: %s, limit %d, range from %d length %d (-1: none)", in.Key, in.Limit, start, length)
		c.refused(func(err error) { done(nil, ObjectInfo{}, err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.GetObject(in, func(b []byte, info ObjectInfo, err error) {
		if err == nil && int64(len(b)) > in.Limit {
			c.e.broken("a GET's answer is within its limit: %s, %d bytes, limit %d", in.Key, len(b), in.Limit)
			b, info, err = nil, ObjectInfo{}, c.e.err
		}
		c.seen("get", err)
		done(b, info, err)
	})
}

func (c countingStore) HeadObject(key string, done func(ObjectInfo, error)) {
	if !c.checkKey("head", key) {
		c.refused(func(err error) { done(ObjectInfo{}, err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.HeadObject(key, func(info ObjectInfo, err error) { c.seen("head", err); done(info, err) })
}

func (c countingStore) ListObjects(prefix, token string, done func(ListPage, error)) {
	if !c.checkKey("list", prefix) {
		c.refused(func(err error) { done(ListPage{}, err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.ListObjects(prefix, token, func(p ListPage, err error) { c.seen("list", err); done(p, err) })
}

// DeleteObject: never the writer object nor _offsets. Fencing rests on
// the one, and every source offset of a reclaimed segment on the other.
func (c countingStore) DeleteObject(key string, done func(error)) {
	if !c.checkKey("delete", key) {
		c.refused(done)
		return
	}
	if c.e.state == stateFailed {
		// Nothing is deleted once the engine failed closed (assert.go): a
		// reclaim's retry or the sweeper's next object, scheduled before
		// the failure, is answered with its error instead.
		c.refused(done)
		return
	}
	if rest := key[len(c.e.layout.Root()):]; rest == writerName || rest == checkpointName {
		c.e.broken("the writer object and _offsets are never deleted: delete %s", key)
		c.refused(done)
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.DeleteObject(key, func(err error) { c.seen("delete", err); done(err) })
}

// CreateMultipartUpload: an upload of a segment body — the only uploads
// the sweeper aborts (sweepUploads): one of another object, left behind
// by a crash, would hold its parts for good.
func (c countingStore) CreateMultipartUpload(key string, done func(string, error)) {
	if !c.checkKey("create-mpu", key) {
		c.refused(func(err error) { done("", err) })
		return
	}
	kind := ObjectKind(0) // the kind its suffix names, as ParseKey reads it (without its allocation)
	for _, k := range kindSuffixes {
		if strings.HasSuffix(key, k.suffix) {
			kind = k.kind
			break
		}
	}
	if kind != KindBody {
		c.e.broken("a multipart upload is of a segment body: %s, of kind %d", key, kind)
		c.refused(func(err error) { done("", err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.CreateMultipartUpload(key, func(id string, err error) { c.seen("create-mpu", err); done(id, err) })
}

// UploadPart: a part of an upload that was created (its id), numbered
// 1..s3PartsMax, not empty.
func (c countingStore) UploadPart(key, id string, n int32, body []byte, done func(string, error)) {
	if !c.checkKey("upload-part", key) {
		c.refused(func(err error) { done("", err) })
		return
	}
	if id == "" || n < 1 || n > s3PartsMax || len(body) == 0 {
		c.e.broken("an uploaded part is a created upload's, numbered 1..%d, not empty: %s, upload id %q, part %d, %d bytes", s3PartsMax, key, id, n, len(body))
		c.refused(func(err error) { done("", err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.UploadPart(key, id, n, body, func(etag string, err error) { c.seen("upload-part", err); done(etag, err) })
}

// CompleteMultipartUpload: an upload that was created (its id), with at
// least one part (the parts' numbering is checkPartsLanded's).
func (c countingStore) CompleteMultipartUpload(key, id string, parts []CompletedPart, done func(error)) {
	if !c.checkKey("complete", key) {
		c.refused(done)
		return
	}
	if id == "" || len(parts) == 0 || len(parts) > s3PartsMax {
		c.e.broken("a multipart upload completes a created upload with 1..%d parts: %s, upload id %q, %d parts", s3PartsMax, key, id, len(parts))
		c.refused(done)
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.CompleteMultipartUpload(key, id, parts, func(err error) { c.seen("complete", err); done(err) })
}

// AbortMultipartUpload: an upload that was created (its id).
func (c countingStore) AbortMultipartUpload(key, id string, done func(error)) {
	if !c.checkKey("abort", key) {
		c.refused(done)
		return
	}
	if id == "" {
		c.e.broken("an aborted upload is one that was created, with its id: %s, upload id empty", key)
		c.refused(done)
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.AbortMultipartUpload(key, id, func(err error) { c.seen("abort", err); done(err) })
}

func (c countingStore) ListMultipartUploads(prefix, km, um string, done func(UploadsPage, error)) {
	if !c.checkKey("list-uploads", prefix) {
		c.refused(func(err error) { done(UploadsPage{}, err) })
		return
	}
	c.e.stats.Requests++
	c.ObjectStore.ListMultipartUploads(prefix, km, um, func(p UploadsPage, err error) { c.seen("list-uploads", err); done(p, err) })
}
