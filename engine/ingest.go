package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
)

// admission is the ingest stage's state: the units pending an answer by
// key, what is committed (source offsets and idempotency keys), and the
// key lookups in flight.
type admission struct {
	schemas       []schemaFP                     // recent schemas' fingerprints
	idemPending   map[string]*unit               // idempotency keys held but not yet committed
	offsetPending map[string]*unit               // offset key → its unanswered unit; INVARIANT: one per key (append)
	committed     *offsetsView                   // source offsets: max over every commit (and the checkpoint)
	keys          *keyStore                      // idempotency keys committed in the window (keystore.go)
	keySeq        uint64                         // the next run number of this incarnation
	lookups       map[segment.KeyHash]*keyLookup // keys being looked up in runs, with their waiting submissions
	rateEMA       float64                        // ingest bytes per second, 0 until measured
}

// check is the admission stage's whole-state check, run where a
// snapshot is sealed and where one commits (its keys released): a
// pending idempotency key is its unit's; a pending offset key is one of
// its unit's offsets and never a floor (releaseKeys frees exactly these);
// a pending key's unit is not answered yet (or is a replayed one, which
// waits for its generation's commit); a lookup in flight has a
// submission waiting on it; the ingest rate is a rate. A key pending
// under another unit would let a retry join the wrong answer, or block
// its key for good; one under an answered unit would let a retry join an
// answer never given again. Its loops are bounded by the
// units held (the admission budget) and the lookups in flight. The
// first offending key is the least, so the message does not depend on
// map order.
func (a *admission) check() error {
	bad, n := "", 0
	answered, badAnswered := 0, "" // keys of units answered already: releaseKeys frees them at the answer
	//engine:orderless — counts, and keeps the least key.
	for k, u := range a.idemPending {
		switch {
		case u == nil || u.idem != k:
			n, bad = n+1, least(bad, k, n == 0)
		case len(u.dones) == 0 && !u.replayed:
			answered, badAnswered = answered+1, least(badAnswered, k, answered == 0)
		}
	}
	if n > 0 {
		return invariantError("a pending idempotency key is its unit's: %d are not, the least %q", n, bad)
	}
	if answered > 0 {
		return invariantError("a pending idempotency key's unit is unanswered: %d are answered, the least %q", answered, badAnswered)
	}
	//engine:orderless — counts, and keeps the least key.
	for k, u := range a.offsetPending {
		switch {
		case u == nil || segment.IsFloor(k) || !holdsKey(u.offsets, k):
			n, bad = n+1, least(bad, k, n == 0)
		case len(u.dones) == 0 && !u.replayed:
			answered, badAnswered = answered+1, least(badAnswered, k, answered == 0)
		}
	}
	if n > 0 {
		return invariantError("a pending offset key is one of its unit's offsets, not a floor: %d are not, the least %q", n, bad)
	}
	if answered > 0 {
		return invariantError("a pending offset key's unit is unanswered: %d are answered, the least %q", answered, badAnswered)
	}
	//engine:orderless — counts, and keeps the least key.
	for h, l := range a.lookups {
		if l == nil || len(l.waiters) == 0 {
			n, bad = n+1, least(bad, fmt.Sprintf("%x", h), n == 0)
		}
	}
	if n > 0 {
		return invariantError("a key lookup in flight has a submission waiting: %d have none, the least %s", n, bad)
	}
	if !(a.rateEMA >= 0) { // NaN fails too
		return invariantError("the ingest rate is ≥ 0 bytes/s: %v", a.rateEMA)
	}
	return nil
}

// holdsKey reports whether o has key k. o is in key order (a unit's
// offsets are validated at admit): a binary search, so that
// admission.check, which asks it of every pending key at every seal, is
// not quadratic in a unit's offsets (a unit of 65,536 took 9 s a seal).
func holdsKey(o segment.Offsets, k string) bool {
	_, found := slices.BinarySearchFunc(o, k, func(x segment.Offset, k string) int { return strings.Compare(x.Key, k) })
	return found
}

