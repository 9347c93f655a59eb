package engine

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// keyStore is what the engine remembers of idempotency keys: every key
// committed in the last IdempotencyWindow, so that a retry is answered
// as a duplicate. Keys are remembered by hash (segment.KeyHashOf) with
// their value, the wall ms they were submitted at.
//
// Keys live in time buckets (bucket b holds values in [b·w, (b+1)·w) for
// the bucket width w = IdemBucketWidth), and a bucket's keys are either
//
//   - recent: committed, not yet in a durable run (held exactly, in
//     memory), or in flight (in the run being written); or
//   - in a run: an immutable object of sorted hashes listed by the
//     bucket's manifest (keystore_io.go), of which only the meta — a
//     filter and a block index, some 2.7 bytes a key — stays in memory.
//
// So a checkpoint write costs the keys since the last write, not the
// keys of the window, and memory a few bytes a key of the window; a
// lookup costs a filter probe per run and, on a filter hit, one block
// read (keystore_lookup.go); merges keep the runs per bucket few
// (keystore_merge.go); expiry drops whole buckets. (A key committed
// again at a higher value while in flight is in recent too.)
//
// INVARIANT: nums holds the bucket numbers, ascending, one per bucket
// (checked in bucket); a bucket's runs are sorted by ref without
// duplicates (every list passes through the manifest's encoder, on a
// write, or its decoder, on a read, which check it).
type keyStore struct {
	widthMs uint64
	buckets map[int64]*keyBucket
	nums    []int64
	inv     invariantHook
}

// keyBucket is one bucket's share of the store.
type keyBucket struct {
	num    int64
	runs   []*keyRun // as listed by the manifest last read or written; each with its meta
	recent map[segment.KeyHash]uint64
	flight map[segment.KeyHash]uint64
	etag   string // the manifest's version last read or written; "" if none is known
	// rewrite: the manifest must be written even with no new key: it is
	// in the old checkpoint format, or was lost (deleted by another
	// incarnation) while runs it listed may still exist.
	rewrite bool
	busy    bool // held: a manifest write (a round's or a merge's), or a lookup's read of it (reading), is in flight
	// reading: what holds the bucket is a lookup's re-read of its
	// manifest (refreshBucket), not a write. A round that picked the
	// bucket before the read took it writes it once the read is over
	// (writeBucket). INVARIANT: only while busy, with no keys in flight.
	reading bool
}

// keyRun is a run the bucket's manifest lists, with its meta once read.
type keyRun struct {
	ref  segment.KeyRunRef
	meta *segment.KeyRunMeta
}

func newKeyStore(window time.Duration) *keyStore {
	return &keyStore{widthMs: uint64(IdemBucketWidth(window).Milliseconds()), buckets: map[int64]*keyBucket{}}
}

func (s *keyStore) bucketOf(val uint64) int64 { return int64(min(val/s.widthMs, math.MaxInt64)) }

// firstLive is the oldest bucket not expired at cutoffMs (wall now minus
// the window): bucket b is expired when its end, (b+1)·w, is before the
// cutoff.
func (s *keyStore) firstLive(cutoffMs int64) int64 {
	if cutoffMs <= 0 {
		return 0
	}
	return int64((uint64(cutoffMs)+s.widthMs-1)/s.widthMs) - 1
}

// bucket returns bucket n, creating it if need be.
// REQUIRES: n ≥ 0 (a bucket number names objects: IdemBucketKey).
func (s *keyStore) bucket(n int64) *keyBucket {
	if b := s.buckets[n]; b != nil {
		return b
	}
	if n < 0 {
		s.inv.broken("key store bucket numbers ≥ 0 (they name objects): bucket %d created, %d buckets", n, len(s.buckets))
	}
	b := &keyBucket{num: n, recent: map[segment.KeyHash]uint64{}, flight: map[segment.KeyHash]uint64{}}
	s.buckets[n] = b
	i, _ := slices.BinarySearch(s.nums, n)
	s.nums = slices.Insert(s.nums, i, n)
	if len(s.nums) != len(s.buckets) || i > 0 && s.nums[i-1] >= n || i+1 < len(s.nums) && s.nums[i+1] <= n {
		s.inv.broken("key store bucket numbers ascending, one per bucket: bucket %d inserted at %d of %d numbers, %d buckets", n, i, len(s.nums), len(s.buckets))
	}
	return b
}

