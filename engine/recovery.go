package engine

import (
	"errors"
	"fmt"
	"slices"

	"github.com/skipprd/skipprd/engine/segment"
)

// Recovery (docs/DESIGN.md §6.5) is one procedure for every crash window, and it
// never trusts local disk:
//
//  1. Claim the next writer epoch (epoch.go, writer.go).
//  2. Wait FenceWait, so that requests a dead or superseded writer left
//     in flight have landed or died, and everything that landed before
//     the claim shows in LIST.
//  3. LIST the segments prefix, page by page; group keys by snapshot id.
//  4. Seal every older epoch at the highest marker sequence listed
//     (writer.go): from now on later markers of those epochs do not count.
//  5. For every listed marker that counts: GET and verify it (it carries
//     the index and offsets, so no body is read). A marker whose body the
//     listing does not show is checked with a HEAD of the body key; a
//     marker listed but gone (a lingering deleted key) is skipped.
//  6. Read the owned segments' bitmaps and the offsets checkpoint
//     (checkpoint.go). Register the owned segments, max-merge their
//     offsets into the view, open ingest. Then sweep orphans in the
//     background (sweep.go).
//
// Requests: 2 for the epoch claim, one per LIST page, at most one for the
// seals, one GET per listed marker and one HEAD per marker whose body was
// not listed, one GET per listed bitmap — proportional to the live
// segments, never to the history — and for the offsets checkpoint, a GET
// of _offsets, of each of IdemBucketsPerWindow + 3 or so manifests, and
// of each run they list: the key objects, never the keys.

// listedSegment gathers what LIST showed of one snapshot id.
type listedSegment struct {
	id                   SnapshotID
	dir                  string
	body, marker, bitmap *ObjectInfo
}

// Start runs recovery and then opens ingest. done runs once: nil when the
// engine is ready, or the error that made it fail closed (corruption, a
// newer writer), or ErrClosed if Close was called meanwhile. Transient
// store failures restart recovery after a backoff; they do not reach done.
func (e *Engine) Start(done func(error)) {
	if done == nil {
		panic("engine: Start without its answer") // a caller's contract, as Close's
	}
	if e.state != stateNew {
		panic(fmt.Sprintf("engine: Start in state %d", e.state))
	}
	e.state = stateRecovering
	e.dlog.recoverLog(0, func(err error) {
		if err != nil {
			err = fmt.Errorf("recovery: disk WAL: %w", err)
			e.failClosed(err)
			done(err)
			return
		}
		e.recover(0, done)
	})
}

// recoveryStage is the step a recovery round is in: each step's callback
// asserts it on entry and moves it on, so the procedure above is a
// sequence of named methods rather than nested closures.
type recoveryStage uint8

const (
	recoveryClaiming recoveryStage = iota
	recoveryFenceWaiting
	recoveryListing
	recoverySealing
	recoveryReadingMarkers
	recoveryReadingBitmaps
	recoveryReadingCheckpoint
	recoveryFinished // done was called, or the round failed and another may start
)

var recoveryStageNames = [...]string{"claiming", "fence-waiting", "listing", "sealing",
	"reading-markers", "reading-bitmaps", "reading-checkpoint", "finished"}

func (s recoveryStage) String() string { return recoveryStageNames[s] }

// recovery is one round of the procedure: what each step read, for the
// next. A failed round ends (finished) and a new one starts after a
// backoff; nothing is shared between rounds.
type recovery struct {
	e     *Engine
	round int
	stage recoveryStage
	done  func(error)
	start uint64 // e.stats.Requests when the round began

	claim   writerRecord // the writer record as claimed (step 1)
	etag    string       // its version, for the seals' If-Match
	listing []*listedSegment
	sealed  writerRecord // the record after the seals (step 4)
	owned   []Segment
	bitmaps []*segment.Bitmap
	etags   []string
}

func (e *Engine) recover(round int, done func(error)) {
	if round < 0 || e.state == stateNew || e.state == stateReady || e.state == stateClosing {
		// A round runs only after Start, before ingest opens (or after a
		// Close meanwhile, which finishRecovery answers): another would
		// claim a new epoch under a running writer.
		e.broken("recovery rounds run while recovering: round %d in state %d", round, e.state)
		done(e.err)
		return
	}
	e.stats.RecoveryRuns++
	r := &recovery{e: e, round: round, done: done, start: e.stats.Requests}
	e.claimEpoch(r.claimed)
}

