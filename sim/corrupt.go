package sim

import "strings"

// Corruption at rest: as an engine process starts — its cache is empty,
// so it will read what it owns — the fault plan may flip a bit in a live
// segment's body or completion bitmap in the store (the medium rotted).
// The oracle decoded the good body when its marker landed. The engine
// must never use those bytes: a job that reads a bad body is refused, a
// bad bitmap forbids deleting its segment, and either alerts, naming the
// segment (World.checkAlerts then ends the run, halted as it should be).
// At most once per world.
func (w *World) maybeCorruptAtRest() {
	var markers []string
	for _, k := range w.store.Keys(w.layout.SegmentsPrefix()) {
		if strings.HasSuffix(k, ".seg.commit") {
			markers = append(markers, k)
		}
	}
	if len(markers) == 0 {
		return // nothing to corrupt: not a decision point
	}
	param, ok := w.faults.CorruptAtRest()
	if !ok {
		return
	}
	u := uint64(param)
	marker := markers[u%uint64(len(markers))]
	target := strings.TrimSuffix(marker, ".commit") // the body
	if bitmaps := w.liveBitmaps(markers); u>>32&1 == 1 && len(bitmaps) > 0 {
		target = bitmaps[u%uint64(len(bitmaps))]
		marker = strings.TrimSuffix(target, ".scbl") + ".commit"
	}
	// A flipped bit, never a truncation: the size still matches the
	// marker, so only the checksum can tell.
	if !w.store.Rot(target, func(b []byte) []byte { return CorruptBytes(b, int64(u>>33)<<1) }) {
		return
	}
	_, id, _, _ := w.layout.ParseKey(marker)
	w.expectAlert("segment " + id.String())
	w.trace.Begin(w.sched.now, KindCorruptAtRest).S("key", target).End()
}

// liveBitmaps lists the completion bitmaps of live segments.
func (w *World) liveBitmaps(markers []string) []string {
	var out []string
	for _, m := range markers {
		b := strings.TrimSuffix(m, ".commit") + ".scbl"
		if e := w.store.entries[b]; e != nil && e.present {
			out = append(out, b)
		}
	}
	return out
}