// least is the lesser of cur and k, or k when first.
func least(cur, k string, first bool) string {
	if first || k < cur {
		return k
	}
	return cur
}

// checkAdmission runs the admission stage's check.
func (e *Engine) checkAdmission() bool { return e.invariantHolds(e.admission.check()) }

// ErrInvalidUnit: a submitted unit can never be committed as it is (bad
// key, schema mismatch, misaligned sidecar, oversized). Retrying the same
// unit will fail the same way.
var ErrInvalidUnit = errors.New("engine: invalid unit")

// idemPrefix namespaces idempotency keys inside the offsets view.
const idemPrefix = "idem/"

// IdemOffsetPrefix is idemPrefix for readers of a segment's offsets (and
// of an old-format checkpoint's): an offset whose key starts with it is an
// idempotency key, with its submit time as the value, not a source's
// progress.
const IdemOffsetPrefix = idemPrefix

// unitBytesMax bounds one unit: it must fit a body with room to spare.
const unitBytesMax = segment.BodyBytesMax / 2

// Unit is one ingest unit: Arrow batches for one partition key, with the
// source progress they represent.
type Unit struct {
	Key     segment.PartitionKey
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch // retained by the engine if accepted; the caller keeps its own references
	Sidecar *segment.Sidecar    // CDC metadata, one row per Arrow row; nil if not CDC
	// Offsets this unit advances a replayable source to. A unit whose
	// offsets the view already covers was committed before: it is acked
	// without being stored again. A source submits the next unit for an
	// offset key only after the previous one for that key was answered:
	// offsets are high-water marks, so a later unit committing ahead of
	// a rejected earlier one would skip it. A unit whose offset key has an
	// unanswered unit at other offsets is refused with
	// ErrResourceExhausted (retry after the answer); one at the same
	// offsets is the same unit resubmitted and shares its answer.
	Offsets segment.Offsets
	// IdempotencyKey identifies a non-replayable source's unit across
	// retries; a retry of a committed or pending key is not stored again.
	IdempotencyKey string

	arrow    []byte              // disk WAL: the IPC stream Batches were decoded from (wal_disk_unit.go)
	prepared []arrow.RecordBatch // PrepareUnit: the batches it decoded, to see Batches was not changed since
}

// Submit hands a unit to the engine. done runs exactly once on the loop,
// never inside Submit: nil means the unit is committed (acked); an error
// means it is not (ErrResourceExhausted: retry later; ErrInvalidUnit:
// never; ErrNotReady / ErrClosed: after recovery or restart).
func (e *Engine) Submit(in Unit, done func(error)) {
	e.stats.UnitsSubmitted++
	c := e.namespace(in.Key.Namespace)
	c.UnitsSubmitted++
	for _, b := range in.Batches {
		c.RowsSubmitted += uint64(b.NumRows())
	}
	e.submit(in, done, false)
}

// submit is Submit once counted; looked reports that the key store has
// already been searched for the unit's idempotency key (keystore_lookup.go).
func (e *Engine) submit(in Unit, done func(error), looked bool) {
	if done == nil {
		panic("engine: a unit submitted without its answer") // a caller's contract: every unit is answered
	}
	if err := e.admit(in); err != nil {
		e.stats.UnitsRejected++
		e.answer(done, err)
		return
	}
	// A unit already committed, or pending, takes no room: it is answered
	// even under backpressure (a source replaying after a restart).
	if e.joinDuplicate(in, done) {
		e.stats.UnitsDuplicate++
		return
	}
	if !looked && in.IdempotencyKey != "" && e.lookupKey(in, done) {
		return
	}
	size := unitBytes(in) // sized once for room and roomFor
	if err := e.room(in, size); err != nil {
		e.stats.UnitsRejected++
		e.answer(done, err)
		return
	}
	if err := e.viewRoom(in); err != nil {
		e.stats.UnitsRejected++
		e.answer(done, err)
		return
	}
	if !e.roomFor(in, size) {
		e.sealSoon()
		if n := e.walSegments(); n >= e.cfg.LiveSegmentsMax { // the seal took admit's last slot
			e.mark(MarkBackpressureWAL)
			e.stats.UnitsRejected++
			e.answer(done, fmt.Errorf("%w: WAL backlog of %d segments not yet applied, limit %d", ErrResourceExhausted, n, e.cfg.LiveSegmentsMax))
			return
		}
		if !e.roomFor(in, size) {
			e.mark(MarkBackpressureQueue)
			e.stats.UnitsRejected++
			e.answer(done, fmt.Errorf("%w: snapshot limits reached and the writer queue is full", ErrResourceExhausted))
			return
		}
	}
	e.append(in, done)
}

