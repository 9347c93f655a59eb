package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// The key store's objects (keystore.go), per time bucket b:
//
//	{root}/_idem/{b}               manifest: the runs of the bucket (segment.EncodeKeyManifest)
//	{root}/_idem/{b}/{epoch}-{seq} a run: immutable sorted key hashes (segment.EncodeKeyRun)
//
// A write round (checkpoint.go) writes, for each bucket with recent keys,
// one new run of them (a PUT with If-None-Match: its name is new) and
// then the manifest listing it (a PUT conditional on the version last
// read or written). Only the manifest's landing makes the keys durable;
// a run whose manifest write failed is an orphan, left to expiry and the
// sweeper. A refused or unheard manifest write re-reads the manifest
// (the next attempt starts from what another writer added) and the keys
// go back to recent.
//
// Writers only ever add runs to a manifest, or replace runs by one run
// holding all their keys (keystore_merge.go): so whatever one writer
// made durable stays listed whatever another does.
//
// Recovery reads, by name, the manifest of every bucket that can hold an
// unexpired key (idemBucketsToRead), then the meta of each run they list
// (one ranged GET each): its cost is the number of key objects, not of
// keys. A bucket object in the old format (an offsets checkpoint holding
// the keys themselves) is read once: its keys become recent, and the
// first round replaces it by a manifest.

// writeKeyBuckets writes every bucket with keys to make durable,
// RecoveryConcurrency at a time; ok reports that every write landed. done
// is not called once the engine has failed closed.
func (e *Engine) writeKeyBuckets(done func(ok bool)) {
	if !e.ckptWriting {
		e.broken("key buckets are written inside a checkpoint round: %d buckets dirty, no round running", len(e.keys.dirty()))
		return
	}
	bs := e.keys.dirty()
	ok := true
	e.forEach(len(bs), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		e.writeBucket(bs[i], func(landed bool) {
			ok = ok && landed
			d(nil)
		})
	}, func(error) {
		if e.state != stateFailed {
			done(ok)
		}
	})
}

// writeBucket writes one run of b's recent keys, then b's manifest.
func (e *Engine) writeBucket(b *keyBucket, done func(landed bool)) { e.writeBucketAfter(b, 0, done) }

// writeBucketAfter is writeBucket after waits waits for a read. The
// round took b when it began (dirty skips a held bucket); with more
// buckets than RecoveryConcurrency, b's write starts only when an
// earlier one ends, and a lookup may have taken b meanwhile to re-read
// its manifest (refreshBucket). The write waits that read out, as the
// read waits out a write: a read answered after the write landed would
// forget the write's run. (A read holds b for AttemptsMax reads of its
// manifest at most, and only a lookup that found a block gone starts one.)
func (e *Engine) writeBucketAfter(b *keyBucket, waits int, done func(landed bool)) {
	if !e.keys.live(b) {
		done(true) // expired since the round began: nothing to keep
		return
	}
	if b.reading && (!b.busy || len(b.flight) > 0) { // INVARIANT: reading only while busy, no keys in flight
		e.broken("a key bucket is held by a read only while busy, with no keys in flight: bucket %d reading, busy %t, %d keys in flight", b.num, b.busy, len(b.flight))
		done(false)
		return
	}
	if b.reading {
		e.mark(MarkIdemWriteWaitsRead)
		e.p.Timers.AfterFunc(e.backoff(min(waits, AttemptsMax)), func() {
			if e.state == stateFailed {
				done(false)
				return
			}
			e.writeBucketAfter(b, waits+1, done)
		})
		return
	}
	if b.busy || len(b.flight) > 0 { // INVARIANT: one manifest write per bucket at a time
		e.broken("one write per key bucket at a time: bucket %d written while busy %t with %d keys in flight", b.num, b.busy, len(b.flight))
		done(false)
		return
	}
	if len(b.runs) >= segment.KeyManifestRunsMax {
		e.mark(MarkIdemManifestFull)
		done(false) // a merge must make room first
		return
	}
	b.busy = true
	finish := func(ok bool) {
		if !b.busy {
			// An end that arrives twice would settle the keys of the
			// bucket's next write, or free it under a write in flight.
			e.broken("a key bucket write ends once, while it holds its bucket: bucket %d ends (landed %t) with %d keys in flight, not busy",
				b.num, ok, len(b.flight))
			done(false)
			return
		}
		if b.reading {
			// busy is a lookup's read: the write's hold ended early and
			// the read took the bucket; freeing it here would free the read's.
			e.broken("a key bucket write ends while it, not a read, holds its bucket: bucket %d ends (landed %t) with %d keys in flight while a read holds it",
				b.num, ok, len(b.flight))
			done(false)
			return
		}
		b.settleFlight(ok)
		b.busy = false
		done(ok)
	}
	entries := b.takeRecent()
	if len(entries) == 0 {
		if !b.rewrite {
			// dirty picked it for recent keys or a rewrite; only a write of
			// ours takes recent keys, and none could while it was not busy.
			e.broken("a key bucket is written for its recent keys or a rewrite: bucket %d with no recent key, no rewrite (%d runs)", b.num, len(b.runs))
			finish(false)
			return
		}
		e.putManifest(b, b.runs, finish) // a rewrite only
		return
	}
	e.putRun(b.num, func() []segment.KeyEntry { return entries }, func(r *keyRun, err error) {
		if err != nil {
			finish(false)
			return
		}
		if b.lists(r) {
			// Its ref is this incarnation's next (epoch, seq): listed
			// already, it would be listed twice, and the manifest's
			// encoder refuses that.
			e.broken("a new key run is not listed yet: bucket %d already lists run %d-%d (%d runs)", b.num, r.ref.Epoch, r.ref.Seq, len(b.runs))
			finish(false)
			return
		}
		e.putManifest(b, insertRun(b.runs, r), func(ok bool) {
			finish(ok || b.lists(r)) // a refused write's re-read shows whether it landed after all
		})
	})
}

