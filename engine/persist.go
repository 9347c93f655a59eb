package engine

import (
	"bytes"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine/segment"
)

// bodyPartOverhead estimates one PART's bytes besides its data: the
// header, the Arrow schema and batch messages, padding.
const bodyPartOverhead = 2 << 10

// snapshot is a sealed accumulator on its way to becoming a segment.
type snapshot struct {
	id        SnapshotID
	dir       string
	content   *batchSet
	body      []byte
	marker    []byte
	index     *segment.Index
	startedAt time.Duration
	settledAt time.Duration // no marker request of ours can land after this
	uploadID  string        // multipart upload in progress, if any
	// created is the body's created_at: set at seal by the disk WAL (and
	// logged with the generation), at persist otherwise.
	created int64
	// replayed: a generation the disk WAL sealed before a crash, persisted
	// again under its own (older-epoch) id.
	replayed bool
	// ahead is its body's state once prepare started it (nil before).
	ahead *bodyAhead
	// stage is where its commit protocol is: each step asserts it on
	// entry (checkStage).
	stage persistStage
}

// persistStage is the step of the commit protocol a snapshot is in: body
// (bodyAhead), marker, fence, commit.
type persistStage uint8

const (
	persistQueued    persistStage = iota // sealed; persist not yet called
	persistBody                          // waiting for its body (bodyAhead)
	persistMarker                        // its marker PUT in flight
	persistSettling                      // the marker's outcome unknown: reading the key
	persistFencing                       // the marker exists: checking the epoch is still ours
	persistCommitted                     // acked; a segment
	persistFailed                        // known not committed; its units back in live
)

var persistStageNames = [...]string{"queued", "body", "marker", "settling", "fencing", "committed", "failed"}

func (s persistStage) String() string { return persistStageNames[s] }

// checkStage moves s to stage next from one of the stages it may come from. A
// step run in any other stage — a callback arriving twice, a commit of a
// snapshot that failed — is a broken invariant: false, and the caller
// returns.
func (e *Engine) checkStage(s *snapshot, next persistStage, from ...persistStage) bool {
	for _, f := range from {
		if s.stage == f {
			s.stage = next
			return true
		}
	}
	if e.state != stateFailed {
		e.broken("a snapshot's commit protocol runs its steps in order: snapshot %s in stage %s, entering %s", s.id, s.stage, next)
	}
	return false
}

func (e *Engine) key(s *snapshot, kind ObjectKind) string { return e.layout.Key(s.dir, s.id, kind) }

// persist runs the commit protocol (docs/DESIGN.md §6.3): encode, body, marker,
// ack. Body first — a crash after it leaves an orphan .seg that nobody
// owns. Then the marker, created with If-None-Match: * — the PUT that
// makes the snapshot committed. Only then the acks.
//
// The body does not depend on any earlier snapshot, the marker does (its
// cuts are decided once every earlier snapshot is committed): so the S3
// WAL makes the next queued snapshot's body ahead (prepare, from pump)
// while the active one's marker lands, and persist then only waits for
// it. Markers stay in id order, one writer, one active snapshot.
func (e *Engine) persist(s *snapshot) {
	if !e.checkStage(s, persistBody, persistQueued) {
		return
	}
	if s != e.active && e.state != stateFailed {
		active := SnapshotID{}
		if e.active != nil {
			active = e.active.id
		}
		e.broken("the writer persists its active snapshot only: persist of %s, active %s (%t), %d queued",
			s.id, active, e.active != nil, len(e.queue))
		return
	}
	s.startedAt = e.now() // the writer's time on it: a body made ahead is off its path
	if s.ahead == nil {
		e.prepare(s)
	}
	s.ahead.then(func(err error) {
		if err != nil {
			e.persistFailed(s, err)
			return
		}
		e.putMarkerOf(s)
	})
}

// bodyAhead is the state of a snapshot's body: encoded and uploaded, or
// on its way. then runs fn once it is (at once if it is).
type bodyAhead struct {
	done    bool
	err     error
	waiting func(error)
	dropped bool // an earlier persist failed: clean up, never commit
}

