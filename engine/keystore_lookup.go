package engine

import (
	"errors"
	"fmt"

	"github.com/skipprd/skipprd/engine/segment"
)

// A unit with an idempotency key the engine does not hold exactly
// (keystore.go) is looked up in the runs whose filter admits the key:
// one ranged GET of one block each, newest bucket first, until one holds
// the key. Only then is the unit admitted, or answered as a duplicate.
// Every submission of the same key meanwhile waits on the same lookup,
// so a key is never admitted twice.
//
// A block that is gone (its run merged or expired since the filter was
// probed) makes the lookup re-read the bucket's manifest and probe
// again; a lookup that cannot finish (the store failing) answers its
// waiters ErrResourceExhausted: they retry, nothing was accepted. A
// block that fails its checksum on every read halts the engine.

// keyLookup is a lookup in flight and the submissions waiting on it.
type keyLookup struct {
	waiters []pendingSubmit
}

type pendingSubmit struct {
	in   Unit
	done func(error)
}

// park keeps a submission for after a lookup: the submitter may release
// its batches once Submit returns, so the wait holds a reference.
func park(in Unit, done func(error)) pendingSubmit {
	for _, b := range in.Batches {
		b.Retain()
	}
	return pendingSubmit{in, done}
}

// lookupKey takes the submission if its key needs a lookup — joining
// one in flight, or starting one — and reports whether it did.
func (e *Engine) lookupKey(in Unit, done func(error)) bool {
	if in.IdempotencyKey == "" {
		e.broken("a key lookup is for a unit with an idempotency key: unit for %s has none", in.Key)
		e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err))
		return true
	}
	h := segment.KeyHashOf(in.IdempotencyKey)
	if l := e.lookups[h]; l != nil {
		e.mark(MarkDuplicateJoined)
		l.waiters = append(l.waiters, park(in, done))
		return true
	}
	cands := e.keys.candidates(h)
	if len(cands) == 0 {
		return false
	}
	l := &keyLookup{waiters: []pendingSubmit{park(in, done)}}
	e.lookups[h] = l
	e.stats.KeyLookups++
	e.searchBlocks(h, cands, 0, func(found bool, err error) {
		if e.lookups[h] != l {
			// Its waiters are still answered below (resubmitted to a
			// failed engine: refused).
			e.broken("one lookup per key, ended once: the lookup of %x ends with %d waiting, not the one in flight", h, len(l.waiters))
		} else {
			delete(e.lookups, h)
		}
		for _, w := range l.waiters {
			switch {
			case err != nil:
				e.stats.UnitsRejected++
				e.answer(w.done, fmt.Errorf("%w: idempotency key lookup: %v", ErrResourceExhausted, err))
			case found:
				e.mark(MarkDuplicateCommitted)
				e.stats.UnitsDuplicate++
				e.answer(w.done, nil)
			default:
				e.submit(w.in, w.done, true)
			}
			for _, b := range w.in.Batches {
				b.Release() // park's reference; a unit taken holds its own
			}
		}
		e.checkClosed()
	})
	return true
}

// searchBlocks reads the candidate blocks in turn until one holds h.
func (e *Engine) searchBlocks(h segment.KeyHash, cands []blockRef, attempt int, done func(found bool, err error)) {
	if attempt >= AttemptsMax {
		e.broken("a key lookup refreshes its bucket at most AttemptsMax times: attempt %d, limit %d", attempt, AttemptsMax)
		done(false, e.err)
		return
	}
	if len(cands) == 0 {
		done(false, nil)
		return
	}
	c := cands[0]
	if blocks := segment.KeyRunBlocks(c.run.ref.Count); c.block < 0 || c.block >= blocks {
		e.broken("a lookup reads a block of its run: block %d of %d, run %d-%d of bucket %d", c.block, blocks, c.run.ref.Epoch, c.run.ref.Seq, c.bucket.num)
		done(false, e.err)
		return
	}
	e.readBlock(c, func(es entryList, err error) {
		switch {
		case errors.Is(err, ErrNotFound) && attempt+1 < AttemptsMax:
			e.mark(MarkIdemBlockGone)
			e.refreshBucket(c.bucket, attempt, func() {
				e.searchBlocks(h, e.keys.candidates(h), attempt+1, done)
			})
		case errors.Is(err, ErrCorrupt):
			e.failClosed(err) // raises the alert
			done(false, err)
		case err != nil:
			done(false, err)
		case es.has(h):
			done(true, nil)
		default:
			e.mark(MarkIdemFalseHit)
			e.stats.KeyFalseHits++
			e.searchBlocks(h, cands[1:], attempt, done)
		}
	})
}

