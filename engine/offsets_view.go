package engine

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// offsetsView is the engine's materialized view of committed progress:
// for every offset key, the highest value any owned segment committed.
// It is rebuilt at recovery from the offsets checkpoint and the markers
// (the WAL is the source of truth) and advanced at every commit.
//
// It also knows which checkpoint object (checkpoint.go) each key belongs
// to, and which keys that object may still lack:
//
//   - a source offset (a key without idemPrefix) belongs to _offsets;
//   - an idempotency key (idem/{key} → the wall ms it was submitted at)
//     belongs to the time bucket of its value: bucket b holds values in
//     [b·w, (b+1)·w) for the bucket width w (IdemBucketWidth).
//
// Idempotency keys accumulate for a whole IdempotencyWindow, source
// offsets do not; so a checkpoint write rewrites only the objects whose
// keys changed (in steady state _offsets and the newest bucket), and
// expiry drops whole buckets: neither costs O(every key of the window).
//
// INVARIANT: every key of vals is listed (order or fresh) in the part it
// belongs to; nums holds the numbers of buckets, ascending (checked where
// a bucket is added or dropped; the whole of it by check, in tests).
type offsetsView struct {
	vals    map[string]uint64
	widthMs uint64
	sources *viewPart
	buckets map[int64]*viewPart
	nums    []int64
	inv     invariantHook // the engine's failClosed
}

// viewPart is one checkpoint object's share of the view. Its keys are
// kept in sorted order incrementally: keys that joined since the last
// snapshot are sorted alone and merged in, and keys that left (moved to
// a later bucket) are skipped, so a snapshot costs O(n + k log k) for k
// new keys, not a sort of the part.
//
// INVARIANT: order is sorted without duplicates (checked as snapshot
// rebuilds it); it and fresh may hold keys that left the part (dropped at
// the next snapshot).
type viewPart struct {
	bucket int64    // the bucket number; sourcesPart for _offsets
	order  []string // sorted keys as of the last snapshot
	fresh  []string // keys that joined since, unsorted
	// A key whose value changed since the snapshot of the last write
	// began is in unsynced; one that changed before the snapshot of the
	// write in flight, in flight. A key of the part in neither is durable
	// in the object at its current value.
	unsynced, flight map[string]struct{}
	// stale: the object holds keys that belong to another object (an
	// old-format _offsets holding idempotency keys); rewrite it once
	// they are durable where they belong.
	stale bool
	etag  string // version of the object last read or written; "" if none is known
}

// sourcesPart is the bucket number of the _offsets part.
const sourcesPart = -1

// IdemBucketsPerWindow is how many time buckets one IdempotencyWindow
// spans. More buckets make each checkpoint write smaller (only the
// newest bucket changes) and expiry finer, and cost recovery one GET
// each (it reads every bucket that can hold an unexpired key).
const IdemBucketsPerWindow = 16

// IdemBucketWidth is the time span of one idempotency-key bucket for a
// window: window / IdemBucketsPerWindow, at least a millisecond.
func IdemBucketWidth(window time.Duration) time.Duration {
	return max(window/IdemBucketsPerWindow, time.Millisecond).Truncate(time.Millisecond)
}

func newOffsetsView(window time.Duration) *offsetsView {
	return &offsetsView{
		vals:    map[string]uint64{},
		widthMs: uint64(IdemBucketWidth(window).Milliseconds()),
		sources: newViewPart(sourcesPart),
		buckets: map[int64]*viewPart{},
	}
}

func newViewPart(bucket int64) *viewPart {
	return &viewPart{bucket: bucket, unsynced: map[string]struct{}{}, flight: map[string]struct{}{}}
}

func (v *offsetsView) len() int { return len(v.vals) }

// reserve sizes an empty view's map for n keys (recovery knows how many
// it is about to merge); a view holding keys is left as it is.
func (v *offsetsView) reserve(n int) {
	if len(v.vals) == 0 {
		v.vals = make(map[string]uint64, n)
	}
}

func (v *offsetsView) get(key string) (uint64, bool) {
	val, ok := v.vals[key]
	return val, ok
}

// covers reports whether every offset of o is at or below the view.
func (v *offsetsView) covers(o segment.Offsets) bool {
	for _, e := range o {
		if cur, ok := v.vals[e.Key]; !ok || cur < e.Value {
			return false
		}
	}
	return true
}

// bucketOf is the bucket of an idempotency key's value.
func (v *offsetsView) bucketOf(val uint64) int64 {
	return int64(min(val/v.widthMs, math.MaxInt64))
}

// firstLive is the oldest bucket not expired at cutoffMs (wall now minus
// the window): bucket b is expired when its end, (b+1)·w, is before the
// cutoff.
func (v *offsetsView) firstLive(cutoffMs int64) int64 {
	if cutoffMs <= 0 {
		return 0
	}
	c := uint64(cutoffMs)
	return int64((c+v.widthMs-1)/v.widthMs) - 1
}