// admit checks state and the unit itself.
func (e *Engine) admit(in Unit) error {
	switch e.state {
	case stateReady:
	case stateNew, stateRecovering:
		return ErrNotReady
	case stateFailed:
		return fmt.Errorf("%w: %v", ErrClosed, e.err)
	default:
		return ErrClosed
	}
	if err := validateUnit(in, e.fingerprint(in.Schema)); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidUnit, err)
	}
	for _, o := range pendingKeys(in.Offsets) {
		if u := e.offsetPending[o.Key]; u != nil && !slices.Equal(u.offsets, in.Offsets) {
			e.mark(MarkBackpressureOffset)
			return fmt.Errorf("%w: offset key %q has an unanswered unit; retry after its answer", ErrResourceExhausted, o.Key)
		}
	}
	if cdc, ok := e.live.cdcOf(in.Key); ok && cdc != (in.Sidecar != nil) {
		return fmt.Errorf("%w: key %s mixes CDC and non-CDC units", ErrInvalidUnit, in.Key)
	}
	if e.p.Sinks != nil {
		if _, ok := e.p.Sinks.Sink(in.Key.SinkRef); !ok {
			return fmt.Errorf("%w: no sink %q is configured", ErrInvalidUnit, in.Key.SinkRef)
		}
	}
	return nil
}

// room refuses a new unit the engine has no room for: admission memory,
// or the WAL backlog at LiveSegmentsMax.
func (e *Engine) room(in Unit, n int64) error {
	if err := e.dlog.refuse(in); err != nil {
		if !errors.Is(err, ErrResourceExhausted) && !errors.Is(err, ErrPartitionHalted) {
			// A source retries backpressure and waits out a halted
			// partition: any other answer would be taken for the unit's.
			e.broken("a log refuses a unit only as backpressure or for a halted partition: %v", err)
		}
		return err
	}
	if e.held+n > e.budget.admission {
		e.mark(MarkBackpressureMemory)
		return fmt.Errorf("%w: %d bytes held, unit of %d, admission %d", ErrResourceExhausted, e.held, n, e.budget.admission)
	}
	if n := e.walSegments(); n >= e.cfg.LiveSegmentsMax {
		e.mark(MarkBackpressureWAL)
		return fmt.Errorf("%w: WAL backlog of %d segments not yet applied, limit %d", ErrResourceExhausted, n, e.cfg.LiveSegmentsMax)
	}
	return nil
}

// walSegments counts the segments the WAL holds or will hold without
// another unit: owned ones, and snapshots queued or being persisted.
// A unit is admitted only while this is below LiveSegmentsMax, and then
// joins the live accumulator (one more segment at most), so
//
//	INVARIANT: walSegments() + (live non-empty ? 1 : 0) ≤ LiveSegmentsMax,
//
// except just after recovery, which owns whatever the log holds. Submit
// counts again after sealing live to make room for a unit: that seal
// takes a slot. Checked where a unit joins live (checkWAL).
func (e *Engine) walSegments() int {
	n := len(e.segs) + len(e.queue)
	if e.active != nil {
		n++
	}
	return n
}