func (a *bodyAhead) then(fn func(error)) {
	if a.waiting != nil {
		panic("engine: bodyAhead.then called twice")
	}
	if a.done {
		fn(a.err)
		return
	}
	a.waiting = fn
}

func (a *bodyAhead) finish(err error) {
	if a.done {
		// Its upload answers once: a second answer would run a
		// persist's marker twice, or over a failed body.
		panic(fmt.Sprintf("engine: a body made ahead finishes once: finished with %v, again with %v", a.err, err))
	}
	a.done, a.err = true, err
	if fn := a.waiting; fn != nil {
		a.waiting = nil
		fn(err)
	}
}

// prepareAhead starts the body of the oldest queued snapshot while the
// active one is being persisted, where the log allows it (durableLog.ahead).
func (e *Engine) prepareAhead() {
	if !e.dlog.ahead() || e.active == nil || len(e.queue) == 0 || e.queue[0].ahead != nil || e.cooling || e.state == stateFailed {
		return
	}
	e.mark(MarkBodyAhead)
	e.prepare(e.queue[0])
}

// prepare encodes s's body off the loop and uploads it. The job holds
// its own references to the batches: a failed persist may move them back
// into the accumulator (and a later commit release them) while it runs.
func (e *Engine) prepare(s *snapshot) {
	if s.ahead != nil || s.stage > persistBody {
		e.broken("a snapshot's body is prepared once, before its marker: snapshot %s in stage %s, prepared %t", s.id, s.stage, s.ahead != nil)
		return
	}
	if !e.dlog.ahead() && s.stage != persistBody {
		// The disk log records a generation's seal before its body
		// (beforePersist): a body made while queued would come first.
		e.broken("a body is made ahead only where its log allows: snapshot %s in stage %s, made ahead under a log that does not", s.id, s.stage)
		return
	}
	if len(s.content.units) > 0 && len(s.content.parts) == 0 {
		// Every unit joins a part (add): units without parts were
		// released, and a body of none would commit them with no rows.
		e.broken("a body holds its units' rows: snapshot %s has %d units (%d bytes) and no parts", s.id, len(s.content.units), s.content.bytes)
		return
	}
	a := &bodyAhead{}
	s.ahead = a
	parts := s.content.encodeParts()
	e.dlog.order(parts)
	retainParts(parts)
	offsets := s.content.offsets
	if s.created == 0 {
		s.created = e.p.Clock.WallUnixMs()
	}
	created := s.created
	var buf bytes.Buffer
	// The body is about the content's size (Arrow buffers, sidecars,
	// offsets) plus a few hundred bytes of headers and IPC metadata per
	// PART: grow once instead of doubling through it — in the job, not on
	// the loop (zeroing a segment's worth of memory stalled acks).
	size := int(min(s.content.bytes+s.content.bytes/8+int64(len(parts))*bodyPartOverhead, segment.BodyBytesMax))
	var err error
	answered := false
	e.p.Exec.Go(func() {
		buf.Grow(size)
		var merged []segment.Part
		if merged, err = mergeBatches(parts); err == nil {
			s.index, err = segment.Encode(&buf, created, offsets, merged, nil)
			releaseMerged(parts, merged)
		}
	}, func() {
		if answered {
			// The executor's done runs once: a second would release the
			// batches again and upload the body twice.
			e.broken("the executor answers a body's encoding once: snapshot %s answered again", s.id)
			return
		}
		answered = true
		releaseParts(parts)
		if e.state == stateFailed {
			return
		}
		if err != nil {
			// Submit validated every unit, so this is a bug, not bad
			// input: stop rather than guess.
			e.failClosed(fmt.Errorf("encode snapshot %s: %w", s.id, err))
			return
		}
		s.body = buf.Bytes()
		if a.dropped {
			e.dropBody(s)
			return
		}
		e.uploadBody(s, func(err error) {
			if a.dropped {
				e.dropBody(s)
				return
			}
			if err != nil {
				err = fmt.Errorf("upload body: %w", err)
			}
			a.finish(err)
		})
	})
}

