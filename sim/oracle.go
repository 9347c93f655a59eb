package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Oracle checks the WAL's guarantees against the world's truth, never
// against what the engine says about itself:
//
//   - no ACK before its commit marker landed;
//   - no unit committed twice (in two segments with markers);
//   - after every recovery: every acked unit lies in a segment the new
//     engine owns, the recovered offsets cover it, every owned segment
//     has its marker (an orphan is never owned), recovery read no body,
//     and its request count is bounded by the live segments;
//   - at the end: every unit a source produced is committed exactly once.
//
// It learns what a segment holds by decoding the body when its marker
// lands (Store.OnApply), outside the engine.
type Oracle struct {
	w          *World
	mem        memory.Allocator
	committed  map[UID]string  // unit → marker key of the segment holding it
	markers    map[string]int  // marker key → units in it
	reclaimed  map[string]bool // marker keys deleted after landing
	order      []*committedSeg // committed segments, in id order
	acked      map[UID]bool
	ledger     ackLedger             // what every recovery must preserve
	rows       map[UID]int           // rows each produced unit has
	firstSeen  map[UID]time.Duration // when a source first submitted each unit
	violations []string
}

func newOracle(w *World) *Oracle {
	return &Oracle{w: w, mem: memory.DefaultAllocator, committed: map[UID]string{}, markers: map[string]int{}, reclaimed: map[string]bool{},
		acked: map[UID]bool{}, ledger: newAckLedger(), rows: map[UID]int{}, firstSeen: map[UID]time.Duration{}}
}

func (o *Oracle) fail(format string, args ...any) {
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
}

// Violations returns what broke, in order.
func (o *Oracle) Violations() []string { return o.violations }

func (o *Oracle) produced(uid UID, rows int) {
	o.rows[uid] = rows
	if _, ok := o.firstSeen[uid]; !ok {
		o.firstSeen[uid] = o.w.sched.Now()
	}
}

// onApply sees every mutation land in the store.
func (o *Oracle) onApply(op Op, key string) {
	if !strings.HasSuffix(key, ".seg.commit") || !strings.HasPrefix(key, o.w.layout.Root()) {
		return
	}
	switch op {
	case OpPut:
		o.markerLanded(key)
	case OpDelete:
		if _, ok := o.markers[key]; ok {
			o.reclaimed[key] = true
		}
	}
}

// markerLanded decodes the committed segment and records its units.
func (o *Oracle) markerLanded(key string) {
	if _, seen := o.markers[key]; seen {
		o.fail("marker %s landed twice", key)
		return
	}
	raw, _ := o.w.store.Object(key)
	ix, err := segment.DecodeMarker(key, raw)
	if err != nil {
		o.fail("marker %s does not decode: %v", key, err)
		return
	}
	bodyKey := strings.TrimSuffix(key, ".commit")
	body, ok := o.w.store.Object(bodyKey)
	if !ok {
		o.fail("marker %s landed before its body", key)
		return
	}
	b, err := segment.CheckBody(ix, bodyKey, segment.Bytes(body), int64(len(body)))
	if err != nil {
		o.fail("segment %s fails its marker: %v", bodyKey, err)
		return
	}
	o.markers[key] = 0
	_, id, _, _ := o.w.layout.ParseKey(key)
	seg := &committedSeg{id: id}
	for i := range b.Index.Entries {
		seg.uids = append(seg.uids, o.readSlice(key, b, segment.SliceOrdinal(i))...)
	}
	i, _ := slices.BinarySearchFunc(o.order, id, func(s *committedSeg, id engine.SnapshotID) int { return compareIDs(s.id, id) })
	o.order = slices.Insert(o.order, i, seg)
}

// committedSeg is a segment whose marker landed, with its units in body
// order.
type committedSeg struct {
	id   engine.SnapshotID
	uids []UID
}