// putRun builds a new run of bucket num off the loop — its entries, from
// build, and their encoding: a merge's are a million keys — and PUTs it.
// build must touch only what the caller has handed over to it.
func (e *Engine) putRun(num int64, build func() []segment.KeyEntry, done func(*keyRun, error)) {
	var body []byte
	var meta *segment.KeyRunMeta
	var n int
	var err error
	answered := false
	e.p.Exec.Go(func() {
		entries := build()
		n = len(entries)
		body, meta, err = segment.EncodeKeyRun(entries)
	}, func() {
		if answered {
			// A second answer would name, PUT and list a second run of
			// the same keys under the write that holds the bucket.
			e.broken("the executor answers a key run's encoding once: %d entries of bucket %d answered again", n, num)
			return
		}
		answered = true
		if err != nil {
			e.broken("key runs encode: %d entries of bucket %d: %v", n, num, err)
			done(nil, err)
			return
		}
		r := &keyRun{ref: segment.KeyRunRef{Epoch: e.epoch, Seq: e.keySeq, Count: meta.Count, MinValue: meta.MinValue, Value: meta.Value}, meta: meta}
		e.keySeq++
		in := PutObjectInput{Key: e.layout.IdemRunKey(num, r.ref.Epoch, r.ref.Seq), Body: body, IfNoneMatch: true}
		e.p.Store.PutObject(in, func(_ string, err error) { done(r, err) })
	})
}

// insertRun returns runs with r added in ref order (a new slice).
// REQUIRES: runs sorted by ref, r not among them (the manifest's
// encoder refuses a run listed twice).
func insertRun(runs []*keyRun, r *keyRun) []*keyRun {
	i, found := slices.BinarySearchFunc(runs, r.ref, func(x *keyRun, t segment.KeyRunRef) int {
		switch {
		case x.ref.Less(t):
			return -1
		case t.Less(x.ref):
			return 1
		}
		return 0
	})
	if found {
		panic(fmt.Sprintf("engine: a run is inserted once: run %d-%d (%d keys) listed already at %d of %d runs",
			r.ref.Epoch, r.ref.Seq, r.ref.Count, i, len(runs)))
	}
	return slices.Insert(slices.Clone(runs), i, r)
}