// putMarkerOf decides s's cuts, now that every earlier snapshot is
// committed (cut.go), encodes its marker and puts it.
func (e *Engine) putMarkerOf(s *snapshot) {
	if !e.checkStage(s, persistMarker, persistBody) {
		return
	}
	origin := e.origin
	if origin.IsZero() {
		e.broken("every marker carries the log's identity: snapshot %s persisted with none (epoch %d)", s.id, e.epoch)
		return
	}
	if s.index == nil || int64(len(s.body)) != s.index.BodyBytes {
		bodyBytes := int64(-1)
		if s.index != nil {
			bodyBytes = s.index.BodyBytes
		}
		e.broken("a marker follows its body and promises its size: snapshot %s, body %d bytes, index %t says %d",
			s.id, len(s.body), s.index != nil, bodyBytes)
		return
	}
	if a := s.ahead; a != nil && a.dropped {
		// A failed persist took its units back into live and deletes
		// this body (dropBody): a marker would commit them twice, one
		// copy without its body.
		e.broken("a dropped body is never committed: snapshot %s in stage %s, its body dropped by a failed persist", s.id, s.stage)
		return
	}
	if len(s.index.Entries) != len(s.content.parts) {
		e.broken("a body holds a PART per part of its snapshot: snapshot %s, %d PARTs, %d parts (%d units)",
			s.id, len(s.index.Entries), len(s.content.parts), len(s.content.units))
		return
	}
	if s.index.CreatedAtUnixMs != s.created {
		// The disk log's seal record carries the snapshot's date: a
		// replay rebuilds this body only from that date.
		e.broken("a body carries its snapshot's date: snapshot %s, body dated %d, snapshot %d", s.id, s.index.CreatedAtUnixMs, s.created)
		return
	}
	s.index.Origin, s.index.Spanning = origin, true
	s.index.Cuts = e.decideCuts(s)
	if e.state == stateFailed {
		return // a check in decideCuts failed: no marker on a state it could not trust
	}
	var err error
	if s.marker, err = segment.EncodeMarker(s.index); err != nil {
		e.failClosed(fmt.Errorf("encode the marker of snapshot %s: %w", s.id, err))
		return
	}
	e.putMarker(s)
}

// dropBody cleans up the body of a snapshot whose persist will not run
// (an earlier one failed and took it back into the accumulator): the
// same best effort as a failed persist; what is left is an orphan.
func (e *Engine) dropBody(s *snapshot) {
	if s.ahead == nil || !s.ahead.dropped || s.stage != persistQueued {
		e.broken("only a body made ahead for a snapshot never persisted is dropped: snapshot %s in stage %s, made ahead %t",
			s.id, s.stage, s.ahead != nil)
		return
	}
	e.mark(MarkBodyAheadDropped)
	if s.uploadID != "" {
		e.bestEffort().AbortMultipartUpload(e.key(s, KindBody), s.uploadID, func(error) {})
		s.uploadID = ""
	}
	e.bestEffort().DeleteObject(e.key(s, KindBody), func(error) {})
	s.body = nil
}

func retainParts(parts []segment.Part) {
	for _, p := range parts {
		for _, b := range p.Batches {
			b.Retain()
		}
	}
}

func releaseParts(parts []segment.Part) {
	for _, p := range parts {
		for _, b := range p.Batches {
			b.Release()
		}
	}
}

// uploadBody stores the body: one PUT when it fits a part, else a
// multipart upload of PartBytes parts.
func (e *Engine) uploadBody(s *snapshot, done func(error)) {
	if len(s.body) == 0 || s.stage > persistBody || s.uploadID != "" {
		e.broken("a body is uploaded once, encoded, before its marker: snapshot %s in stage %s, body %d bytes, upload %q in progress",
			s.id, s.stage, len(s.body), s.uploadID)
		return
	}
	key := e.key(s, KindBody)
	if int64(len(s.body)) <= e.cfg.PartBytes {
		e.retry(func(d func(error)) {
			e.p.Store.PutObject(PutObjectInput{Key: key, Body: s.body}, func(_ string, err error) { d(err) })
		}, func(err error, _ bool) { done(err) })
		return
	}
	e.mark(MarkMultipart)
	size := int64(len(s.body))
	m := &multipart{e: e, s: s, key: key, done: done}
	m.parts = make([]CompletedPart, int((size+e.cfg.PartBytes-1)/e.cfg.PartBytes))
	e.retry(m.create, m.created)
}

