package sim

import (
	"strings"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// checkReclaimDurable runs when a counting marker is deleted (its segment
// reclaimed): everything its offsets cover must be durable elsewhere in
// the store's truth — each source offset in _offsets at or above its
// value, each idempotency key not yet expired in a run that its bucket's
// manifest lists. A reclaim that ran ahead of the checkpoint loses them
// only if a crash comes before the checkpoint lands, which a world may
// never draw; this catches it at the delete.
func (o *Oracle) checkReclaimDurable(m *markerInfo) {
	var sources segment.Offsets
	var haveSources bool
	cutoff := o.w.sched.WallUnixMs() - o.w.engCfg.IdempotencyWindow.Milliseconds()
	for _, e := range m.offsets {
		if k, ok := strings.CutPrefix(e.Key, "idem/"); ok {
			if int64(e.Value) >= cutoff && !o.keyDurable(k, e.Value) {
				o.fail("segment %s reclaimed while its idempotency key %s is in no run a manifest lists", m.key, k)
			}
			continue
		}
		if !haveSources {
			sources, haveSources = o.storedSources(), true
		}
		if v, _ := sources.Get(e.Key); v < e.Value && !sources.Covers(segment.Offsets{e}) {
			o.fail("segment %s reclaimed while _offsets holds %s=%d, below its %d (and no floor covers it)", m.key, e.Key, v, e.Value)
		}
	}
}

// storedSources decodes the _offsets object of the store's truth.
func (o *Oracle) storedSources() segment.Offsets {
	key := o.w.layout.CheckpointKey()
	raw, ok := o.w.store.Object(key)
	if !ok {
		return nil
	}
	_, off, err := segment.DecodeCheckpoint(key, raw)
	if err != nil {
		o.fail("_offsets does not decode: %v", err)
	}
	return off
}

// keyDurable reports whether key is in a run listed by the manifest of
// the bucket of val, in the store's truth. Runs are immutable: each is
// decoded once.
func (o *Oracle) keyDurable(key string, val uint64) bool {
	l := o.w.layout
	b := int64(val / uint64(engine.IdemBucketWidth(o.w.engCfg.IdempotencyWindow).Milliseconds()))
	raw, ok := o.w.store.Object(l.IdemBucketKey(b))
	if !ok {
		return false
	}
	_, refs, err := segment.DecodeKeyManifest(l.IdemBucketKey(b), raw)
	if err != nil {
		o.fail("manifest %s does not decode: %v", l.IdemBucketKey(b), err)
		return false
	}
	h := segment.KeyHashOf(key)
	for _, ref := range refs {
		if o.runKeys(l.IdemRunKey(b, ref.Epoch, ref.Seq), ref.Count)[h] {
			return true
		}
	}
	return false
}

// runKeys returns the hashes a run of the store's truth holds (none if
// it is missing; a run that does not decode is a violation).
func (o *Oracle) runKeys(key string, count int) map[segment.KeyHash]bool {
	if hs, ok := o.runs[key]; ok {
		return hs
	}
	raw, ok := o.w.store.Object(key)
	if !ok {
		return nil
	}
	_, es, err := segment.DecodeKeyRun(key, raw, count)
	if err != nil {
		o.fail("run %s does not decode: %v", key, err)
		return nil
	}
	hs := make(map[segment.KeyHash]bool, len(es))
	for _, e := range es {
		hs[e.Hash] = true
	}
	o.runs[key] = hs
	return hs
}