// fingerprint returns segment.FingerprintOf(s), remembering the last few
// schemas: a source sends the same schema again and again, and hashing
// its text form is most of a small unit's validation. A schema is
// immutable, and the cache holds it, so a pointer names one schema.
func (e *Engine) fingerprint(s *arrow.Schema) segment.SchemaFingerprint {
	if s == nil {
		return 0
	}
	for _, c := range e.schemas {
		if c.schema == s {
			return c.fp
		}
	}
	fp := segment.FingerprintOf(s)
	if len(e.schemas) == schemasCached {
		copy(e.schemas, e.schemas[1:])
		e.schemas = e.schemas[:schemasCached-1]
	}
	e.schemas = append(e.schemas, schemaFP{s, fp})
	if len(e.schemas) > schemasCached {
		e.broken("the fingerprint cache holds at most schemasCached schemas: %d cached, limit %d", len(e.schemas), schemasCached)
	}
	return fp
}

// schemasCached bounds the fingerprint cache (a linear scan: a source
// has a handful of schemas).
const schemasCached = 16

type schemaFP struct {
	schema *arrow.Schema
	fp     segment.SchemaFingerprint
}

func validateUnit(in Unit, fp segment.SchemaFingerprint) error {
	if err := in.Key.Validate(); err != nil {
		return err
	}
	if in.Schema == nil {
		return fmt.Errorf("no schema")
	}
	if fp != in.Key.Schema {
		return fmt.Errorf("schema fingerprint %016x, key says %016x", uint64(fp), uint64(in.Key.Schema))
	}
	var rows int64
	for i, b := range in.Batches {
		if !b.Schema().Equal(in.Schema) {
			return fmt.Errorf("batch %d has another schema", i)
		}
		rows += b.NumRows()
	}
	if in.Sidecar != nil {
		if err := in.Sidecar.Validate(); err != nil {
			return err
		}
		if int64(len(in.Sidecar.Rows)) != rows {
			return fmt.Errorf("sidecar has %d rows, batches %d", len(in.Sidecar.Rows), rows)
		}
	}
	if err := in.Offsets.Validate(); err != nil {
		return err
	}
	if in.IdempotencyKey != "" && len(in.Offsets) >= segment.OffsetsEntriesMax {
		// The key is an entry of the segment's offsets too (idemPrefix):
		// such a unit would fit no segment, not even alone (roomFor).
		return fmt.Errorf("offsets: %d entries with the idempotency key's, limit %d", len(in.Offsets)+1, segment.OffsetsEntriesMax)
	}
	if err := checkOffsetKeys(in.Offsets); err != nil {
		return err
	}
	if len(idemPrefix)+len(in.IdempotencyKey) > segment.OffsetKeyBytesMax {
		return fmt.Errorf("idempotency key of %d bytes, limit %d", len(in.IdempotencyKey), segment.OffsetKeyBytesMax-len(idemPrefix))
	}
	if n := unitBytes(in); n > unitBytesMax {
		return fmt.Errorf("unit of %d bytes, limit %d", n, unitBytesMax)
	}
	return nil
}