// uploadStage is the step a multipart upload is in.
type uploadStage uint8

const (
	uploadCreating   uploadStage = iota
	uploadParts                  // PartConcurrency parts in flight at most
	uploadCompleting             // CompleteMultipartUpload
	uploadHeading                // an ambiguous completion settled by a HEAD of the body
	uploadFinished
)

var uploadStageNames = [...]string{"creating", "parts", "completing", "heading", "finished"}

func (s uploadStage) String() string { return uploadStageNames[s] }

// multipart is one body's multipart upload: create, the parts, complete
// (and, if a completion was ambiguous, a HEAD). Each step's callback
// asserts the stage it completes. The upload id lives on the snapshot, so
// that a failed persist or a dropped body aborts it.
type multipart struct {
	e        *Engine
	s        *snapshot
	key      string
	stage    uploadStage
	parts    []CompletedPart // one per part, filled as each lands
	next     int             // the next part to start
	inFlight int             // ≤ PartConcurrency
	failed   error           // the first part that failed: no more start
	done     func(error)
}

// checkStage asserts the stage a callback completes and moves to the next.
func (m *multipart) checkStage(want, next uploadStage) bool {
	if m.stage != want {
		m.e.broken("a multipart upload completes the step it started: %s in stage %s, a callback of %s arrived", m.key, m.stage, want)
		return false
	}
	m.stage = next
	return true
}

func (m *multipart) finish(err error) {
	if m.inFlight != 0 || m.stage != uploadParts {
		m.e.broken("a multipart upload fails only once no part is in flight: %s in stage %s, %d parts in flight", m.key, m.stage, m.inFlight)
		return
	}
	m.stage = uploadFinished
	m.done(err)
}

func (m *multipart) create(d func(error)) {
	if m.stage != uploadCreating || m.s.uploadID != "" {
		// A created upload is never created again: its id would be
		// lost, and the upload left to the sweeper.
		m.e.broken("a multipart upload is created once: %s in stage %s, upload %q", m.key, m.stage, m.s.uploadID)
		return
	}
	m.e.p.Store.CreateMultipartUpload(m.key, func(id string, err error) {
		if err == nil {
			m.s.uploadID = id
		}
		d(err)
	})
}

func (m *multipart) created(err error, _ bool) {
	if !m.checkStage(uploadCreating, uploadParts) {
		return
	}
	if err != nil {
		m.finish(err)
		return
	}
	m.launch()
}

// launch starts parts while fewer than PartConcurrency are in flight.
func (m *multipart) launch() {
	for m.inFlight < m.e.cfg.PartConcurrency && m.next < len(m.parts) && m.failed == nil {
		if m.stage != uploadParts {
			m.e.broken("parts start only while an upload is in stage parts: %s in stage %s, part %d of %d next", m.key, m.stage, m.next+1, len(m.parts))
			return
		}
		i := m.next
		m.next++
		m.inFlight++
		m.uploadPart(i)
	}
}

// uploadPart uploads part i (numbered i+1), retried.
func (m *multipart) uploadPart(i int) {
	e, size := m.e, int64(len(m.s.body))
	if i < 0 || i >= len(m.parts) || int64(i)*e.cfg.PartBytes >= size || m.s.uploadID == "" {
		e.broken("a part lies within its body, in a created upload: %s part %d of %d, body %d bytes, part size %d, upload %q",
			m.key, i, len(m.parts), size, e.cfg.PartBytes, m.s.uploadID)
		return
	}
	chunk := m.s.body[int64(i)*e.cfg.PartBytes : min(int64(i+1)*e.cfg.PartBytes, size)]
	tries := 0
	e.retry(func(d func(error)) {
		if tries++; tries > 1 {
			e.mark(MarkPartRetry)
		}
		e.p.Store.UploadPart(m.key, m.s.uploadID, int32(i+1), chunk, func(etag string, err error) {
			m.parts[i] = CompletedPart{Number: int32(i + 1), ETag: etag}
			d(err)
		})
	}, m.partDone)
}