// live reports whether b is still one of the store's buckets.
func (s *keyStore) live(b *keyBucket) bool { return s.buckets[b.num] == b }

// add records a committed key: recent in its bucket until a run holding
// it is durable.
func (s *keyStore) add(h segment.KeyHash, val uint64) {
	b := s.bucket(s.bucketOf(val))
	if len(b.flight) > 0 && !b.busy {
		// A key in flight is skipped below as about to be durable: keys
		// left in flight by a write that ended would never be.
		s.inv.broken("key store keys in flight only while a write holds their bucket: bucket %d not busy with %d keys in flight, adding %x=%d",
			b.num, len(b.flight), h, val)
	}
	if v, ok := b.flight[h]; ok && v >= val {
		return
	}
	if v, ok := b.recent[h]; !ok || v < val {
		b.recent[h] = val
	}
}

// held reports whether h is committed and held exactly (recent or in
// flight in some bucket).
func (s *keyStore) held(h segment.KeyHash) bool {
	for _, n := range s.nums {
		b := s.buckets[n]
		if _, ok := b.recent[h]; ok {
			return true
		}
		if _, ok := b.flight[h]; ok {
			return true
		}
	}
	return false
}

// blockRef names a block of a run that may hold a key.
type blockRef struct {
	bucket *keyBucket
	run    *keyRun
	block  int
}

// candidates returns the blocks of runs whose filter admits h, newest
// bucket first (a retry is most likely recent).
// mayHold reports whether any run's filter admits h (candidates, without
// building them: a lookup that only asks).
func (s *keyStore) mayHold(h segment.KeyHash) bool {
	for i := len(s.nums) - 1; i >= 0; i-- {
		for _, r := range s.buckets[s.nums[i]].runs {
			if r.meta.MayContain(h) {
				return true
			}
		}
	}
	return false
}

func (s *keyStore) candidates(h segment.KeyHash) []blockRef {
	var out []blockRef
	for i := len(s.nums) - 1; i >= 0; i-- {
		b := s.buckets[s.nums[i]]
		for _, r := range b.runs {
			if r.meta.MayContain(h) {
				out = append(out, blockRef{bucket: b, run: r, block: r.meta.BlockOf(h)})
			}
		}
	}
	return out
}

// durable reports whether a committed key (h, val) is durable: in a run
// its bucket's manifest lists, or expired at cutoffMs (it would be
// forgotten anyway).
func (s *keyStore) durable(h segment.KeyHash, val uint64, cutoffMs int64) bool {
	n := s.bucketOf(val)
	if n < s.firstLive(cutoffMs) {
		return true
	}
	b := s.buckets[n]
	if b == nil {
		s.inv.broken("key store committed keys live in their bucket: %x=%d, bucket %d missing", h, val, n)
		return false
	}
	if _, inFlight := b.flight[h]; inFlight {
		if !b.busy {
			// Not durable "yet" only while a write holds the bucket: keys
			// left in flight by a write that ended never will be, and a
			// checkpoint waiting on this one would wait for good.
			s.inv.broken("key store keys in flight only while a write holds their bucket: %x=%d asked for in bucket %d, not busy with %d keys in flight",
				h, val, n, len(b.flight))
		}
		return false // its run's manifest has not landed yet
	}
	_, r := b.recent[h]
	return !r && !b.rewrite
}

// expire drops every bucket expired at cutoffMs, oldest first. It
// returns the buckets dropped.
func (s *keyStore) expire(cutoffMs int64) (dropped []*keyBucket) {
	first := s.firstLive(cutoffMs)
	for len(s.nums) > 0 && s.nums[0] < first {
		b := s.buckets[s.nums[0]]
		if b == nil || b.num != s.nums[0] {
			s.inv.broken("key store bucket numbers one per bucket: number %d expires without its bucket (%d numbers, %d buckets)", s.nums[0], len(s.nums), len(s.buckets))
			return dropped
		}
		dropped = append(dropped, b)
		delete(s.buckets, s.nums[0])
		s.nums = s.nums[1:]
	}
	if len(s.nums) != len(s.buckets) {
		s.inv.broken("key store bucket numbers one per bucket: %d numbers, %d buckets after expiring %d before bucket %d", len(s.nums), len(s.buckets), len(dropped), first)
	}
	return dropped
}

