package sim

import (
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// The recovery oracles: what every recovery must have kept, and what it
// may cost (checkRecovery runs as each engine becomes ready).

// recoveryStats is what the world observed of one recovery.
type recoveryStats struct {
	ops, bodyReads uint64
}

// engineView is what the oracle reads of an engine after recovery: what
// it claims to own and the offsets it recovered. The oracle compares
// these claims with the store's truth.
type engineView interface {
	Segments() []engine.Segment
	Offset(key string) (uint64, bool)
	IdempotencyKeyKnown(key string) bool
	KeyHashKnown(h segment.KeyHash) bool
	Stats() engine.Stats
}

// checkRecovery runs after every recovery.
func (o *Oracle) checkRecovery(eng engineView, rs recoveryStats) {
	o.decideValidity()
	o.checkCommits()
	owned := map[string]bool{}
	for _, s := range eng.Segments() {
		key := o.w.layout.Key(s.Dir, s.ID, engine.KindMarker)
		owned[key] = true
		if _, ok := o.w.store.Object(key); !ok && !o.reclaimed[key] {
			o.fail("recovery owns %s, whose marker does not exist (an orphan)", s.ID)
		}
	}
	for _, key := range o.ledger.liveSegs(o.reclaimed) {
		if !owned[key] {
			o.fail("segment %s holds acked units but is neither owned nor reclaimed after recovery", key)
		}
	}
	offset := o.recoveredOffset(eng)
	idemKnown := func(a idemAcked) bool {
		if eng.KeyHashKnown(a.hash) {
			return true
		}
		_, ok := offset(a.offset) // a disk-WAL world's log may hold it
		return ok
	}
	o.ledger.uncovered(offset, idemKnown, o.w.sched.Now(), o.w.engCfg.IdempotencyWindow,
		func(what string) { o.fail("acked %s not covered by the recovered offsets", what) })
	if rs.bodyReads > 0 {
		o.fail("recovery read %d segment bodies", rs.bodyReads)
	}
	if bound := o.recoveryBound(eng); rs.ops > bound {
		o.fail("recovery took %d requests, bound %d", rs.ops, bound)
	}
}

// recoveryBound: per recovery round, at most AttemptsMax tries of each
// of: the epoch claim's reads and writes, the seal write and its check,
// one LIST per page, per marker a GET, a HEAD if the listing missed its
// body and a GET of its bitmap, the GET of _offsets, a GET per
// idempotency-key bucket that can hold an unexpired key and one per run
// of keys. Pages, markers and runs are counted from the store's truth
// plus the keys deleted recently enough to linger in listings or to have
// been read before a merge deleted them — live objects, never the
// history, and never the number of keys.
func (o *Oracle) recoveryBound(eng engineView) uint64 {
	lingering := o.w.lingeringDeletes()
	keys := uint64(len(o.w.store.Keys(o.w.layout.SegmentsPrefix()))) + lingering
	runs := uint64(len(o.w.store.Keys(o.w.layout.IdemBucketsPrefix()))) + lingering
	pages := keys/uint64(o.w.pageSize) + 1
	perRound := uint64(engine.AttemptsMax) * (2*engine.ClaimRoundsMax + 3 + pages + 3*keys + idemBucketReads(o.w.engCfg.IdempotencyWindow) + runs)
	return eng.Stats().RecoveryRuns * perRound
}

// idemBucketReads bounds the buckets recovery reads: those that can hold
// a key submitted within the window (a window spans at most
// ⌈window / width⌉ + 1 of them), and one more on each side for clock
// skew between incarnations.
func idemBucketReads(window time.Duration) uint64 {
	width := engine.IdemBucketWidth(window)
	return uint64((window+width-1)/width) + 3
}