// checkStage asserts the stage a step's callback completes, and moves
// the round to the next. A round is never in two steps at once: a
// callback that arrives in another stage is a broken invariant.
func (r *recovery) checkStage(want, next recoveryStage) bool {
	if r.stage != want {
		r.e.broken("a recovery step completes the stage it started: round %d in stage %s, a callback of %s arrived", r.round, r.stage, want)
		return false
	}
	r.stage = next
	return true
}

// fail ends the round: recoveryFailed retries or fails closed.
func (r *recovery) fail(err error) {
	r.stage = recoveryFinished
	r.e.recoveryFailed(r.round, err, r.done)
}

// claimed completes step 1 (claimEpoch) and waits FenceWait (step 2).
func (r *recovery) claimed(rec writerRecord, etag string, err error) {
	if !r.checkStage(recoveryClaiming, recoveryFenceWaiting) {
		return
	}
	if err != nil {
		r.fail(err)
		return
	}
	if rec.epoch == 0 || rec.floor > rec.epoch {
		r.fail(invariantError("a claimed epoch is a writer's, at or above its floor: epoch %d, floor %d (round %d)", rec.epoch, rec.floor, r.round))
		return
	}
	e := r.e
	r.claim, r.etag = rec, etag
	e.epoch, e.writerNonce, e.nextSeq = rec.epoch, rec.nonce, 1
	e.origin = segment.Origin{WAL: rec.wal, Pipeline: e.cfg.Pipeline}
	if err := e.origin.Validate(); err != nil {
		e.broken("a claimed epoch has the log's identity: epoch %d: %v", rec.epoch, err)
		r.stage = recoveryFinished
		r.done(e.err)
		return
	}
	e.p.Timers.AfterFunc(e.cfg.FenceWait, r.fenceWaited)
}

// fenceWaited completes step 2 and lists the segments (step 3).
func (r *recovery) fenceWaited() {
	if r.checkStage(recoveryFenceWaiting, recoveryListing) {
		r.e.listSegments(r.listed)
	}
}

// listed completes step 3 and seals the older epochs (step 4).
func (r *recovery) listed(listing []*listedSegment, err error) {
	if !r.checkStage(recoveryListing, recoverySealing) {
		return
	}
	if err != nil {
		r.fail(err)
		return
	}
	if err := checkListing(listing); err != nil {
		r.fail(err)
		return
	}
	r.listing = listing
	r.e.sealEpochs(r.claim, r.etag, listing, r.sealedEpochs)
}

// sealedEpochs completes step 4 and reads the markers that count (step 5).
func (r *recovery) sealedEpochs(sealed writerRecord, err error) {
	if !r.checkStage(recoverySealing, recoveryReadingMarkers) {
		return
	}
	if err != nil {
		r.fail(err)
		return
	}
	if sealed.epoch != r.claim.epoch || sealed.nonce != r.claim.nonce {
		r.fail(invariantError("the seals keep the claim: sealed epoch %d nonce %x, claimed epoch %d nonce %x",
			sealed.epoch, sealed.nonce, r.claim.epoch, r.claim.nonce))
		return
	}
	r.sealed = sealed
	r.e.readMarkers(validMarkers(r.listing, sealed), r.markersRead)
}

// markersRead completes step 5 and reads the owned segments' bitmaps
// (step 6).
func (r *recovery) markersRead(owned []Segment, err error) {
	if !r.checkStage(recoveryReadingMarkers, recoveryReadingBitmaps) {
		return
	}
	if err != nil {
		r.fail(err)
		return
	}
	if err := checkOwned(owned, len(r.listing)); err != nil {
		r.fail(err)
		return
	}
	r.owned = owned
	r.e.readBitmaps(owned, r.listing, r.bitmapsRead)
}

