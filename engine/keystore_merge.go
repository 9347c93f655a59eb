package engine

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"

	"github.com/skipprd/skipprd/engine/segment"
)

// Merging keeps the runs of a bucket few (keystore.go): every write round
// adds a run per bucket, and a lookup probes every run's filter. After a
// round, at most one merge runs: it reads its input runs whole, writes
// one run holding their keys, replaces them by it in the manifest (a
// conditional PUT: if another writer changed the manifest meanwhile, the
// merge is dropped and its run deleted), and only then deletes the
// inputs.
//
// The plan is size-tiered, so a key is rewritten about log₈ of its
// bucket's size times: in a bucket still taking keys, keyMergeFanout
// runs of one tier (sizes within a factor of keyMergeFanout) merge; a
// bucket no longer taking keys (older than the current one and its
// predecessor), or one whose manifest is half full, merges its smallest
// runs while they fit in one run. A merge holds its inputs and output in
// memory: at most segment.KeyRunEntriesMax keys, some 50 MB.

const keyMergeFanout = 8

// mergePlan picks runs of one bucket to merge into one, or none. Buckets
// numbered openFrom or later still take keys.
func (s *keyStore) mergePlan(openFrom int64) (*keyBucket, []*keyRun) {
	for _, n := range s.nums {
		b := s.buckets[n]
		if b.busy || len(b.runs) < 2 {
			continue
		}
		var ins []*keyRun
		if n < openFrom || len(b.runs) >= segment.KeyManifestRunsMax/2 {
			ins = smallestFitting(b.runs)
		} else {
			ins = fullTier(b.runs)
		}
		if len(ins) >= 2 {
			return b, ins
		}
	}
	return nil, nil
}

// smallestFitting returns the smallest runs, while they fit in one.
func smallestFitting(runs []*keyRun) []*keyRun {
	by := slices.Clone(runs)
	slices.SortStableFunc(by, func(a, b *keyRun) int { return a.ref.Count - b.ref.Count })
	sum, n := 0, 0
	for n < len(by) && sum+by[n].ref.Count <= segment.KeyRunEntriesMax {
		sum += by[n].ref.Count
		n++
	}
	return by[:n]
}

// fullTier returns keyMergeFanout runs of the lowest tier that has as
// many (fewer if they would not fit in one run).
func fullTier(runs []*keyRun) []*keyRun {
	tiers := map[int][]*keyRun{}
	var order []int
	for _, r := range runs {
		t := bits.Len(uint(r.ref.Count)) / 3 // log₈
		if tiers[t] == nil {
			order = append(order, t)
		}
		tiers[t] = append(tiers[t], r)
	}
	slices.Sort(order)
	for _, t := range order {
		if rs := tiers[t]; len(rs) >= keyMergeFanout {
			return smallestFitting(rs[:keyMergeFanout])
		}
	}
	return nil
}

// mergeKeys runs one merge if the plan has one; done is called when it
// is over, whatever became of it.
func (e *Engine) mergeKeys(done func()) {
	open := e.keys.bucketOf(uint64(max(e.p.Clock.WallUnixMs(), 0))) - 1
	b, ins := e.keys.mergePlan(open)
	if b == nil {
		done()
		return
	}
	if b.busy {
		e.broken("one merge per key bucket at a time: bucket %d planned while busy", b.num)
		done()
		return
	}
	b.busy = true
	lists := make([][]segment.KeyEntry, len(ins))
	e.forEach(len(ins), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		e.readRun(b.num, ins[i].ref, func(es []segment.KeyEntry, err error) {
			lists[i] = es
			d(err)
		})
	}, func(err error) {
		if !b.busy {
			e.broken("a merge holds its bucket while it reads its inputs: bucket %d, %d runs read, not busy", b.num, len(ins))
			done()
			return
		}
		if b.reading {
			// busy is a lookup's read, not this merge's: the merge's hold
			// ended early, and clearing busy below would free the read's.
			e.broken("a merge holds its bucket while it reads its inputs, not a read: bucket %d, %d runs read while a read holds it", b.num, len(ins))
			done()
			return
		}
		if err != nil {
			b.busy = false
			if errors.Is(err, ErrCorrupt) {
				e.failClosed(err) // raises the alert
			}
			done()
			return
		}
		if !e.checkMergeInputs(b, ins, lists) {
			b.busy = false
			done()
			return
		}
		e.putRun(b.num, func() []segment.KeyEntry { return mergeEntries(lists...) }, func(r *keyRun, err error) {
			if err != nil {
				if b.reading {
					// The merge's hold ended while its run was written and a
					// lookup's read took the bucket: freeing it would free the read's.
					e.broken("a merge frees its bucket while it, not a read, holds it: bucket %d, run write failed (%v) while a read holds it", b.num, err)
					done()
					return
				}
				b.busy = false
				done()
				return
			}
			e.replaceRuns(b, ins, r, done)
		})
	})
}

