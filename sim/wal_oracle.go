package sim

import (
	"bytes"
	"maps"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/skipprd/skipprd/engine/wal"
)

// The disk WAL's oracles, from the simulated disk's bytes — never from
// the engine's word:
//
//   - no ACK before a completed fsync covered the unit's log entry
//     (walSynced records, at every successful sync of a log segment, the
//     units it made durable; onAck checks);
//   - every acked unit survives any crash: after each power loss, every
//     acked unit that no landed marker holds yet is in some log entry the
//     disk kept (walAfterCrash). Units of a world whose disk flipped bits
//     (media damage, which the engine must detect and halt on, never
//     deliver) are exempt from this one check only.
//
// Sequence numbers without gaps are checked by the engine's recovery
// itself (a gap halts the partition, which this world treats as a
// violation unless the disk flipped bits).
type walOracle struct {
	durable map[UID]bool     // units a completed fsync covered
	scanned map[string]int64 // per log segment, where the next entry starts
	// logOnly are acked units no landed marker holds yet.
	logOnly map[UID]bool
}

func newWALOracle() walOracle {
	return walOracle{durable: map[UID]bool{}, scanned: map[string]int64{}, logOnly: map[UID]bool{}}
}

// walSynced reads the entries a sync of a log segment made durable.
func (o *Oracle) walSynced(path string, written []byte) {
	if !strings.HasSuffix(path, ".wal") {
		return
	}
	from := o.wal.scanned[path]
	if from > int64(len(written)) {
		from = 0
	}
	r := wal.Scan(path, written[from:])
	for _, ent := range r.Entries {
		for _, uid := range o.walUnits(path, ent.Payload) {
			o.wal.durable[uid] = true
		}
	}
	o.wal.scanned[path] = from + r.End
}

// walUnits returns the oracle units a log entry holds, if it is a unit
// record: one for most engine units, every piece of one a prefix source
// made of several (prefix_units.go).
func (o *Oracle) walUnits(path string, payload []byte) []UID {
	rec, err := wal.DecodeRecord(path, payload)
	if err != nil {
		o.fail("log segment %s: an entry that passed its CRC does not decode: %v", path, err)
		return nil
	}
	u, ok := rec.(*wal.UnitRecord)
	if !ok {
		return nil
	}
	rd, err := ipc.NewReader(bytes.NewReader(u.Arrow), ipc.WithAllocator(o.mem))
	if err != nil {
		o.fail("log segment %s: unit %d: %v", path, u.Seq, err)
		return nil
	}
	defer rd.Release()
	var out []UID
	for rd.Next() {
		cols, err := UnitColumns(rd.RecordBatch())
		if err != nil {
			continue
		}
		for i := range cols.Len() {
			if uid := UID(cols.UID(i)); len(out) == 0 || out[len(out)-1] != uid {
				out = append(out, uid)
			}
		}
	}
	return out
}

// walAcked: in a disk-WAL world an ACK must follow the fsync of the
// unit's entry.
//
// A retry of a replayed unit is acked when its generation commits: a
// landed marker holding it is as good as the fsync.
func (o *Oracle) walAcked(uid UID) {
	landed := false
	if u := o.units[uid]; u != nil && len(u.markers) > 0 {
		landed = true
	}
	if !o.wal.durable[uid] && !landed {
		o.fail("unit %s acked before a completed fsync covered its log entry (and no landed marker holds it)", uid)
	}
	if !landed {
		o.wal.logOnly[uid] = true
	}
}

// walAfterCrash: every acked unit not yet in a landed marker is in the
// log the disk kept.
//
// A unit whose fsync failed may still be kept by the crash (its outcome
// was unknown): what the disk kept is durable from now on.
func (o *Oracle) walAfterCrash() {
	clear(o.wal.scanned) // files may come back shorter, or be created again
	if o.w.engCfg.Disk == nil {
		return
	}
	kept := map[UID]bool{}
	o.logEntries(true, func(p string, payload []byte) {
		for _, uid := range o.walUnits(p, payload) {
			kept[uid] = true
			o.wal.durable[uid] = true
		}
	})
	if o.w.disk.Counts().Outcomes[DiskBitFlip] > 0 {
		return
	}
	for _, uid := range slices.Sorted(maps.Keys(o.wal.logOnly)) {
		if !kept[uid] {
			o.fail("unit %s was acked, but after a power loss it is neither in a landed marker nor in the log the disk kept", uid)
		}
	}
}

// walFinal: once the world converged the log is reclaimed too — every
// generation was flushed, so each partition keeps only its append target
// (from the disk's files, not the engine's word).
func (o *Oracle) walFinal() {
	if o.w.engCfg.Disk == nil {
		return
	}
	per := map[string]int{}
	for _, p := range o.w.data.Paths() {
		if strings.HasSuffix(p, ".wal") {
			per[p[:strings.LastIndex(p, "/")]]++
		}
	}
	for _, dir := range slices.Sorted(maps.Keys(per)) {
		if per[dir] > 1 {
			o.fail("log %s holds %d segment files after convergence: flushed segments were not deleted", dir, per[dir])
		}
	}
}

// recoveredOffset is what a recovered engine knows of a key: the offsets
// view it recovered, and in a disk-WAL world also the log it read back —
// a replayed unit is not committed until its generation commits (its
// entry may be in the page cache only), but it is the engine's to
// deliver, which the final oracles check. The log is read from the
// disk's files, not the engine's word.
func (o *Oracle) recoveredOffset(eng engineView) func(key string) (uint64, bool) {
	viewed := func(key string) (uint64, bool) {
		if k, ok := strings.CutPrefix(key, "idem/"); ok {
			return 1, eng.IdempotencyKeyKnown(k) // the key store knows keys, not values
		}
		return eng.Offset(key)
	}
	if o.w.engCfg.Disk == nil {
		return viewed
	}
	logged := map[string]uint64{}
	o.logEntries(false, func(p string, payload []byte) {
		rec, err := wal.DecodeRecord(p, payload)
		if err != nil {
			o.fail("log segment %s: an entry that passed its CRC does not decode: %v", p, err)
			return
		}
		if u, ok := rec.(*wal.UnitRecord); ok {
			for _, off := range u.Offsets {
				logged[off.Key] = max(logged[off.Key], off.Value)
			}
		}
	})
	return func(key string) (uint64, bool) {
		v, ok := viewed(key)
		if w, in := logged[key]; in {
			return max(v, w), true
		}
		return v, ok
	}
}

// logEntries calls fn with every entry of every log segment on the disk:
// its durable image (what a crash keeps) or what was written (what a
// read returns).
func (o *Oracle) logEntries(durable bool, fn func(path string, payload []byte)) {
	for _, p := range o.w.data.Paths() {
		if !strings.HasSuffix(p, ".wal") {
			continue
		}
		written, kept := o.w.data.File(p)
		if durable {
			written = kept
		}
		for _, ent := range wal.Scan(p, written).Entries {
			fn(p, ent.Payload)
		}
	}
}