// bitmapsRead reads the offsets checkpoint (step 6, continued).
func (r *recovery) bitmapsRead(bitmaps []*segment.Bitmap, etags []string, err error) {
	if !r.checkStage(recoveryReadingBitmaps, recoveryReadingCheckpoint) {
		return
	}
	if err != nil {
		r.fail(err)
		return
	}
	if len(bitmaps) != len(r.owned) || len(etags) != len(r.owned) {
		r.e.broken("recovery reads one bitmap per owned segment: %d owned, %d bitmaps, %d versions", len(r.owned), len(bitmaps), len(etags))
		r.stage = recoveryFinished
		r.done(r.e.err)
		return
	}
	for i, b := range bitmaps {
		if n := len(r.owned[i].Index.Entries); b != nil && b.Len() != n {
			r.fail(invariantError("a segment's bitmap has one bit per PART: segment %s, %d bits, %d parts", r.owned[i].ID, b.Len(), n))
			return
		}
	}
	r.bitmaps, r.etags = bitmaps, etags
	r.e.readCheckpoint(r.checkpointRead)
}

// checkpointRead completes the reads: the engine registers what they
// found and opens (finishRecovery).
func (r *recovery) checkpointRead(view *offsetsView, keys *keyStore, err error) {
	if !r.checkStage(recoveryReadingCheckpoint, recoveryFinished) {
		return
	}
	if err != nil {
		r.fail(err)
		return
	}
	if view == nil || keys == nil || view.inv == nil || keys.inv == nil {
		r.fail(invariantError("a checkpoint read gives the offsets view and the key store, each failing closed on a broken invariant: view %t, keys %t",
			view != nil && view.inv != nil, keys != nil && keys.inv != nil))
		return
	}
	e := r.e
	rec := recovered{owned: r.owned, bitmaps: r.bitmaps, bitmapETags: r.etags, view: view, keys: keys}
	e.finishRecovery(rec, r.listing, r.sealed, e.stats.Requests-r.start, r.done)
}

// recovered is what recovery read: the owned segments, their bitmaps
// (nil where unreadable) and the offsets checkpoint.
type recovered struct {
	owned       []Segment
	bitmaps     []*segment.Bitmap
	bitmapETags []string
	view        *offsetsView // the offsets checkpoint (checkpoint.go)
	keys        *keyStore    // the idempotency keys (keystore.go)
}

func (e *Engine) finishRecovery(r recovered, listing []*listedSegment, sealed writerRecord, ops uint64, done func(error)) {
	if e.state != stateRecovering {
		done(ErrClosed) // Close was called during recovery
		return
	}
	if sealed.epoch != e.epoch || sealed.nonce != e.writerNonce {
		e.broken("recovery finishes under the epoch it claimed: sealed epoch %d nonce %x, engine epoch %d nonce %x",
			sealed.epoch, sealed.nonce, e.epoch, e.writerNonce)
		done(e.err)
		return
	}
	e.succeeded(troubleRecovery)
	e.open(r)
	if e.state == stateFailed {
		done(e.err) // a check failed while registering: no sweep, no compaction
		return
	}
	e.writer = sealed
	e.stats.RecoveryOps = ops
	e.dlog.replay(e.ownedByID())
	if e.state == stateFailed {
		done(e.err) // a check failed while replaying: Start fails, no sweep, no compaction
		return
	}
	done(nil)
	e.sweep(listing, sealed)
	e.sweepLater()
	e.compact()
	e.pollMemory()
}