// partDone: one part landed or failed for good. Once none is in flight,
// the upload completes, or fails with the first part that failed.
func (m *multipart) partDone(err error, _ bool) {
	if m.stage != uploadParts || m.inFlight <= 0 {
		m.e.broken("a part completes while parts are in flight: %s in stage %s, %d in flight", m.key, m.stage, m.inFlight)
		return
	}
	m.inFlight--
	if err != nil && m.failed == nil {
		m.failed = err
	}
	switch {
	case m.inFlight > 0:
	case m.failed != nil:
		m.finish(m.failed)
	case m.next == len(m.parts):
		if !m.checkPartsLanded() {
			return
		}
		m.stage = uploadCompleting
		m.e.retry(m.complete, m.completed)
	}
	m.launch()
}

// checkPartsLanded: an upload completes with every part landed, each
// under its own number. O(parts), once per upload.
func (m *multipart) checkPartsLanded() bool {
	for i, p := range m.parts {
		if p.Number != int32(i+1) {
			m.e.broken("a multipart upload completes with every part landed: %s part %d of %d numbered %d", m.key, i+1, len(m.parts), p.Number)
			return false
		}
	}
	return true
}

func (m *multipart) complete(d func(error)) {
	if m.stage != uploadCompleting || m.s.uploadID == "" || m.inFlight != 0 {
		m.e.broken("a multipart upload completes a created upload with no part in flight: %s in stage %s, upload %q, %d parts in flight",
			m.key, m.stage, m.s.uploadID, m.inFlight)
		return
	}
	m.e.p.Store.CompleteMultipartUpload(m.key, m.s.uploadID, m.parts, d)
}

// completed: if a completion attempt was ambiguous, a later "no such
// upload" may mean the earlier one worked: a HEAD of the body settles it.
func (m *multipart) completed(err error, ambiguous bool) {
	if err == nil || !ambiguous || !errors.Is(err, ErrNoSuchUpload) {
		if !m.checkStage(uploadCompleting, uploadFinished) {
			return
		}
		if err == nil {
			m.s.uploadID = ""
			if len(m.parts) >= 3 {
				m.e.mark(MarkMultipart3)
			}
		}
		m.done(err)
		return
	}
	if !m.checkStage(uploadCompleting, uploadHeading) {
		return
	}
	m.e.mark(MarkCompleteSettledByHead)
	m.e.retry(m.head, m.headed)
}

func (m *multipart) head(d func(error)) {
	if m.stage != uploadHeading {
		m.e.broken("a multipart body is read back only to settle an ambiguous completion: %s in stage %s", m.key, m.stage)
		return
	}
	m.e.p.Store.HeadObject(m.key, func(info ObjectInfo, err error) {
		if err == nil && info.Size != int64(len(m.s.body)) {
			err = fmt.Errorf("body %s has %d bytes, uploaded %d", m.key, info.Size, len(m.s.body))
		}
		d(err)
	})
}

func (m *multipart) headed(err error, _ bool) {
	if !m.checkStage(uploadHeading, uploadFinished) {
		return
	}
	if err == nil {
		m.s.uploadID = ""
	}
	m.done(err)
}

// putMarker writes the commit marker. Create-only: if the key exists, an
// earlier attempt of ours landed (same bytes) or another writer took the
// id (different bytes).
//
// After an attempt whose outcome is unknown the key is never PUT again,
// only read (settle): the marker may have landed, counted, been applied
// and reclaimed by a successor while this writer was frozen, and a second
// create-only PUT would then recreate it without a body (seed 8).
func (e *Engine) putMarker(s *snapshot) {
	isAmbiguous := func(err error) bool { return errors.Is(err, ErrAmbiguous) }
	e.retryStop(func(d func(error)) {
		in := PutObjectInput{Key: e.key(s, KindMarker), Body: s.marker, IfNoneMatch: true}
		e.p.Store.PutObject(in, func(_ string, err error) { d(err) })
	}, isAmbiguous, func(err error, ambiguous bool) {
		if s.stage != persistMarker {
			e.broken("a marker PUT answers while its snapshot waits for it: snapshot %s in stage %s", s.id, s.stage)
			return
		}
		if ambiguous {
			// An earlier attempt may still land: the marker must not be
			// deleted (reclaim) before the store's request lifetime is over,
			// or it would come back without its body.
			s.settledAt = e.now() + e.cfg.FenceWait
		}
		switch {
		case err == nil:
			e.fenceThenCommit(s)
		case errors.Is(err, ErrPreconditionFailed):
			e.mark(MarkMarkerExists)
			e.settle(s, false)
		case ambiguous:
			// In doubt: the marker may exist, or still land. Re-committing
			// these units under another id could deliver them twice, so
			// read the key now (it usually landed) and, if it is absent,
			// again once the store's request lifetime is over.
			e.stats.InDoubt++
			e.settle(s, true)
		default:
			e.persistFailed(s, fmt.Errorf("put marker: %w", err))
		}
	})
}

