package sim

import (
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// ackLedger is what every recovery must preserve, aggregated as ACKs
// arrive so that the check after a recovery costs the number of segments,
// offset keys and idempotent units acked — not a sort of every unit.
//
// The aggregation is exact: a unit's marker key never changes once
// committed (a second commit is itself a violation), a replayable
// partition is covered iff its recovered offset reaches the highest seq
// acked in it, and an idempotent unit is covered iff its key survives
// (or may have expired).
type ackLedger struct {
	segs   []string // marker keys holding acked units, first-ack order
	segSet map[string]bool
	maxSeq map[string]uint64
	keys   []string // keys of maxSeq, first-ack order
	idem   []UID    // acked units of sources that cannot replay, ack order
}

func newAckLedger() ackLedger {
	return ackLedger{segSet: map[string]bool{}, maxSeq: map[string]uint64{}}
}

// add records a unit's first ACK.
func (l *ackLedger) add(uid UID, spec SourceSpec, marker string) {
	if !l.segSet[marker] {
		l.segSet[marker] = true
		l.segs = append(l.segs, marker)
	}
	if !spec.Replayable {
		l.idem = append(l.idem, uid)
		return
	}
	key := offsetKey(spec, uid.partition())
	cur, ok := l.maxSeq[key]
	if !ok {
		l.keys = append(l.keys, key)
	}
	if !ok || uid.seq() > cur {
		l.maxSeq[key] = uid.seq()
	}
}

// uncovered calls bad for every acked offset or idempotent unit that the
// recovered offsets fail to cover. expired reports units whose key the
// engine may have dropped already.
func (l *ackLedger) uncovered(offsets segment.Offsets, expired func(UID) bool, bad func(what string)) {
	for _, key := range l.keys {
		if v, _ := offsets.Get(key); v < l.maxSeq[key] {
			bad(key + "=" + strconv.FormatUint(l.maxSeq[key], 10) + " (recovered " + strconv.FormatUint(v, 10) + ")")
		}
	}
	if len(l.idem) == 0 {
		return
	}
	present := idemKeys(offsets)
	for _, uid := range l.idem {
		if !present[idemKey(uid)] && !expired(uid) {
			bad("unit " + uid.String() + " (idempotency key " + idemKey(uid) + ")")
		}
	}
}

// idemKeys is the set of idempotency keys in offsets. Offsets are sorted,
// so the keys sit in one run.
func idemKeys(offsets segment.Offsets) map[string]bool {
	const prefix = "idem/"
	out := map[string]bool{}
	for _, e := range offsets {
		if rest, ok := strings.CutPrefix(e.Key, prefix); ok {
			out[rest] = true
		}
	}
	return out
}
