package sim

import "github.com/skipprd/skipprd/engine/segment"

// bitmapChanged: every version of a completion bitmap holds every bit
// the previous one did (bits are only ever set). A deleted bitmap starts
// over (its segment was reclaimed; a later one is an orphan).
func (o *Oracle) bitmapChanged(op Op, key string) {
	if op == OpDelete {
		delete(o.bitmaps, key)
		return
	}
	if op != OpPut {
		return
	}
	raw, _ := o.w.store.Object(key)
	b, err := segment.DecodeBitmap(key, raw)
	if err != nil {
		o.fail("bitmap %s written undecodable: %v", key, err)
		return
	}
	prev := o.bitmaps[key]
	o.bitmaps[key] = b
	if prev == nil {
		return
	}
	if prev.Len() != b.Len() {
		o.fail("bitmap %s changed length from %d to %d bits", key, prev.Len(), b.Len())
		return
	}
	for i := range prev.Len() {
		if prev.IsSet(segment.SliceOrdinal(i)) && !b.IsSet(segment.SliceOrdinal(i)) {
			o.fail("bitmap %s: bit %d was set and a later version cleared it (%d bits set before, %d after)", key, i, prev.Count(), b.Count())
			return
		}
	}
}