// putManifest writes b's manifest listing runs, conditional on the
// version last seen. On success runs become b's; a refused or unheard
// write re-reads the manifest into b and reports false.
func (e *Engine) putManifest(b *keyBucket, runs []*keyRun, done func(ok bool)) {
	if !b.busy {
		// busy keeps a read of the manifest from answering after this
		// write landed, which would forget the write's run (refreshBucket).
		e.broken("a manifest is written while its bucket is held: bucket %d with %d runs written, not busy", b.num, len(runs))
		done(false)
		return
	}
	if b.reading {
		// A write (a round's or a merge's) holds the bucket while it
		// writes: one that finds a lookup's read holding it waits first
		// (writeBucket), and a read takes only a free bucket.
		e.broken("a manifest is written by the write that holds its bucket, not under a read: bucket %d with %d runs written while a read holds it", b.num, len(runs))
		done(false)
		return
	}
	refs := make([]segment.KeyRunRef, len(runs))
	for i, r := range runs {
		refs[i] = r.ref
	}
	body, err := segment.EncodeKeyManifest(e.epoch, refs)
	if err != nil {
		e.broken("key manifests encode: bucket %d with %d runs: %v", b.num, len(runs), err)
		done(false)
		return
	}
	in := PutObjectInput{Key: e.layout.IdemBucketKey(b.num), Body: body, IfMatch: b.etag, IfNoneMatch: b.etag == ""}
	answered := false
	e.p.Store.PutObject(in, func(etag string, err error) {
		if answered {
			// A second answer would install its runs and version over a
			// later write's, or end this write twice.
			e.broken("the store answers a manifest write once: bucket %d with %d runs answered again (%v)", b.num, len(runs), err)
			return
		}
		answered = true
		if !b.busy {
			e.broken("a bucket stays held until its manifest write answers: bucket %d answered (%v), not busy", b.num, err)
			done(false)
			return
		}
		if b.reading {
			// busy is a read's, not this write's: the write's hold ended
			// early and a lookup took the bucket; its runs would be lost
			// to the read's answer.
			e.broken("a bucket stays held by its write until the manifest write answers: bucket %d answered (%v) while a read holds it", b.num, err)
			done(false)
			return
		}
		if err == nil {
			b.etag, b.runs, b.rewrite = etag, runs, false
			if err := checkRunMetas(b.num, b.runs); err != nil {
				// Lookups probe every listed run's filter: a run a write
				// lists carries it, as one a read lists does (loadRuns).
				e.failClosed(err)
				done(false)
				return
			}
			done(true)
			return
		}
		e.mark(MarkCheckpointConflict)
		e.readBucket(e.keys, b, func(err error) {
			if errors.Is(err, ErrCorrupt) {
				e.failClosed(err) // raises the alert
			}
			done(false)
		})
	})
}

// readBucket GETs the manifest of b (a bucket of s) and the meta of
// every run it lists that b does not hold yet; b then lists exactly
// those runs. A listed run that is missing was merged away since the
// manifest was read — the manifest is read again — or, still listed
// after AttemptsMax reads, lost: it is dropped and the manifest
// rewritten.
//
// REQUIRES: a bucket of the engine's own store is held (busy) by the
// caller (refreshBucket's INVARIANT); a store recovery reads has no
// writes.
func (e *Engine) readBucket(s *keyStore, b *keyBucket, done func(error)) {
	if s == e.keys && !b.busy {
		e.broken("a manifest of the key store is read while its bucket is held: bucket %d read, not busy (%d runs)", b.num, len(b.runs))
		done(e.err)
		return
	}
	e.readBucketTry(s, b, 0, done)
}