// home is the number of the part a key with value val belongs to: its
// bucket, or sourcesPart.
func (v *offsetsView) home(key string, val uint64) int64 {
	if !strings.HasPrefix(key, idemPrefix) {
		return sourcesPart
	}
	return v.bucketOf(val)
}

// part returns part n (a bucket number or sourcesPart), creating the
// bucket if need be.
func (v *offsetsView) part(n int64) *viewPart {
	if n == sourcesPart {
		return v.sources
	}
	if p := v.buckets[n]; p != nil {
		return p
	}
	p := newViewPart(n)
	v.buckets[n] = p
	i, _ := slices.BinarySearch(v.nums, n)
	v.nums = slices.Insert(v.nums, i, n)
	if len(v.nums) != len(v.buckets) || i > 0 && v.nums[i-1] >= n || i+1 < len(v.nums) && v.nums[i+1] <= n {
		v.inv.broken("offsets view bucket numbers ascending, one per bucket: bucket %d inserted at %d of %d numbers, %d buckets", n, i, len(v.nums), len(v.buckets))
	}
	return p
}

// live reports whether p is still one of the view's parts (expiry has
// not dropped it).
func (v *offsetsView) live(p *viewPart) bool {
	return p == v.sources || v.buckets[p.bucket] == p
}

// merge max-merges offsets committed in a segment: changed keys are not
// durable in the checkpoint yet.
func (v *offsetsView) merge(o segment.Offsets) { v.mergeFrom(o, nil) }

// mergeObject max-merges the content of p's object, as read from the
// store: the keys it holds that belong to it, at or above the view's
// value, are durable. Keys that belong elsewhere make it stale.
func (v *offsetsView) mergeObject(o segment.Offsets, p *viewPart) {
	if !v.live(p) {
		p = nil // expired meanwhile: what it held is merged as not durable
	}
	v.mergeFrom(o, p)
}

func (v *offsetsView) mergeFrom(o segment.Offsets, from *viewPart) {
	for _, e := range o {
		home := v.home(e.Key, e.Value)
		mine := from != nil && home == from.bucket
		if from != nil && !mine {
			from.stale = true
		}
		cur, ok := v.vals[e.Key]
		if ok && e.Value <= cur {
			if mine && e.Value == cur {
				delete(from.unsynced, e.Key) // the object has our value
			}
			continue
		}
		p := v.part(home)
		if !ok {
			p.fresh = append(p.fresh, e.Key)
		} else if was := v.home(e.Key, cur); was != home {
			delete(v.part(was).unsynced, e.Key) // it left: was need not be rewritten
			p.fresh = append(p.fresh, e.Key)
		}
		v.vals[e.Key] = e.Value
		if mine {
			delete(p.unsynced, e.Key)
		} else {
			p.unsynced[e.Key] = struct{}{}
		}
	}
}

// durable reports whether the checkpoint durably covers every offset of
// want, as far as this view knows: each is in its object at or above the
// wanted value, or is an idempotency key expired at cutoffMs (it would
// be forgotten anyway).
func (v *offsetsView) durable(want segment.Offsets, cutoffMs int64) bool {
	first := v.firstLive(cutoffMs)
	for _, e := range want {
		idem := strings.HasPrefix(e.Key, idemPrefix)
		if idem && v.bucketOf(e.Value) < first {
			continue
		}
		cur, ok := v.vals[e.Key]
		if !ok || cur < e.Value {
			return false
		}
		p := v.sources
		if idem {
			p = v.buckets[v.bucketOf(cur)]
		}
		if p == nil {
			v.inv.broken("offsets view keys live in their part: %s=%d, bucket %d missing", e.Key, cur, v.bucketOf(cur))
			return false
		}
		if _, ok := p.unsynced[e.Key]; ok {
			return false
		}
		if _, ok := p.flight[e.Key]; ok {
			return false
		}
	}
	return true
}

// expire drops every bucket expired at cutoffMs with its keys, oldest
// first: O(buckets and keys dropped). It returns the buckets dropped and
// how many keys went with them.
func (v *offsetsView) expire(cutoffMs int64) (dropped []*viewPart, keys int) {
	first := v.firstLive(cutoffMs)
	for len(v.nums) > 0 && v.nums[0] < first {
		b := v.nums[0]
		p := v.buckets[b]
		for _, list := range [][]string{p.order, p.fresh} {
			for _, k := range list {
				if val, ok := v.vals[k]; ok && v.bucketOf(val) == b {
					delete(v.vals, k)
					keys++
				}
			}
		}
		delete(v.buckets, b)
		v.nums = v.nums[1:]
		dropped = append(dropped, p)
	}
	if len(v.nums) != len(v.buckets) {
		v.inv.broken("offsets view bucket numbers one per bucket: %d numbers, %d buckets after expiry", len(v.nums), len(v.buckets))
	}
	return dropped, keys
}