// joinDuplicate answers a unit that is already committed or pending
// without storing it again. It reports whether it did.
func (e *Engine) joinDuplicate(in Unit, done func(error)) bool {
	if k := in.IdempotencyKey; k != "" {
		if e.keys.held(segment.KeyHashOf(k)) {
			e.mark(MarkDuplicateCommitted)
			e.answer(done, nil)
			return true
		}
		if u, ok := e.idemPending[k]; ok {
			if u.idem != k || len(u.dones) == 0 && !u.replayed {
				// releaseKeys deletes by u.idem: a unit under another key
				// would never free this one. A submitted unit without a
				// submitter was answered, so its keys were released.
				e.broken("idemPending maps a key to the unanswered unit holding it: key %q, unit holds %q, %d waiting, replayed %t",
					k, u.idem, len(u.dones), u.replayed)
				e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err)) // not held: failing closed did not answer it
				return true
			}
			e.mark(MarkDuplicateJoined)
			u.dones = append(u.dones, done)
			return true
		}
		// Not held exactly: it may be in a run (lookupKey); its
		// offsets, if any, may still name a unit committed or pending
		// (Unit.Offsets).
	}
	if len(in.Offsets) == 0 {
		return false
	}
	// The rows are those of the plain offsets: a floor the view lacks
	// does not make them new (a source's floor moves on between tries).
	if e.committed.covers(pendingKeys(in.Offsets)) {
		e.mark(MarkOffsetsCovered)
		e.answer(done, nil)
		return true
	}
	if u := e.offsetPending[pendingKeys(in.Offsets)[0].Key]; u != nil {
		if !slices.Equal(u.offsets, in.Offsets) {
			e.broken("a unit joins a pending one only with the same offsets (admit): pending %v, joining %v", u.offsets, in.Offsets)
			e.answer(done, e.err) // failing closed answered what it holds: this one too
			return true
		}
		if len(u.dones) == 0 && !u.replayed {
			// releaseKeys frees a unit's offset keys at its answer: one
			// still pending under an answered unit would take this
			// retry's answer with it, never to be given.
			e.broken("offsetPending maps a key to the unanswered unit holding it: unit at %v, 0 waiting, replayed %t", u.offsets, u.replayed)
			e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err)) // not held: failing closed did not answer it
			return true
		}
		e.mark(MarkDuplicateJoined)
		u.dones = append(u.dones, done) // admit checked: the same offsets
		return true
	}
	return false
}

// viewRoom refuses a unit that could grow the offsets view past what
// _offsets holds (Config.OffsetsViewMax), or bring a new idempotency key
// while the key store uses its share of the memory pool (keyMemShare).
// Pending units count as if all their keys were new.
func (e *Engine) viewRoom(in Unit) error {
	if in.IdempotencyKey != "" {
		if used, limit := e.keys.memBytes(), e.budget.pool/keyMemShare; used > limit {
			e.expireKeys()
			if used = e.keys.memBytes(); used > limit {
				e.mark(MarkBackpressureKeys)
				return fmt.Errorf("%w: idempotency keys use %d bytes of memory, limit %d (a %d-th of the pool): they expire %v after their submit",
					ErrResourceExhausted, used, limit, keyMemShare, e.cfg.IdempotencyWindow)
			}
		}
	}
	added := 0
	for _, o := range in.Offsets {
		if _, ok := e.committed.get(o.Key); !ok {
			added++
		}
	}
	if added == 0 {
		return nil
	}
	limit := e.cfg.OffsetsViewMax
	if limit == 0 {
		limit = segment.CheckpointEntriesMax
	}
	if n := e.committed.len() + len(e.offsetPending) + added; n > limit {
		e.mark(MarkBackpressureView)
		return fmt.Errorf("%w (%d source offsets with this unit, limit %d)", ErrOffsetsViewFull, n, limit)
	}
	return nil
}

// keyMemShare: the key store may use a keyMemShare-th of the memory pool.
const keyMemShare = 4

// liveBytesMax bounds the live snapshot's bytes (Config.LiveBytesMax's
// default and upper limit), as unitBytesMax bounds one unit's, so that
// its seal encodes: a body holds at most segment.BodyBytesMax. Live
// grows past TargetBytes while the writer's queue is full (a slow
// store), bounded otherwise only by the admission budget, which can be
// many GiB.
const liveBytesMax = unitBytesMax

// roomFor reports whether the live snapshot can take the unit without
// breaking a segment limit (parts, offsets entries, rows per part, its
// bytes, n: unitBytes(in), which its caller has). An empty live always
// has room for a valid unit.
func (e *Engine) roomFor(in Unit, n int64) bool {
	if !e.live.empty() && e.live.bytes+n > e.cfg.liveBytes() {
		e.mark(MarkLiveBytesFull)
		return false
	}
	parts := len(e.live.parts)
	if _, ok := e.live.index[in.Key]; !ok {
		parts++
	}
	entries := len(e.live.offsets) + len(in.Offsets)
	if in.IdempotencyKey != "" {
		entries++
	}
	var rows int64
	for _, b := range in.Batches {
		rows += b.NumRows()
	}
	if i, ok := e.live.index[in.Key]; ok {
		rows += e.live.parts[i].rows
	}
	return parts <= segment.PartsMax && entries <= segment.OffsetsEntriesMax && rows <= segment.PartRowsMax
}