func (e *Engine) readBucketTry(s *keyStore, b *keyBucket, attempt int, done func(error)) {
	if attempt >= AttemptsMax {
		e.broken("a key bucket is read at most AttemptsMax times: bucket %d, attempt %d, limit %d", b.num, attempt, AttemptsMax)
		done(e.err)
		return
	}
	key := e.layout.IdemBucketKey(b.num)
	var refs []segment.KeyRunRef
	var legacy segment.Offsets
	in := GetObjectInput{Key: key, Limit: max(segment.KeyManifestBytesMax, segment.CheckpointBytesMax)}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		refs, legacy = nil, nil
		if segment.IsCheckpoint(raw) {
			_, legacy, err = segment.DecodeCheckpoint(key, raw)
			return err
		}
		_, refs, err = segment.DecodeKeyManifest(key, raw)
		return err
	}, func(_ []byte, info ObjectInfo, err error) {
		if s == e.keys && !b.busy {
			// What is read goes into b: a read answered after the hold
			// ended could forget a write's run (refreshBucket).
			e.broken("a bucket stays held while its manifest is read: bucket %d answered (attempt %d, %v), not busy", b.num, attempt, err)
			done(e.err)
			return
		}
		switch {
		case errors.Is(err, ErrNotFound):
			if b.etag != "" && len(b.runs) > 0 {
				e.mark(MarkIdemManifestLost)
				b.rewrite = true // list our runs again: they may still exist
			}
			b.etag = ""
			done(nil)
		case err != nil:
			done(fmt.Errorf("read idempotency-key manifest %s: %w", key, err))
		case legacy != nil:
			e.mark(MarkCheckpointOldFormat)
			addLegacyKeys(s, legacy)
			b.etag, b.rewrite = info.ETag, true
			done(nil)
		default:
			e.loadRuns(b, refs, func(runs []*keyRun, lost bool, err error) {
				if s == e.keys && !b.busy {
					// Its runs' metas were read while the bucket was held
					// no more: b.runs would be set under another write.
					e.broken("a bucket stays held while its manifest's runs are read: bucket %d, %d runs listed, answered (attempt %d), not busy", b.num, len(refs), attempt)
					done(e.err)
					return
				}
				if err == nil && lost && attempt+1 < AttemptsMax {
					e.readBucketTry(s, b, attempt+1, done) // merged away meanwhile?
					return
				}
				if err == nil {
					b.runs, b.etag = runs, info.ETag
					b.rewrite = b.rewrite || lost
				}
				done(err)
			})
		}
	})
}

// addLegacyKeys adds to s the idempotency keys of an old-format object.
func addLegacyKeys(s *keyStore, o segment.Offsets) {
	for _, x := range o {
		if k, ok := strings.CutPrefix(x.Key, idemPrefix); ok {
			s.add(segment.KeyHashOf(k), x.Value)
		}
	}
}

// loadRuns returns the runs refs names, reusing b's metas and reading
// the others', RecoveryConcurrency at a time. lost reports runs dropped
// because their object is missing.
func (e *Engine) loadRuns(b *keyBucket, refs []segment.KeyRunRef, done func(runs []*keyRun, lost bool, err error)) {
	if len(refs) > segment.KeyManifestRunsMax {
		e.broken("a manifest lists at most KeyManifestRunsMax runs (its decoder's bound): bucket %d, %d runs, limit %d", b.num, len(refs), segment.KeyManifestRunsMax)
		done(nil, false, e.err)
		return
	}
	runs := make([]*keyRun, len(refs))
	var missing []int
	for i, ref := range refs {
		if j := slices.IndexFunc(b.runs, func(r *keyRun) bool { return r.ref == ref }); j >= 0 {
			runs[i] = b.runs[j]
		} else {
			missing = append(missing, i)
		}
	}
	e.forEach(len(missing), e.cfg.RecoveryConcurrency, func(k int, d func(error)) {
		i := missing[k]
		e.readRunMeta(b.num, refs[i], func(m *segment.KeyRunMeta, err error) {
			switch {
			case errors.Is(err, ErrNotFound):
				e.mark(MarkIdemRunLost)
				d(nil)
			case err != nil:
				d(err)
			default:
				runs[i] = &keyRun{ref: refs[i], meta: m}
				d(nil)
			}
		})
	}, func(err error) {
		if err != nil {
			done(nil, false, err)
			return
		}
		kept := slices.DeleteFunc(runs, func(r *keyRun) bool { return r == nil })
		if err := checkRunMetas(b.num, kept); err != nil {
			e.failClosed(err)
			done(nil, false, err)
			return
		}
		done(kept, len(kept) < len(refs), nil)
	})
}