// settle reads the marker key of an in-doubt snapshot until it knows.
// While it cannot know, the snapshot's units wait (fail closed). early: a
// marker PUT may still be in flight, so an absent key is read again after
// FenceWait before it counts as absent.
func (e *Engine) settle(s *snapshot, early bool) {
	if !e.checkStage(s, persistSettling, persistMarker, persistSettling) {
		return
	}
	key := e.key(s, KindMarker)
	in := GetObjectInput{Key: key, Limit: markerReadLimit}
	check := func(b []byte, _ ObjectInfo) error { _, err := segment.DecodeMarker(key, b); return err }
	e.getVerified(in, MarkReadDamaged, check, func(got []byte, _ ObjectInfo, err error) {
		switch {
		case err == nil && bytes.Equal(got, s.marker):
			e.mark(MarkInDoubtCommitted)
			e.fenceThenCommit(s)
		case err == nil:
			e.failClosed(fmt.Errorf("%w: marker %s holds another writer's commit", ErrCorrupt, e.key(s, KindMarker)))
		case errors.Is(err, ErrNotFound) && early:
			e.p.Timers.AfterFunc(e.cfg.FenceWait, func() { e.settle(s, false) })
		case errors.Is(err, ErrNotFound):
			e.mark(MarkInDoubtAbsent)
			e.persistFailed(s, fmt.Errorf("marker did not land"))
		case errors.Is(err, ErrCorrupt):
			e.failClosed(fmt.Errorf("settle in-doubt snapshot %s: %w", s.id, err))
		default:
			e.p.Timers.AfterFunc(e.backoff(AttemptsMax), func() { e.settle(s, early) })
		}
	})
}

// fenceThenCommit runs once the marker is known to exist. It acks only if
// this engine still holds the writer epoch: if a newer writer claimed it,
// the marker may be beyond that writer's seal (writer.go), so nothing may
// be acked — the engine fails closed and the sources retry elsewhere.
func (e *Engine) fenceThenCommit(s *snapshot) {
	if !e.checkStage(s, persistFencing, persistMarker, persistSettling, persistFencing) {
		return
	}
	e.readWriter(func(cur writerRecord, _ ObjectInfo, err error) {
		switch {
		case err == nil && cur.epoch == e.epoch && cur.nonce == e.writerNonce:
			e.commit(s)
		case errors.Is(err, ErrCorrupt):
			e.failClosed(fmt.Errorf("fence check of snapshot %s: %w", s.id, err))
		case err == nil || errors.Is(err, ErrNotFound):
			e.mark(MarkFencedLive)
			e.failClosed(fmt.Errorf("%w: snapshot %s committed after epoch %d was superseded (writer object: epoch %d)", ErrFenced, s.id, e.epoch, cur.epoch))
		default:
			e.p.Timers.AfterFunc(e.backoff(AttemptsMax), func() { e.fenceThenCommit(s) })
		}
	})
}