func (o *Oracle) readSlice(key string, b *segment.Body, ord segment.SliceOrdinal) []UID {
	s, err := b.ReadSlice(ord, o.mem)
	if err != nil {
		o.fail("segment %s slice %d: %v", key, ord, err)
		return nil
	}
	defer s.Release()
	counts := map[UID]int{}
	var order []UID
	for _, batch := range s.Batches {
		for _, v := range batch.Column(0).(*array.Int64).Int64Values() {
			uid := UID(v)
			if counts[uid] == 0 {
				order = append(order, uid)
			}
			counts[uid]++
		}
	}
	for _, uid := range order {
		if prev, dup := o.committed[uid]; dup {
			o.fail("unit %s committed twice: in %s and %s", uid, prev, key)
			continue
		}
		if want := o.rows[uid]; counts[uid] != want {
			o.fail("unit %s has %d rows in %s, produced %d", uid, counts[uid], key, want)
		}
		o.committed[uid] = key
		o.markers[key]++
	}
	return order
}

// onAck: an ACK must follow its commit.
func (o *Oracle) onAck(uid UID) {
	key, ok := o.committed[uid]
	if !ok {
		o.fail("unit %s acked before any marker holding it landed", uid)
		return
	}
	if !o.acked[uid] { // a resubmitted unit can be acked again
		o.acked[uid] = true
		o.ledger.add(uid, o.w.sources[uid.source()].spec, key)
	}
}

// recoveryStats is what the world observed of one recovery.
type recoveryStats struct {
	ops, bodyReads uint64
}

// engineView is what the oracle reads of an engine after recovery: what
// it claims to own and the offsets it recovered. The oracle compares
// these claims with the store's truth.
type engineView interface {
	Segments() []engine.Segment
	Offsets() segment.Offsets
	Stats() engine.Stats
}

// checkRecovery runs after every recovery.
func (o *Oracle) checkRecovery(eng engineView, rs recoveryStats) {
	owned := map[string]bool{}
	for _, s := range eng.Segments() {
		key := o.w.layout.Key(s.Dir, s.ID, engine.KindMarker)
		owned[key] = true
		if _, ok := o.w.store.Object(key); !ok {
			o.fail("recovery owns %s, whose marker does not exist (an orphan)", s.ID)
		}
	}
	for _, key := range o.ledger.segs {
		if !owned[key] && !o.reclaimed[key] {
			o.fail("segment %s holds acked units but is neither owned nor reclaimed after recovery", key)
		}
	}
	now, window := o.w.sched.Now(), o.w.engCfg.IdempotencyWindow
	o.ledger.uncovered(eng.Offsets(), func(uid UID) bool { return expiredAfter(now, o.firstSeen[uid], window) },
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
// body and a GET of its bitmap, the GET of _offsets, and a GET per
// idempotency-key bucket that can hold an unexpired key. Pages and
// markers are counted from the store's truth plus the keys deleted
// recently enough to linger in listings — live segments, not history.
func (o *Oracle) recoveryBound(eng engineView) uint64 {
	lingering := o.w.lingeringDeletes()
	keys := uint64(len(o.w.store.Keys(o.w.layout.SegmentsPrefix()))) + lingering
	pages := keys/uint64(o.w.pageSize) + 1
	perRound := uint64(engine.AttemptsMax) * (2*engine.ClaimRoundsMax + 3 + pages + 3*keys + idemBucketReads(o.w.engCfg.IdempotencyWindow))
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

// checkFinal runs when the world has converged.
func (o *Oracle) checkFinal(eng engineView) {
	for _, uid := range sortedUIDs(boolSet(o.rows)) {
		if _, ok := o.committed[uid]; !ok {
			o.fail("unit %s produced but never committed", uid)
		}
	}
	if n := len(eng.Segments()); n != len(o.markers)-len(o.reclaimed) {
		o.fail("final engine owns %d segments; %d markers landed, %d reclaimed", n, len(o.markers), len(o.reclaimed))
	}
}

func boolSet[V any](m map[UID]V) map[UID]bool {
	out := make(map[UID]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

func sortedUIDs(m map[UID]bool) []UID {
	out := make([]UID, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