// sealEpochs writes the seals for the epochs this recovery supersedes (see
// writer.go) with If-Match on the claim's ETag: if another writer claimed
// in between, this one is the stale one and fails closed.
func (e *Engine) sealEpochs(rec writerRecord, etag string, listing []*listedSegment, done func(writerRecord, error)) {
	logged := e.dlog.logIDs()
	if err := checkLoggedEpochs(rec, logged); err != nil {
		done(rec, err)
		return
	}
	sealed := rec.sealed(listing, logged)
	if err := checkSealed(rec, sealed); err != nil {
		done(sealed, err)
		return
	}
	if sealed.floor == rec.floor && slices.Equal(sealed.seals, rec.seals) {
		done(sealed, nil)
		return
	}
	if err := sealed.check(); err != nil {
		done(sealed, err) // never write a record that breaks what it promises
		return
	}
	e.p.Store.PutObject(PutObjectInput{Key: e.layout.WriterKey(), Body: sealed.encode(), IfMatch: etag}, func(_ string, err error) {
		if err == nil {
			done(sealed, nil)
			return
		}
		// Refused or unheard: read what is there.
		e.mark(MarkSealRetry)
		e.readWriter(func(cur writerRecord, _ ObjectInfo, rerr error) {
			switch {
			case rerr != nil:
				done(sealed, rerr)
			case cur.epoch != rec.epoch || cur.nonce != rec.nonce:
				done(sealed, fmt.Errorf("%w: writer epoch %d claimed while recovering epoch %d", ErrFenced, cur.epoch, rec.epoch))
			case cur.floor != sealed.floor || !slices.Equal(cur.seals, sealed.seals):
				done(sealed, fmt.Errorf("write seals: %w", err)) // ours, unsealed: retry recovery
			default:
				done(sealed, nil) // our ambiguous PUT landed
			}
		})
	})
}

// checkSealed: sealing moves the floor up to the claimed epoch and adds
// seals, and changes nothing else — the claim stays, and a seal already
// written never moves (another writer may have trusted it). O(seals),
// once per recovery round.
func checkSealed(rec, sealed writerRecord) error {
	if sealed.epoch != rec.epoch || sealed.nonce != rec.nonce || sealed.wal != rec.wal || sealed.floor < rec.floor {
		return invariantError("sealing keeps the claim and raises the floor: epoch %d→%d, nonce %x→%x, wal changed %t, floor %d→%d",
			rec.epoch, sealed.epoch, rec.nonce, sealed.nonce, sealed.wal != rec.wal, rec.floor, sealed.floor)
	}
	i := 0
	for _, old := range rec.seals {
		for i < len(sealed.seals) && sealed.seals[i].epoch < old.epoch {
			i++
		}
		if i < len(sealed.seals) && sealed.seals[i].epoch == old.epoch && sealed.seals[i].seq != old.seq {
			return invariantError("a seal never moves: epoch %d sealed at %d, resealed at %d", old.epoch, old.seq, sealed.seals[i].seq)
		}
	}
	return nil
}

// checkListing: a listing is in ascending snapshot-id order, one entry
// per id (sortedListing), each with a key of its own. O(listing), once
// per round.
func checkListing(listing []*listedSegment) error {
	for i, ls := range listing {
		if ls.body == nil && ls.marker == nil && ls.bitmap == nil {
			return invariantError("a listed snapshot id has a key: %s at %d of %d has none", ls.id, i, len(listing))
		}
		if i > 0 && listing[i-1].id.Compare(ls.id) >= 0 {
			return invariantError("a listing in ascending id order: %s at %d after %s", ls.id, i, listing[i-1].id)
		}
	}
	return nil
}

// checkOwned: the owned segments are listed markers, in ascending id
// order (register takes them so), each with its index. O(owned), once
// per round.
func checkOwned(owned []Segment, listed int) error {
	if len(owned) > listed {
		return invariantError("owned segments are listed ones: %d owned, %d listed", len(owned), listed)
	}
	for i, s := range owned {
		if s.Index == nil {
			return invariantError("an owned segment has its marker's index: %s at %d of %d has none", s.ID, i, len(owned))
		}
		if i > 0 && owned[i-1].ID.Compare(s.ID) >= 0 {
			return invariantError("owned segments in ascending id order: %s at %d after %s", s.ID, i, owned[i-1].ID)
		}
	}
	return nil
}

// validMarkers keeps the listed segments whose marker counts.
func validMarkers(listing []*listedSegment, w writerRecord) []*listedSegment {
	var out []*listedSegment
	for _, ls := range listing {
		if ls.marker != nil && w.valid(ls.id) {
			out = append(out, ls)
		}
	}
	return out
}