// commit runs when the marker is known to exist and the epoch is still
// ours: the snapshot is owned.
// State is brought up to date first; the acks go last, so a source that
// submits again from inside its ack sees a consistent engine.
func (e *Engine) commit(s *snapshot) {
	if e.state == stateFailed {
		return // its units were answered ErrClosed; recovery will find the segment
	}
	if !e.checkStage(s, persistCommitted, persistFencing) || !e.checkCommit(s) {
		return // failing closed answered its units
	}
	e.lastCommit = s.id
	e.succeeded(troublePersist)
	persisted := e.now() - s.startedAt
	if persisted < 0 {
		// ema and observe require a duration: fail closed with the
		// values rather than panic on the loop.
		e.broken("a persist takes a time ≥ 0 (the monotonic clock never goes back): snapshot %s started at %v, committed at %v",
			s.id, s.startedAt, s.startedAt+persisted)
		return // failing closed answered its units
	}
	e.persistEMA = time.Duration(ema(float64(e.persistEMA), float64(persisted)))
	e.stats.Persist.observe(e.now() - s.startedAt)
	e.mergeCommitted(s.content.offsets)
	seg := Segment{ID: s.id, Dir: s.dir, Index: s.index}
	// The writer still has the body: cache it for compaction (no GET).
	e.cache.put(s.id, segment.EncodedBody(e.layout.Key(s.dir, s.id, KindBody), s.index, s.body), int64(len(s.body)), false)
	if e.state == stateFailed {
		return // a check of the view or the cache failed: failing closed answered the units
	}
	var acks []func(error)
	for _, u := range s.content.units {
		e.held -= u.bytes
		if u.replayed {
			acks = append(acks, e.replayedCommitted(u)...)
			continue
		}
		if u.seg != nil {
			// The disk WAL acked it at its fsync and released its keys
			// then: they may belong to newer pending units now.
			if len(u.dones) != 0 {
				// No retry can join it after its keys went: an answer
				// waiting here would never be given.
				e.broken("a unit acked at its fsync has no submitter left at its commit: unit %d of partition %d, %d waiting, snapshot %s",
					u.seq, u.part, len(u.dones), s.id)
			}
			continue
		}
		e.releaseKeys(u)
		e.countAcked(u)
		e.observeAckDelay(u)
		acks = append(acks, u.dones...)
	}
	if e.state == stateFailed {
		return // a check of the counts failed: failing closed answered the units
	}
	e.releaseOffLoop(s.content)
	s.body = nil
	e.stats.Commits++
	e.active, e.failures = nil, 0
	// Checked once the snapshot left the writer: if it fails, the engine
	// fails closed but these units are still acked below — their marker
	// exists and the epoch was ours, so they are committed.
	e.checkHeld()
	e.checkAdmission()
	st := newSegState(seg, segment.NewBitmap(len(s.index.Entries)))
	st.reclaimAfter = s.settledAt
	if s.replayed {
		e.replayed--
		if e.replayed < 0 {
			e.broken("replayed snapshots queued or active ≥ 0: %d after replayed snapshot %s committed", e.replayed, s.id)
		}
	}
	if e.checkCommitted(s) {
		e.dlog.committed(s, st)
	}
	e.register(st)
	e.pump()
	e.maybeSeal()
	e.compact()
	e.checkClosed()
	for _, ack := range acks {
		ack(nil)
	}
}