// append takes an admitted unit: it becomes held (pending under its
// idempotency key and offset keys) and goes to the durable log, which
// decides when it is durable (durable.go).
func (e *Engine) append(in Unit, done func(error)) {
	if e.state != stateReady {
		e.broken("a unit is appended only while ingest is open (admit): state %d, unit for %s", e.state, in.Key)
		e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err))
		return
	}
	u := &unit{idem: in.IdempotencyKey, ns: in.Key.Namespace, dones: []func(error){done}, bytes: unitBytes(in), since: e.now()}
	if u.bytes > unitBytesMax {
		e.broken("an appended unit fits its limit (validateUnit): %d bytes, limit %d, unit for %s", u.bytes, unitBytesMax, in.Key)
		e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err))
		return
	}
	u.offsets = slices.Clone(in.Offsets) // the caller keeps its slice
	for _, o := range pendingKeys(u.offsets) {
		if prev := e.offsetPending[o.Key]; prev != nil {
			e.broken("one unanswered unit per offset key: %q has one at %v, another appended at %v", o.Key, prev.offsets, u.offsets)
			e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err)) // not held: failing closed did not answer it
			return
		}
	}
	if u.idem != "" {
		// The value is when the key was seen: it expires after the window.
		in.Offsets = append(segment.Offsets(nil), in.Offsets...).Advance(idemPrefix+u.idem, uint64(e.p.Clock.WallUnixMs()))
	}
	submitted, key := batchRows(in.Batches), in.Key
	in, err := e.dlog.canonical(in)
	if err != nil {
		e.stats.UnitsRejected++
		e.answer(done, fmt.Errorf("%w: %v", ErrInvalidUnit, err))
		return
	}
	if rows := batchRows(in.Batches); rows != submitted || in.Key != key {
		// The disk log keeps what its entry decodes to: a replay rebuilds
		// the same snapshot only if that is what was submitted.
		e.broken("the canonical form of a unit is the unit: %d rows submitted, %d kept; key %s, kept %s", submitted, rows, key, in.Key)
		e.answer(done, fmt.Errorf("%w: %v", ErrClosed, e.err))
		return
	}
	for _, o := range pendingKeys(u.offsets) {
		e.offsetPending[o.Key] = u
	}
	if u.idem != "" {
		e.idemPending[u.idem] = u
	}
	u.rows = submitted
	if !e.checkAccepted(u) {
		return
	}
	e.dlog.accept(u, in)
}

// batchRows counts the rows of batches: O(batches), not rows.
func batchRows(bs []arrow.RecordBatch) (rows int64) {
	for _, b := range bs {
		rows += b.NumRows()
	}
	return rows
}

// joinLive adds a held unit's content to the live accumulator.
//
// REQUIRES: the unit fits live (roomFor): both logs ask before it joins.
func (e *Engine) joinLive(u *unit, in Unit) {
	for _, b := range in.Batches {
		b.Retain()
	}
	e.startLive()
	if err := e.live.add(u, in); err != nil {
		e.failClosed(err)
		return
	}
	if rows := batchRows(in.Batches); rows != u.rows {
		// Acks count u.rows (countAcked); live commits the batches'.
		e.broken("a unit joins live with the rows it is counted for: unit %d of partition %d counts %d rows, brings %d", u.seq, u.part, u.rows, rows)
		return
	}
	if p := e.live.parts[e.live.index[in.Key]]; len(e.live.parts) > segment.PartsMax || len(e.live.offsets) > segment.OffsetsEntriesMax || p.rows > segment.PartRowsMax {
		// Past a limit, live's seal would not encode: its units were
		// acked or will be, and could never commit.
		e.broken("live fits a segment (roomFor): %d parts, limit %d; %d offsets, limit %d; part %s holds %d rows, limit %d",
			len(e.live.parts), segment.PartsMax, len(e.live.offsets), segment.OffsetsEntriesMax, p.key, p.rows, segment.PartRowsMax)
	}
}