func (e *Engine) recoveryFailed(round int, err error, done func(error)) {
	if err == nil {
		panic(fmt.Sprintf("engine: recovery round %d failed without an error", round))
	}
	err = fmt.Errorf("recovery: %w", err)
	if errors.Is(err, ErrCorrupt) || errors.Is(err, ErrFenced) || errors.Is(err, ErrInvariant) {
		e.failClosed(err)
		done(err)
		return
	}
	lasted, _ := e.troubleFor(troubleRecovery)
	giveUp := errors.Is(err, ErrRefused) || e.cfg.RecoveryGiveUp > 0 && lasted >= e.cfg.RecoveryGiveUp
	e.recordFailure(troubleRecovery, err, !giveUp) // the give-up's error says this one
	if giveUp {
		e.mark(MarkRecoveryGaveUp)
		err = fmt.Errorf("%w after %d attempts over %v: %w", ErrRecoveryGaveUp, round+1, lasted, err)
		e.failClosed(err)
		done(err)
		return
	}
	e.mark(MarkRecoveryRetry)
	e.p.Timers.AfterFunc(e.backoff(round), func() { e.recover(round+1, done) })
}

// open rebuilds the offsets view (checkpoint, then every owned marker),
// registers the owned segments for compaction — continuing from their
// bitmaps — and opens ingest.
func (e *Engine) open(r recovered) {
	if e.state != stateRecovering || len(r.bitmaps) != len(r.owned) || len(r.bitmapETags) != len(r.owned) {
		e.broken("recovery opens once, with a bitmap per owned segment: state %d, %d owned, %d bitmaps, %d versions",
			e.state, len(r.owned), len(r.bitmaps), len(r.bitmapETags))
		return
	}
	e.committed, e.keys = r.view, r.keys
	e.state = stateReady
	e.recovered = true
	defer e.recoveredDone()
	for i, s := range r.owned {
		e.mergeCommitted(s.Index.Offsets)
		bm := r.bitmaps[i]
		keep := bm == nil
		if !keep && bm.Count() > 0 {
			e.mark(MarkResumedFromBitmap)
		}
		if keep {
			e.mark(MarkBitmapUnreadable)
			e.alert(AlertBitmapUnreadable, fmt.Errorf("%w: completion bitmap of segment %s is unreadable: the segment will not be deleted", ErrCorrupt, s.ID))
			bm = segment.NewBitmap(len(s.Index.Entries))
		}
		st := newSegState(s, bm)
		st.keep, st.bitmapLost, st.bitmapETag = keep, keep, r.bitmapETags[i]
		st.logPending = e.dlog.holds(s.ID)
		e.register(st)
	}
	if len(e.segs) != len(r.owned) && e.state != stateFailed {
		e.broken("recovery registers every owned segment once: %d registered, %d owned", len(e.segs), len(r.owned))
	}
}

// recoveredDone ends the registration of recovered segments: PARTs found
// applied that no live cut claimed were applied by jobs whose cuts were
// reclaimed; they leave the lanes, and every lane has one open job at
// most.
func (e *Engine) recoveredDone() {
	e.recovered = false
	for _, ln := range e.laneOrder {
		for _, o := range ln.open {
			o.done = nil
		}
		ln.open = slices.DeleteFunc(ln.open, func(o *openJob) bool { return len(o.pieces) == 0 })
		e.checkLaneOpen(ln)
	}
	e.armInterval()
}

// readBitmaps GETs the completion bitmap of every owned segment the
// listing shows one for: after FenceWait, LIST shows every bitmap that
// landed before the claim (step 2), so an unlisted one does not exist
// and is empty — nothing of its segment applied yet. An unreadable one is
// nil: its segment is kept (and alerted on; settleLost).
func (e *Engine) readBitmaps(owned []Segment, listing []*listedSegment, done func([]*segment.Bitmap, []string, error)) {
	listed := make(map[SnapshotID]bool, len(listing))
	for _, ls := range listing {
		if ls.bitmap != nil {
			listed[ls.id] = true
		}
	}
	out := make([]*segment.Bitmap, len(owned))
	etags := make([]string, len(owned))
	e.forEach(len(owned), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		s := owned[i]
		if !listed[s.ID] {
			out[i] = segment.NewBitmap(len(s.Index.Entries))
			e.later(func() { d(nil) })
			return
		}
		e.readBitmap(s, func(b *segment.Bitmap, etag string, err error) { out[i], etags[i] = b, etag; d(err) })
	}, func(err error) { done(out, etags, err) })
}

