package sim

import (
	"bytes"
	"strings"
)

// Corruption at rest: as a commit marker lands, the fault plan may decide
// that the segment's body changes in the store from then on (a bit flips
// on the medium). The oracle has already decoded the good body; from now
// on every read of it fails the marker's checksum. The engine must never
// deliver those bytes: a job that reads them is refused and alerts
// (World.checkAlerts then ends the run, halted as it should be), while a
// job applied from the writer's own cached copy is fine. At most one body
// per world.
func (w *World) maybeCorruptAtRest(markerKey string) {
	param, ok := w.faults.CorruptAtRest()
	if !ok {
		return
	}
	bodyKey := strings.TrimSuffix(markerKey, ".commit")
	e := w.store.entries[bodyKey]
	if e == nil || !e.present || len(e.body) == 0 {
		return
	}
	_, id, _, _ := w.layout.ParseKey(markerKey)
	// A flipped bit, never a truncation: the size still matches the
	// marker, so only the checksum can tell.
	e.body = CorruptBytes(bytes.Clone(e.body), param&^1)
	w.oracle.corruptAtRest = append(w.oracle.corruptAtRest, id)
	w.trace.Begin(w.sched.now, KindCorruptAtRest).S("key", bodyKey).End()
}