// startLive dates the live accumulator from its first unit.
func (e *Engine) startLive() {
	if e.live.empty() {
		e.liveSince = e.now()
	}
}

// hold counts u's bytes as held: admitted and not yet answered.
func (e *Engine) hold(u *unit) {
	if u.bytes <= 0 {
		// unitBytes counts at least a unit's overhead: a unit held for
		// nothing would leave held short when it is answered.
		e.broken("a held unit costs bytes: unit %d of partition %d holds %d bytes", u.seq, u.part, u.bytes)
	}
	e.held += u.bytes
}

// answerUnheld answers u's submitters with err: an outcome that leaves the
// unit the source's (ErrUnknownOutcome), so its bytes and keys are no
// longer held.
func (e *Engine) answerUnheld(u *unit, err error) {
	e.held -= u.bytes
	if e.held < 0 {
		// Its submitters are still answered below: failing closed
		// answers only what is held.
		e.broken("held bytes ≥ 0: %d after answering unit %d of partition %d (%d bytes) unheld", e.held, u.seq, u.part, u.bytes)
	}
	e.releaseKeys(u)
	for _, d := range u.dones {
		e.answer(d, err)
	}
	u.dones = nil
}

// holdReplayed registers a unit the disk WAL's recovery replayed: it
// holds its offset keys (units replay in sequence order, so a key's
// newest unit holds it; a floor is never pending) and its idempotency
// key until its generation commits, and its bytes.
func (e *Engine) holdReplayed(u *unit) {
	if !u.replayed || len(u.dones) > 0 {
		e.broken("only a replayed unit, which no submitter waits for, holds keys by replay: replayed %t, %d waiting", u.replayed, len(u.dones))
		return
	}
	for _, o := range u.offsets {
		if isFloorOffset(o) {
			continue
		}
		if prev := e.offsetPending[o.Key]; prev != nil && !prev.replayed {
			// Replay runs before ingest opens: a submitted unit pending
			// under the key would lose its hold, and its answer's release.
			e.broken("a replayed unit takes its offset keys from replayed units only: %q held by a submitted unit at %v", o.Key, prev.offsets)
			return
		}
		e.offsetPending[o.Key] = u
	}
	if u.idem != "" {
		e.idemPending[u.idem] = u
	}
}

// releaseKeys frees the keys u holds pending — its idempotency key and
// its offset keys — once it is answered: committed, or failed with an
// unknown outcome. Only keys u still holds are freed: a replayed unit's
// may have passed to a newer unit since (its entry was acked at its
// fsync, wal_disk.go), and those stay the newer one's.
//
// A submitted unit's keys pass to no other unit (admit refuses a unit
// whose key is pending under another, append a second hold): it holds
// every key until this runs, once, at its answer.
func (e *Engine) releaseKeys(u *unit) {
	if u.idem != "" && e.idemPending[u.idem] == u {
		delete(e.idemPending, u.idem)
	} else if u.idem != "" && !u.replayed {
		e.broken("a submitted unit holds its idempotency key until its answer: %q released, held by another unit %t", u.idem, e.idemPending[u.idem] != nil)
	}
	for _, o := range pendingKeys(u.offsets) {
		if e.offsetPending[o.Key] == u {
			delete(e.offsetPending, o.Key)
		} else if !u.replayed {
			e.broken("a submitted unit holds its offset keys until its answer: %q of %v released, held by another unit %t", o.Key, u.offsets, e.offsetPending[o.Key] != nil)
		}
	}
}
