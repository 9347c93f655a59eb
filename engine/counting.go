package engine

// countingStore counts every request the engine issues (retries included)
// so that recovery's cost can be stated and checked.
type countingStore struct {
	ObjectStore
	n *uint64
}

func (c countingStore) PutObject(in PutObjectInput, done func(string, error)) {
	*c.n++
	c.ObjectStore.PutObject(in, done)
}

func (c countingStore) GetObject(in GetObjectInput, done func([]byte, ObjectInfo, error)) {
	*c.n++
	c.ObjectStore.GetObject(in, done)
}

func (c countingStore) HeadObject(key string, done func(ObjectInfo, error)) {
	*c.n++
	c.ObjectStore.HeadObject(key, done)
}

func (c countingStore) ListObjects(prefix, token string, done func(ListPage, error)) {
	*c.n++
	c.ObjectStore.ListObjects(prefix, token, done)
}

func (c countingStore) DeleteObject(key string, done func(error)) {
	*c.n++
	c.ObjectStore.DeleteObject(key, done)
}

func (c countingStore) CreateMultipartUpload(key string, done func(string, error)) {
	*c.n++
	c.ObjectStore.CreateMultipartUpload(key, done)
}

func (c countingStore) UploadPart(key, id string, n int32, body []byte, done func(string, error)) {
	*c.n++
	c.ObjectStore.UploadPart(key, id, n, body, done)
}

func (c countingStore) CompleteMultipartUpload(key, id string, parts []CompletedPart, done func(error)) {
	*c.n++
	c.ObjectStore.CompleteMultipartUpload(key, id, parts, done)
}

func (c countingStore) AbortMultipartUpload(key, id string, done func(error)) {
	*c.n++
	c.ObjectStore.AbortMultipartUpload(key, id, done)
}

func (c countingStore) ListMultipartUploads(prefix, km, um string, done func(UploadsPage, error)) {
	*c.n++
	c.ObjectStore.ListMultipartUploads(prefix, km, um, done)
}
