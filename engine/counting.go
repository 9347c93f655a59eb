package engine

// countingStore counts every request the engine issues (retries included)
// so that recovery's cost can be stated and checked, and records each
// answer as a trouble of its request kind (trouble.go): a failure starts
// or continues one, a success — or an answer that says something definite,
// such as not found (isAnswer) — clears it. A quiet one only counts: its
// requests are best-effort clean-ups (a failed persist's body, a merged
// run) whose failure leaves an orphan for the sweeper, not an operation
// being retried; as troubles they would never clear.
type countingStore struct {
	ObjectStore
	e     *Engine
	quiet bool
}

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

func (c countingStore) PutObject(in PutObjectInput, done func(string, error)) {
	c.e.stats.Requests++
	c.ObjectStore.PutObject(in, func(etag string, err error) { c.seen("put", err); done(etag, err) })
}

func (c countingStore) GetObject(in GetObjectInput, done func([]byte, ObjectInfo, error)) {
	c.e.stats.Requests++
	c.ObjectStore.GetObject(in, func(b []byte, info ObjectInfo, err error) { c.seen("get", err); done(b, info, err) })
}

func (c countingStore) HeadObject(key string, done func(ObjectInfo, error)) {
	c.e.stats.Requests++
	c.ObjectStore.HeadObject(key, func(info ObjectInfo, err error) { c.seen("head", err); done(info, err) })
}

func (c countingStore) ListObjects(prefix, token string, done func(ListPage, error)) {
	c.e.stats.Requests++
	c.ObjectStore.ListObjects(prefix, token, func(p ListPage, err error) { c.seen("list", err); done(p, err) })
}

func (c countingStore) DeleteObject(key string, done func(error)) {
	c.e.stats.Requests++
	c.ObjectStore.DeleteObject(key, func(err error) { c.seen("delete", err); done(err) })
}

func (c countingStore) CreateMultipartUpload(key string, done func(string, error)) {
	c.e.stats.Requests++
	c.ObjectStore.CreateMultipartUpload(key, func(id string, err error) { c.seen("create-mpu", err); done(id, err) })
}

func (c countingStore) UploadPart(key, id string, n int32, body []byte, done func(string, error)) {
	c.e.stats.Requests++
	c.ObjectStore.UploadPart(key, id, n, body, func(etag string, err error) { c.seen("upload-part", err); done(etag, err) })
}

func (c countingStore) CompleteMultipartUpload(key, id string, parts []CompletedPart, done func(error)) {
	c.e.stats.Requests++
	c.ObjectStore.CompleteMultipartUpload(key, id, parts, func(err error) { c.seen("complete", err); done(err) })
}

func (c countingStore) AbortMultipartUpload(key, id string, done func(error)) {
	c.e.stats.Requests++
	c.ObjectStore.AbortMultipartUpload(key, id, func(err error) { c.seen("abort", err); done(err) })
}

func (c countingStore) ListMultipartUploads(prefix, km, um string, done func(UploadsPage, error)) {
	c.e.stats.Requests++
	c.ObjectStore.ListMultipartUploads(prefix, km, um, func(p UploadsPage, err error) { c.seen("list-uploads", err); done(p, err) })
}