// objectLost records that p's object is gone (deleted by someone else):
// none of its keys is durable any more.
func (v *offsetsView) objectLost(p *viewPart) {
	for _, e := range v.snapshot(p) {
		p.unsynced[e.Key] = struct{}{}
	}
}

// dirty reports whether p's object lacks something the view holds.
func (p *viewPart) dirty() bool { return len(p.unsynced) > 0 || p.stale }

// dirtyBuckets returns the buckets whose objects need a write, oldest
// first.
func (v *offsetsView) dirtyBuckets() []*viewPart {
	var out []*viewPart
	for _, b := range v.nums {
		if p := v.buckets[b]; p.dirty() {
			out = append(out, p)
		}
	}
	return out
}

// snapshot returns p's keys at their values, in key order (canonical
// Offsets, freshly allocated).
func (v *offsetsView) snapshot(p *viewPart) segment.Offsets {
	slices.Sort(p.fresh)
	keys := make([]string, 0, len(p.order)+len(p.fresh))
	i, j := 0, 0
	for i < len(p.order) || j < len(p.fresh) {
		var k string
		if j == len(p.fresh) || (i < len(p.order) && p.order[i] < p.fresh[j]) {
			k, i = p.order[i], i+1
		} else {
			k, j = p.fresh[j], j+1
		}
		val, ok := v.vals[k]
		if ok && v.home(k, val) == p.bucket && (len(keys) == 0 || keys[len(keys)-1] != k) {
			if len(keys) > 0 && keys[len(keys)-1] > k {
				v.inv.broken("offsets view part order sorted: part %d lists %q before %q", p.bucket, keys[len(keys)-1], k)
			}
			keys = append(keys, k)
		}
	}
	p.order, p.fresh = keys, nil
	out := make(segment.Offsets, len(keys))
	for i, k := range keys {
		out[i] = segment.Offset{Key: k, Value: v.vals[k]}
	}
	return out
}

// beginWrite returns what p's object must hold and marks what is not
// durable yet as in flight.
// REQUIRES: no write of p is in flight.
func (v *offsetsView) beginWrite(p *viewPart) segment.Offsets {
	if len(p.flight) > 0 {
		panic(fmt.Sprintf("engine: checkpoint part %d written while %d keys are in flight", p.bucket, len(p.flight)))
	}
	p.unsynced, p.flight = p.flight, p.unsynced
	return v.snapshot(p)
}

// endWrite records the outcome of p's write: on success what was in
// flight is durable and the object no longer stale; otherwise it is
// unsynced again.
func (v *offsetsView) endWrite(p *viewPart, ok bool) {
	if ok {
		p.stale = false
	} else {
		//engine:orderless — set union.
		for k := range p.flight {
			p.unsynced[k] = struct{}{}
		}
	}
	clear(p.flight)
}

// sorted returns the whole view as canonical Offsets (freshly
// allocated): the parts' snapshots, merged pairwise — O(n log parts).
func (v *offsetsView) sorted() segment.Offsets {
	runs := []segment.Offsets{v.snapshot(v.sources)}
	for _, b := range v.nums {
		runs = append(runs, v.snapshot(v.buckets[b]))
	}
	for len(runs) > 1 {
		var next []segment.Offsets
		for i := 0; i < len(runs); i += 2 {
			if i+1 == len(runs) {
				next = append(next, runs[i])
			} else {
				next = append(next, segment.MaxMerge(runs[i], runs[i+1])) // parts hold distinct keys
			}
		}
		runs = next
	}
	return runs[0]
}

// check verifies the view's invariants (O(keys): for tests).
func (v *offsetsView) check() error {
	if len(v.nums) != len(v.buckets) || !slices.IsSorted(v.nums) {
		return fmt.Errorf("bucket numbers %v for %d buckets", v.nums, len(v.buckets))
	}
	listed := map[string]int64{}
	for _, p := range append([]*viewPart{v.sources}, v.partsOf(v.nums)...) {
		for i, k := range p.order {
			if i > 0 && p.order[i-1] >= k {
				return fmt.Errorf("part %d: order %q then %q", p.bucket, p.order[i-1], k)
			}
		}
		for _, k := range append(slices.Clone(p.order), p.fresh...) {
			if val, ok := v.vals[k]; ok && v.home(k, val) == p.bucket {
				listed[k] = p.bucket
			}
		}
	}
	//engine:orderless — reports the first key found; any is a failure.
	for k, val := range v.vals {
		if _, ok := listed[k]; !ok {
			return fmt.Errorf("key %q=%d not listed in its part %d", k, val, v.home(k, val))
		}
	}
	return nil
}

func (v *offsetsView) partsOf(nums []int64) []*viewPart {
	out := make([]*viewPart, 0, len(nums))
	for _, b := range nums {
		p := v.buckets[b]
		if p == nil {
			panic(fmt.Sprintf("engine: bucket %d listed but missing", b))
		}
		out = append(out, p)
	}
	return out
}
