package engine

import "github.com/skipprd/skipprd/engine/segment"

// Hooks for the key-store world (keystore_day_test.go): it drives the
// key store alone at production rates, without segments to carry the
// keys.

// CommitKeys records idempotency keys as committed at wall ms val, as a
// segment's commit does, and calls done once the key store holds them
// durably, as a reclaim waits for them.
func (e *Engine) CommitKeys(keys []string, val uint64, done func()) {
	want := make(segment.Offsets, 0, len(keys))
	for _, k := range keys {
		want = append(want, segment.Offset{Key: idemPrefix + k, Value: val})
	}
	e.mergeCommitted(want)
	e.ensureCheckpoint(want, done)
}

// LookupKey reports whether the engine remembers key, looking it up in
// the runs as a submission would.
func (e *Engine) LookupKey(key string, done func(found bool, err error)) {
	h := segment.KeyHashOf(key)
	if e.keys.held(h) {
		done(true, nil)
		return
	}
	e.searchBlocks(h, e.keys.candidates(h), 0, done)
}