// entryList is a block's entries, sorted by hash.
type entryList []segment.KeyEntry

func (l entryList) has(h segment.KeyHash) bool {
	lo, hi := 0, len(l)
	for lo < hi {
		m := (lo + hi) / 2
		switch c := compareHash(l[m].Hash, h); {
		case c == 0:
			return true
		case c < 0:
			lo = m + 1
		default:
			hi = m
		}
	}
	return false
}

// readBlock GETs and verifies one block of a run.
func (e *Engine) readBlock(c blockRef, done func(entryList, error)) {
	key := e.layout.IdemRunKey(c.bucket.num, c.run.ref.Epoch, c.run.ref.Seq)
	start, n := segment.KeyRunBlockRange(c.run.ref.Count, c.block)
	var es []segment.KeyEntry
	e.stats.KeyBlockReads++
	e.mark(MarkIdemLookup)
	in := GetObjectInput{Key: key, Range: &ByteRange{Start: start, Length: n}, Limit: n}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		es, err = segment.DecodeKeyRunBlock(key, raw, c.run.meta, c.block)
		return err
	}, func(_ []byte, _ ObjectInfo, err error) {
		if err != nil && !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("read idempotency-key run %s block %d: %w", key, c.block, err)
		}
		done(es, err)
	})
}

// refreshBucket re-reads b's manifest for a lookup that found a run
// gone. A bucket busy with a write of ours is left alone (that write
// re-reads it if it fails): the lookup probes again after a backoff.
// INVARIANT: no read of a manifest is in flight while a write of it is —
// a read answered after the write landed would forget the write's run.
// b.busy holds the bucket for either, and b.reading says it is a read: a
// read waits while busy is set (here); a round's write that finds a read
// holding it waits too (writeBucket: the round picked the bucket before
// the read took it), and a write that finds a write holding it fails
// closed (writeBucket, mergeKeys).
func (e *Engine) refreshBucket(b *keyBucket, attempt int, done func()) {
	if b.busy || !e.keys.live(b) {
		e.p.Timers.AfterFunc(e.backoff(attempt), done)
		return
	}
	if len(b.flight) > 0 {
		// A free bucket has no keys in flight (keyStore.add's INVARIANT):
		// a read that took it with some would hold it under a write's keys.
		e.broken("a key bucket is held by a read only while busy, with no keys in flight: bucket %d taken by a read with %d keys in flight", b.num, len(b.flight))
		done()
		return
	}
	b.busy, b.reading = true, true
	e.readBucket(e.keys, b, func(err error) {
		if !b.busy || !b.reading {
			e.broken("a bucket stays held while its manifest is read: bucket %d answered (%v), busy %t, reading %t", b.num, err, b.busy, b.reading)
			done()
			return
		}
		if len(b.flight) > 0 {
			// Keys went in flight under the read: a write took the bucket
			// the read held, and freeing it here would free it under them.
			e.broken("a key bucket is held by a read only while busy, with no keys in flight: bucket %d answered (%v) with %d keys in flight", b.num, err, len(b.flight))
			done()
			return
		}
		b.busy, b.reading = false, false
		if errors.Is(err, ErrCorrupt) {
			e.failClosed(err) // raises the alert
		}
		done()
	})
}