// dirty returns the buckets whose manifest needs a write, oldest first.
func (s *keyStore) dirty() []*keyBucket {
	var out []*keyBucket
	for _, n := range s.nums {
		b := s.buckets[n]
		if len(b.flight) > 0 && !b.busy {
			// A bucket is picked for its recent keys: keys left in flight
			// by a write that ended would never be written again.
			s.inv.broken("key store keys in flight only while a write holds their bucket: bucket %d not busy with %d keys in flight, %d recent, at a round",
				b.num, len(b.flight), len(b.recent))
			return nil
		}
		if (len(b.recent) > 0 || b.rewrite) && !b.busy {
			out = append(out, b)
		}
	}
	return out
}

// takeRecent moves b's recent keys in flight and returns them sorted by
// hash, at most segment.KeyRunEntriesMax (the rest wait for the next
// write).
// REQUIRES: a write holds b (busy): keys in flight are settled only by
// the write that holds their bucket.
func (b *keyBucket) takeRecent() []segment.KeyEntry {
	if !b.busy {
		panic(fmt.Sprintf("engine: a run write takes recent keys while it holds their bucket: bucket %d, %d recent, not busy", b.num, len(b.recent)))
	}
	out := make([]segment.KeyEntry, 0, len(b.recent))
	//engine:orderless — sorted below.
	for h, v := range b.recent {
		out = append(out, segment.KeyEntry{Hash: h, Value: v})
	}
	sortEntries(out)
	out = out[:min(len(out), segment.KeyRunEntriesMax)]
	for _, e := range out {
		delete(b.recent, e.Hash)
		b.flight[e.Hash] = e.Value
	}
	return out
}

// settleFlight ends a run write: on success the keys in flight are in a
// listed run; otherwise they are recent again.
func (b *keyBucket) settleFlight(ok bool) {
	if !ok {
		//engine:orderless — map union.
		for h, v := range b.flight {
			if cur, in := b.recent[h]; !in || cur < v {
				b.recent[h] = v
			}
		}
	}
	clear(b.flight)
}

// lists reports whether b lists run r.
func (b *keyBucket) lists(r *keyRun) bool {
	return slices.ContainsFunc(b.runs, func(x *keyRun) bool { return x.ref == r.ref })
}

// memBytes is what the store holds in memory: run metas, and the recent
// keys at a map entry's cost.
func (s *keyStore) memBytes() int64 {
	var n int64
	for _, num := range s.nums {
		b := s.buckets[num]
		n += int64(len(b.recent)+len(b.flight)) * keyEntryMemBytes
		for _, r := range b.runs {
			if r.meta != nil {
				n += r.meta.MemBytes()
			}
		}
	}
	return n
}

// keyEntryMemBytes is what one recent key costs in a map.
const keyEntryMemBytes = 64

// runs counts the runs listed in every bucket.
func (s *keyStore) runs() int {
	n := 0
	for _, num := range s.nums {
		n += len(s.buckets[num].runs)
	}
	return n
}

func sortEntries(es []segment.KeyEntry) {
	slices.SortFunc(es, func(a, b segment.KeyEntry) int { return compareHash(a.Hash, b.Hash) })
}

// mergeEntries merges runs' entries sorted by hash; a hash in several
// keeps its highest value.
func mergeEntries(lists ...[]segment.KeyEntry) []segment.KeyEntry {
	n := 0
	for _, l := range lists {
		n += len(l)
	}
	out := make([]segment.KeyEntry, 0, n)
	for _, l := range lists {
		out = append(out, l...)
	}
	sortEntries(out)
	w := 0
	for _, e := range out {
		if w > 0 && out[w-1].Hash == e.Hash {
			out[w-1].Value = max(out[w-1].Value, e.Value)
			continue
		}
		out[w] = e
		w++
	}
	return out[:w]
}

func compareHash(a, b segment.KeyHash) int { return bytes.Compare(a[:], b[:]) }

// IdemBucketsPerWindow is how many time buckets one IdempotencyWindow
// spans. More buckets make expiry finer, and cost recovery one GET each
// (it reads the manifest of every bucket that can hold an unexpired key).
const IdemBucketsPerWindow = 16

// IdemBucketWidth is the time span of one idempotency-key bucket for a
// window: window / IdemBucketsPerWindow, at least a millisecond.
func IdemBucketWidth(window time.Duration) time.Duration {
	return max(window/IdemBucketsPerWindow, time.Millisecond).Truncate(time.Millisecond)
}
