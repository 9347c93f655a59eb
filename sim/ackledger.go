package sim

import (
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// ackLedger is what every recovery must preserve, aggregated as ACKs
// arrive so that the check after a recovery costs the live segments,
// the offset keys and the idempotent units acked within the window —
// not every unit or segment in the history.
//
// The aggregation is exact: a unit's marker key never changes once
// committed (a second commit is itself a violation), a replayable
// partition is covered iff its recovered offset reaches the highest seq
// acked in it, and an idempotent unit is covered iff its key survives
// (or may have expired). A reclaimed segment needs no more checking, nor
// does a unit whose key may have expired (time only grows): pruning them
// keeps each check proportional to what is live.
type ackLedger struct {
	segs   []string // marker keys holding acked units, not yet reclaimed, first-ack order
	segSet map[string]bool
	maxSeq map[string]uint64
	keys   []string    // keys of maxSeq, first-ack order
	idem   []idemAcked // acked units of sources that cannot replay, ack order
}

type idemAcked struct {
	uid    UID
	offset string          // its key in the offsets view ("idem/" + idempotency key), built once
	hash   segment.KeyHash // its idempotency key's hash (the key store's), computed once
	seen   time.Duration   // when its source first submitted it
}

func newAckLedger() ackLedger {
	return ackLedger{segSet: map[string]bool{}, maxSeq: map[string]uint64{}}
}

// add records a unit's first ACK; seen is when it was first submitted.
// marker is the segment holding it, "" if none yet (a disk-WAL unit is
// acked from the log, and its segment added when its marker lands).
func (l *ackLedger) add(uid UID, s *source, marker string, seen time.Duration) {
	if marker != "" {
		l.addSeg(marker)
	}
	if !s.spec.Replayable {
		key := s.idemKeyOf(uid)
		l.idem = append(l.idem, idemAcked{uid, "idem/" + key, segment.KeyHashOf(key), seen})
		return
	}
	key, v := s.offsetOf(uid)
	cur, ok := l.maxSeq[key]
	if !ok {
		l.keys = append(l.keys, key)
	}
	if !ok || v > cur {
		l.maxSeq[key] = v
	}
}

// addSeg records a segment holding acked units.
func (l *ackLedger) addSeg(marker string) {
	if !l.segSet[marker] {
		l.segSet[marker] = true
		l.segs = append(l.segs, marker)
	}
}

// liveSegs returns the marker keys holding acked units that were not
// reclaimed, dropping the reclaimed ones for good.
func (l *ackLedger) liveSegs(reclaimed map[string]bool) []string {
	l.segs = slices.DeleteFunc(l.segs, func(k string) bool { return reclaimed[k] })
	return l.segs
}

// uncovered calls bad for every acked offset or idempotent unit that the
// recovered offsets fail to cover. An idempotent unit first seen more
// than window before now may have had its key expired: it is dropped.
func (l *ackLedger) uncovered(offset func(key string) (uint64, bool), idemKnown func(idemAcked) bool, now, window time.Duration, bad func(what string)) {
	for _, key := range l.keys {
		if v, _ := offset(key); v < l.maxSeq[key] {
			bad(key + "=" + strconv.FormatUint(l.maxSeq[key], 10) + " (recovered " + strconv.FormatUint(v, 10) + ")")
		}
	}
	l.idem = slices.DeleteFunc(l.idem, func(a idemAcked) bool { return expiredAfter(now, a.seen, window) })
	for _, a := range l.idem {
		if !idemKnown(a) {
			bad("unit " + a.uid.String() + " (idempotency key " + strings.TrimPrefix(a.offset, "idem/") + ")")
		}
	}
}