// checkRunMetas: every run a bucket lists carries its meta (lookups
// probe its filter) of the count its ref records. O(runs), at most
// KeyManifestRunsMax, once per manifest read.
func checkRunMetas(num int64, runs []*keyRun) error {
	for i, r := range runs {
		if r.meta == nil || r.meta.Count != r.ref.Count {
			count := -1
			if r.meta != nil {
				count = r.meta.Count
			}
			return invariantError("a listed key run carries its meta: bucket %d, run %d of %d (%d-%d) counts %d keys, its meta %d (-1: none)",
				num, i, len(runs), r.ref.Epoch, r.ref.Seq, r.ref.Count, count)
		}
	}
	return nil
}

// readRunMeta GETs and decodes a run's meta section.
func (e *Engine) readRunMeta(num int64, ref segment.KeyRunRef, done func(*segment.KeyRunMeta, error)) {
	if ref.Count < 1 || ref.Count > segment.KeyRunEntriesMax {
		// The manifest's decoder bounds it: the read's size derives from it.
		e.broken("a run's count is bounded before its meta is read: bucket %d, run %d-%d of %d keys, limit 1..%d",
			num, ref.Epoch, ref.Seq, ref.Count, segment.KeyRunEntriesMax)
		done(nil, e.err)
		return
	}
	key := e.layout.IdemRunKey(num, ref.Epoch, ref.Seq)
	n := segment.KeyRunMetaBytes(ref.Count)
	var m *segment.KeyRunMeta
	in := GetObjectInput{Key: key, Range: &ByteRange{Start: 0, Length: n}, Limit: n}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		m, err = segment.DecodeKeyRunMeta(key, raw, ref.Count)
		if err == nil && (m.MinValue != ref.MinValue || m.Value != ref.Value) {
			err = fmt.Errorf("%w: run %s holds values %d..%d, its manifest says %d..%d", ErrCorrupt, key, m.MinValue, m.Value, ref.MinValue, ref.Value)
		}
		return err
	}, func(_ []byte, _ ObjectInfo, err error) {
		if err != nil && !errors.Is(err, ErrNotFound) {
			err = fmt.Errorf("read idempotency-key run %s: %w", key, err)
		}
		done(m, err)
	})
}

// readKeyStore reads, for recovery, the buckets idemBucketsToRead names
// into s, RecoveryConcurrency at a time.
func (e *Engine) readKeyStore(s *keyStore, done func(error)) {
	lo, hi := e.idemBucketsToRead(s)
	// Recovery reads ⌈window / width⌉ + 3 buckets at most (checkpoint.go):
	// the bound that keeps this loop, and recovery's cost, finite.
	windowMs := uint64(max(e.cfg.IdempotencyWindow.Milliseconds(), 0))
	if limit := int64((windowMs+s.widthMs-1)/s.widthMs) + 3; lo < 0 || hi < lo || hi-lo+1 > limit {
		e.broken("recovery reads at most ⌈window / width⌉ + 3 key buckets: buckets %d..%d, limit %d", lo, hi, limit)
		done(e.err)
		return
	}
	var bs []*keyBucket
	for n := lo; n <= hi; n++ {
		bs = append(bs, s.bucket(n))
	}
	e.forEach(len(bs), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		e.readBucket(s, bs[i], d)
	}, done)
}

// expireKeys drops the expired buckets and deletes the objects of those
// that had some, once each: a failure, or a write of ours still in
// flight landing afterwards, leaves them to the sweeper.
func (e *Engine) expireKeys() {
	dropped := e.keys.expire(e.idemCutoff())
	for _, b := range dropped {
		if len(b.runs) > 0 || len(b.recent) > 0 {
			e.mark(MarkIdempotencyExpired)
		}
		if b.etag != "" {
			e.bestEffort().DeleteObject(e.layout.IdemBucketKey(b.num), func(error) {})
		}
		for _, r := range b.runs {
			e.bestEffort().DeleteObject(e.layout.IdemRunKey(b.num, r.ref.Epoch, r.ref.Seq), func(error) {})
		}
	}
}