// readBitmap GETs a segment's bitmap and its version: an empty bitmap
// and "" if there is none; nil (and no error) if it is unreadable.
func (e *Engine) readBitmap(s Segment, done func(*segment.Bitmap, string, error)) {
	key := e.layout.Key(s.Dir, s.ID, KindBitmap)
	var b *segment.Bitmap
	in := GetObjectInput{Key: key, Limit: segment.BitmapBytesMax}
	e.getVerified(in, MarkReadDamaged, func(raw []byte, _ ObjectInfo) (err error) {
		if b, err = segment.DecodeBitmap(key, raw); err == nil && b.Len() != len(s.Index.Entries) {
			err = fmt.Errorf("bitmap %s has %d bits, its segment %d parts", key, b.Len(), len(s.Index.Entries))
		}
		return err
	}, func(_ []byte, info ObjectInfo, err error) {
		switch {
		case errors.Is(err, ErrNotFound):
			done(segment.NewBitmap(len(s.Index.Entries)), "", nil)
		case errors.Is(err, ErrCorrupt):
			done(nil, info.ETag, nil) // unreadable: keep the segment
		case err != nil:
			done(nil, "", fmt.Errorf("read bitmap %s: %w", key, err))
		default:
			done(b, info.ETag, nil)
		}
	})
}

// pollMemory re-reads the memory hint now and then.
func (e *Engine) pollMemory() {
	e.p.Timers.AfterFunc(e.cfg.MemoryPoll, func() {
		if e.state == stateFailed || e.state == stateClosed {
			return
		}
		e.refreshBudget()
		e.compact()
		e.pollMemory()
	})
}

// listSegments lists every key under the segments prefix.
func (e *Engine) listSegments(done func([]*listedSegment, error)) {
	byID := map[SnapshotID]*listedSegment{}
	var page func(token string)
	page = func(token string) {
		var got ListPage
		e.retry(func(d func(error)) {
			e.p.Store.ListObjects(e.layout.SegmentsPrefix(), token, func(p ListPage, err error) { got = p; d(err) })
		}, func(err error, _ bool) {
			if err != nil {
				done(nil, fmt.Errorf("list %s: %w", e.layout.SegmentsPrefix(), err))
				return
			}
			for _, o := range got.Objects {
				e.addListed(byID, o)
			}
			if got.NextToken != "" {
				if got.NextToken == token {
					done(nil, invariantError("a LIST page moves on: %s gave next token %q for token %q (%d ids so far)", e.layout.SegmentsPrefix(), got.NextToken, token, len(byID)))
					return
				}
				page(got.NextToken)
				return
			}
			done(sortedListing(byID), nil)
		})
	}
	page("")
}

func (e *Engine) addListed(byID map[SnapshotID]*listedSegment, o ObjectInfo) {
	dir, id, kind, ok := e.layout.ParseKey(o.Key)
	if !ok {
		return // not ours to judge; never deleted
	}
	ls := byID[id]
	if ls == nil {
		ls = &listedSegment{id: id, dir: dir}
		byID[id] = ls
	}
	info := o
	switch kind {
	case KindBody:
		ls.body = &info
	case KindMarker:
		ls.marker = &info
	case KindBitmap:
		ls.bitmap = &info
	}
}

func sortedListing(byID map[SnapshotID]*listedSegment) []*listedSegment {
	out := make([]*listedSegment, 0, len(byID))
	//engine:orderless — collected, then sorted by id below.
	for _, ls := range byID {
		out = append(out, ls)
	}
	slices.SortFunc(out, func(a, b *listedSegment) int { return a.id.Compare(b.id) })
	return out
}

// readMarkers fetches and verifies the given markers, RecoveryConcurrency
// at a time, and returns the owned segments in id order.
func (e *Engine) readMarkers(withMarker []*listedSegment, done func([]Segment, error)) {
	found := make([]*Segment, len(withMarker))
	e.forEach(len(withMarker), e.cfg.RecoveryConcurrency, func(i int, d func(error)) {
		e.readMarker(withMarker[i], func(s *Segment, err error) { found[i] = s; d(err) })
	}, func(err error) {
		if err != nil {
			done(nil, err)
			return
		}
		var owned []Segment
		for _, s := range found {
			if s != nil {
				owned = append(owned, *s)
			}
		}
		done(owned, nil)
	})
}

