package sim

import "github.com/skipprd/skipprd/engine"

// recordingStore watches an incarnation's requests during recovery.
type recordingStore struct {
	engine.ObjectStore
	w   *World
	inc *Incarnation
}

func (r recordingStore) note(key string, bodyRead bool) {
	if r.w.inc == r.inc && r.w.recovering {
		r.w.rec.ops++
		if bodyRead {
			r.w.rec.bodyReads++
		}
	}
}

func (r recordingStore) isBody(key string) bool {
	_, _, kind, ok := r.w.layout.ParseKey(key)
	return ok && kind == engine.KindBody
}

func (r recordingStore) PutObject(in engine.PutObjectInput, done func(string, error)) {
	r.note(in.Key, false)
	_, _, kind, ok := r.w.layout.ParseKey(in.Key)
	switch {
	case ok && kind == engine.KindBitmap:
		r.w.maybeCrashAtPoint() // during the bitmap write
	case ok && kind == engine.KindMarker && r.w.engCfg.Disk != nil:
		r.ObjectStore.PutObject(in, func(etag string, err error) {
			if err == nil && r.inc == r.w.inc {
				r.w.maybePowerLossAfterCommit()
			}
			done(etag, err)
		})
		return
	}
	r.ObjectStore.PutObject(in, done)
}

func (r recordingStore) GetObject(in engine.GetObjectInput, done func([]byte, engine.ObjectInfo, error)) {
	r.note(in.Key, r.isBody(in.Key))
	r.ObjectStore.GetObject(in, done)
}

func (r recordingStore) HeadObject(key string, done func(engine.ObjectInfo, error)) {
	r.note(key, false)
	r.ObjectStore.HeadObject(key, done)
}

func (r recordingStore) ListObjects(prefix, token string, done func(engine.ListPage, error)) {
	r.note(prefix, false)
	r.ObjectStore.ListObjects(prefix, token, done)
}

func (r recordingStore) DeleteObject(key string, done func(error)) {
	r.note(key, false)
	r.ObjectStore.DeleteObject(key, func(err error) {
		if err == nil {
			r.w.maybeCrashAtPoint() // between the deletes of a reclaim
		}
		done(err)
	})
}

func (r recordingStore) CreateMultipartUpload(key string, done func(string, error)) {
	r.note(key, false)
	r.ObjectStore.CreateMultipartUpload(key, done)
}

func (r recordingStore) UploadPart(key, id string, n int32, body []byte, done func(string, error)) {
	r.note(key, false)
	r.ObjectStore.UploadPart(key, id, n, body, func(etag string, err error) {
		if err == nil {
			r.w.maybeCrashAtPoint() // in the middle of a multipart upload
		}
		done(etag, err)
	})
}

func (r recordingStore) CompleteMultipartUpload(key, id string, parts []engine.CompletedPart, done func(error)) {
	r.note(key, false)
	r.ObjectStore.CompleteMultipartUpload(key, id, parts, done)
}

func (r recordingStore) AbortMultipartUpload(key, id string, done func(error)) {
	r.note(key, false)
	r.ObjectStore.AbortMultipartUpload(key, id, done)
}

func (r recordingStore) ListMultipartUploads(prefix, km, um string, done func(engine.UploadsPage, error)) {
	r.note(prefix, false)
	r.ObjectStore.ListMultipartUploads(prefix, km, um, done)
}