// persistFailed: the snapshot is known not to be committed. Nothing is
// acked; its units go back ahead of everything newer (the queued
// snapshots come back too, so commit order stays id order), and the
// writer backs off before trying again. The sets come back into as few
// as a segment can each hold (regroup): most often all of them into
// live; those that do not fit are sealed again, in order, under fresh
// ids. Its objects are cleaned up on a best-effort basis; whatever is
// left is a previous incarnation's orphan to the next recovery.
func (e *Engine) persistFailed(s *snapshot, err error) {
	if e.state == stateFailed {
		return
	}
	if !e.checkStage(s, persistFailed, persistBody, persistMarker, persistSettling) {
		return
	}
	if s != e.active {
		e.broken("only the active snapshot fails its persist: %s failed, active %t, %d queued", s.id, e.active != nil, len(e.queue))
		return
	}
	e.stats.PersistFailures++
	e.mark(MarkPersistFailed)
	e.failing(troublePersist, fmt.Errorf("segment %s: %w", s.id, err))
	if s.uploadID != "" {
		e.mark(MarkUploadAborted)
		e.bestEffort().AbortMultipartUpload(e.key(s, KindBody), s.uploadID, func(error) {})
	}
	e.bestEffort().DeleteObject(e.key(s, KindBody), func(error) {})
	sets := []*batchSet{s.content}
	for _, q := range e.queue {
		if a := q.ahead; a != nil {
			a.dropped = true
			if a.done {
				e.dropBody(q)
			}
		}
		sets = append(sets, q.content)
	}
	e.startLive()
	sets = append(sets, e.live)
	units, bytes := 0, int64(0)
	for _, set := range sets {
		units, bytes = units+len(set.units), bytes+set.bytes
	}
	again, err := e.regroup(sets)
	if err != nil {
		e.failClosed(err)
		return
	}
	e.queue, e.active, e.replayed = nil, nil, 0
	for _, set := range again {
		e.queue = append(e.queue, e.newSnapshot(set))
	}
	if len(again) > 0 {
		e.mark(MarkPersistFailedResealed)
	}
	for _, set := range again {
		units, bytes = units-len(set.units), bytes-set.bytes
	}
	if len(e.live.units) != units || e.live.bytes != bytes {
		e.broken("a failed persist moves every unit back, sealed again or into live: live holds %d units of %d bytes, want %d of %d (%d sealed again)",
			len(e.live.units), e.live.bytes, units, bytes, len(again))
		return
	}
	e.checkQueue()
	e.checkHeld()
	e.failures++
	e.cooling = true
	resealed := len(again)
	e.p.Timers.AfterFunc(e.backoff(e.failures), func() {
		if !e.cooling {
			// One backoff per failed persist, and no persist while it
			// runs (pump): a second end means two failures overlapped.
			e.broken("the writer's backoff after a failed persist ends once: ended with none running, %d failures", e.failures)
			return
		}
		if e.active != nil || len(e.queue) != resealed {
			// A failed persist took every snapshot back, and nothing is
			// sealed or persisted while the writer cools.
			e.broken("nothing is sealed or persisted while the writer backs off: %d queued (%d sealed again), active %t at the backoff's end (%d failures)",
				len(e.queue), resealed, e.active != nil, e.failures)
			return
		}
		e.cooling = false
		e.pump() // what was sealed again goes first
		e.sealSoon()
	})
}

// mergeBatches concatenates each part's batches into one, so a PART is
// one Arrow record batch however many units fed it: one IPC message to
// write and, later, to decode, instead of one per unit. It runs inside
// Executor work (off the loop in production).
func mergeBatches(parts []segment.Part) ([]segment.Part, error) {
	out := make([]segment.Part, len(parts))
	for i, p := range parts {
		out[i] = p
		if len(p.Batches) < 2 {
			continue
		}
		b, err := concatBatches(p.Schema, p.Batches)
		if err != nil {
			releaseMerged(parts[:i], out[:i])
			return nil, fmt.Errorf("merge batches of %s: %w", p.Key, err)
		}
		out[i].Batches = []arrow.RecordBatch{b}
	}
	return out, nil
}

func concatBatches(schema *arrow.Schema, batches []arrow.RecordBatch) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	var rows int64
	for i, b := range batches {
		if int(b.NumCols()) != len(cols) {
			return nil, invariantError("a part's batches have its schema's columns: batch %d of %d has %d columns, schema %d", i, len(batches), b.NumCols(), len(cols))
		}
		rows += b.NumRows()
	}
	in := make([]arrow.Array, len(batches))
	for c := range cols {
		for j, b := range batches {
			in[j] = b.Column(c)
		}
		col, err := array.Concatenate(in, memory.DefaultAllocator)
		if err != nil {
			return nil, err
		}
		cols[c] = col
		if int64(col.Len()) != rows {
			return nil, invariantError("a merged column holds every row of its batches: column %d has %d rows, batches %d", c, col.Len(), rows)
		}
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// releaseMerged releases the batches mergeBatches made (not the originals).
//
// REQUIRES: merged is mergeBatches' result for orig, part for part.
func releaseMerged(orig, merged []segment.Part) {
	if len(orig) != len(merged) {
		panic(fmt.Sprintf("engine: merged parts are released against their originals, part for part: %d merged, %d originals", len(merged), len(orig)))
	}
	for i := range merged {
		if len(orig[i].Batches) >= 2 {
			for _, b := range merged[i].Batches {
				b.Release()
			}
		}
	}
}