// readMarker GETs and decodes one marker; nil, nil means the marker is
// gone (a deleted key the listing still showed).
func (e *Engine) readMarker(ls *listedSegment, done func(*Segment, error)) {
	key := e.layout.Key(ls.dir, ls.id, KindMarker)
	var ix *segment.Index
	in := GetObjectInput{Key: key, Limit: markerReadLimit}
	e.getVerified(in, MarkReadDamaged, func(b []byte, _ ObjectInfo) (err error) {
		ix, err = segment.DecodeMarker(key, b)
		return err
	}, func(_ []byte, _ ObjectInfo, err error) {
		switch {
		case errors.Is(err, ErrNotFound):
			e.mark(MarkListedMarkerGone)
			done(nil, nil)
			return
		case err != nil:
			done(nil, fmt.Errorf("read marker %s: %w", key, err))
			return
		}
		s := &Segment{ID: ls.id, Dir: ls.dir, Index: ix}
		if ls.body != nil {
			done(s, checkBodySize(key, ls.body.Size, ix))
			return
		}
		e.mark(MarkMarkerBodyUnlisted)
		e.headBody(ls, ix, func(err error) { done(s, err) })
	})
}

// headBody checks a body the listing did not show (yet): the marker is
// the authority, but a marker without its body is corruption.
func (e *Engine) headBody(ls *listedSegment, ix *segment.Index, done func(error)) {
	key := e.layout.Key(ls.dir, ls.id, KindBody)
	var info ObjectInfo
	e.retry(func(d func(error)) {
		e.p.Store.HeadObject(key, func(i ObjectInfo, err error) { info = i; d(err) })
	}, func(err error, _ bool) {
		switch {
		case errors.Is(err, ErrNotFound):
			done(fmt.Errorf("%w: committed segment %s has no body", ErrCorrupt, ls.id))
		case err != nil:
			done(fmt.Errorf("head body %s: %w", key, err))
		default:
			done(checkBodySize(key, info.Size, ix))
		}
	})
}

func checkBodySize(key string, size int64, ix *segment.Index) error {
	if size != ix.BodyBytes {
		return fmt.Errorf("%w: body of %s has %d bytes, its marker says %d", ErrCorrupt, key, size, ix.BodyBytes)
	}
	return nil
}

// forEach runs fn for 0..n-1 with at most limit in flight. It stops
// starting new calls after the first error and calls done once all
// started calls have finished.
func (e *Engine) forEach(n, limit int, fn func(i int, done func(error)), done func(error)) {
	if limit <= 0 && n > 0 {
		panic(fmt.Sprintf("engine: forEach of %d calls with limit %d would never end", n, limit))
	}
	next, inFlight := 0, 0
	var first error
	var launch func()
	launch = func() {
		for inFlight < limit && next < n && first == nil {
			i := next
			next++
			inFlight++
			answered := false
			fn(i, func(err error) {
				if answered || inFlight <= 0 {
					// A second answer would count another call's out: done
					// would run with that call still in flight.
					e.broken("each call of a forEach answers once: call %d answered again, %d in flight (%d of %d started)", i, inFlight, next, n)
					return
				}
				answered = true
				inFlight--
				if err != nil && first == nil {
					first = err
				}
				if inFlight == 0 && (first != nil || next == n) {
					done(first)
					return
				}
				launch()
			})
		}
	}
	if n == 0 {
		e.later(func() { done(nil) })
		return
	}
	launch()
}

// checkLoggedEpochs: the generations the disk log sealed and will persist
// again are of epochs before the one this recovery claimed — a claim
// takes a newer epoch than any writer's — so writerRecord.sealed seals
// each (one at or above ours would be skipped as ours, its epoch left
// unsealed). logged is in id order: its last is its newest.
func checkLoggedEpochs(rec writerRecord, logged []SnapshotID) error {
	if n := len(logged); n > 0 && logged[n-1].Epoch >= rec.epoch {
		return invariantError("the disk log's sealed generations are of earlier epochs than the claim: generation %s, claimed epoch %d (%d logged)",
			logged[n-1], rec.epoch, n)
	}
	return nil
}