// checkMergeInputs: a merge read each input whole — as many keys as its
// ref counts, each into its own list — and their sum fits one run
// (smallestFitting). O(inputs), at most KeyManifestRunsMax.
func (e *Engine) checkMergeInputs(b *keyBucket, ins []*keyRun, lists [][]segment.KeyEntry) bool {
	sum := 0
	for i, r := range ins {
		if len(lists[i]) != r.ref.Count {
			e.broken("a merge reads its input runs whole: bucket %d, run %d-%d counts %d keys, %d read", b.num, r.ref.Epoch, r.ref.Seq, r.ref.Count, len(lists[i]))
			return false
		}
		sum += r.ref.Count
	}
	if sum > segment.KeyRunEntriesMax {
		e.broken("a merge's inputs fit one run: bucket %d, %d runs of %d keys, limit %d", b.num, len(ins), sum, segment.KeyRunEntriesMax)
		return false
	}
	return true
}

// replaceRuns lists r instead of ins in b's manifest, then deletes ins.
// If ins are no longer all listed, r was never listed: it is deleted.
func (e *Engine) replaceRuns(b *keyBucket, ins []*keyRun, r *keyRun, done func()) {
	if !b.busy {
		e.broken("a merge replaces runs while it holds its bucket: bucket %d not busy", b.num)
		done()
		return
	}
	if b.reading {
		// busy is a lookup's read: the merge's hold ended while its run
		// was written. Listing, or freeing, under the read would lose the
		// merge's run to the read's answer, or free the read's hold.
		e.broken("a merge replaces runs while it, not a read, holds its bucket: bucket %d, %d runs replaced while a read holds it", b.num, len(ins))
		done()
		return
	}
	if len(ins) < 2 {
		e.broken("a merge replaces two runs or more: bucket %d, %d runs replaced", b.num, len(ins))
		b.busy = false
		done()
		return
	}
	largest, sum := 0, 0
	for _, in := range ins {
		largest, sum = max(largest, in.ref.Count), sum+in.ref.Count
	}
	if r.ref.Count < largest || r.ref.Count > sum {
		// Its inputs are deleted once it is listed: a run holding fewer
		// keys than one of them would forget some.
		e.broken("a merged run holds every key of its inputs, once: bucket %d, run %d-%d of %d keys, %d inputs, largest %d, sum %d",
			b.num, r.ref.Epoch, r.ref.Seq, r.ref.Count, len(ins), largest, sum)
		b.busy = false
		done()
		return
	}
	runs := slices.DeleteFunc(slices.Clone(b.runs), func(x *keyRun) bool { return slices.Contains(ins, x) })
	if len(runs) != len(b.runs)-len(ins) || !e.keys.live(b) {
		e.dropRuns(b, []*keyRun{r})
		b.busy = false
		done()
		return
	}
	e.putManifest(b, insertRun(runs, r), func(ok bool) {
		b.busy = false
		// A write that failed may have landed (the re-read shows r) or
		// may land yet (unheard): r is deleted by the sweeper only, once
		// the bucket expires; the inputs only once no manifest we know
		// lists them.
		if ok || b.lists(r) {
			e.mark(MarkIdemRunsMerged)
			e.dropRuns(b, slices.DeleteFunc(slices.Clone(ins), b.lists))
		}
		done()
	})
}

// dropRuns deletes run objects of b no manifest lists, best effort (the
// sweeper deletes what is left once the bucket expires). O(runs × b's
// runs), both at most KeyManifestRunsMax, once per merge.
func (e *Engine) dropRuns(b *keyBucket, runs []*keyRun) {
	for _, r := range runs {
		if b.lists(r) {
			// Its keys are durable only there: deleting it would forget
			// them, and a retry of one would be taken again.
			e.broken("a key run is deleted only once no manifest lists it: bucket %d lists run %d-%d (%d keys), %d runs dropped",
				b.num, r.ref.Epoch, r.ref.Seq, r.ref.Count, len(runs))
			return
		}
	}
	for _, r := range runs {
		e.bestEffort().DeleteObject(e.layout.IdemRunKey(b.num, r.ref.Epoch, r.ref.Seq), func(error) {})
	}
}

// readRun GETs and decodes a whole run.
func (e *Engine) readRun(num int64, ref segment.KeyRunRef, done func([]segment.KeyEntry, error)) {
	if ref.Count < 1 || ref.Count > segment.KeyRunEntriesMax {
		// The read's limit derives from it, and a merge holds it in memory.
		e.broken("a run's count is bounded before the run is read: bucket %d, run %d-%d of %d keys, limit 1..%d",
			num, ref.Epoch, ref.Seq, ref.Count, segment.KeyRunEntriesMax)
		done(nil, e.err)
		return
	}
	key := e.layout.IdemRunKey(num, ref.Epoch, ref.Seq)
	var es []segment.KeyEntry
	in := GetObjectInput{Key: key, Limit: segment.KeyRunBytes(ref.Count)}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		_, es, err = segment.DecodeKeyRun(key, raw, ref.Count)
		return err
	}, func(_ []byte, _ ObjectInfo, err error) {
		if err != nil {
			err = fmt.Errorf("read idempotency-key run %s: %w", key, err)
		}
		done(es, err)
	})
}
