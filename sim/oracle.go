package sim

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/zeebo/xxh3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// Oracle checks the WAL's guarantees against the world's truth, never
// against what the engine says about itself:
//
//   - no ACK before a marker holding the unit landed;
//   - every committed unit holds exactly the rows its source produced,
//     every column compared (RowDigest);
//   - a marker counts only if the writer object says so (zombie commits
//     beyond their epoch's seal do not): no unit is in two markers that
//     count, and every acked unit is in one that counts;
//   - after every recovery: every acked unit lies in a segment the new
//     engine owns (or that was reclaimed), the recovered offsets cover
//     it, every owned segment has its marker, recovery read no body, and
//     its request count is bounded by the live segments;
//   - every completion-bitmap version written holds every bit of the
//     version before it;
//   - at the end: every unit a source produced is committed exactly once,
//     and each destination holds every committed job once, row for row.
//
// It learns what a segment holds by decoding the body when its marker
// lands (Store.OnApply), outside the engine.
type Oracle struct {
	w         *World
	mem       memory.Allocator
	units     map[UID]*unitInfo
	markers   map[string]*markerInfo              // landed markers by key
	order     []*markerInfo                       // landed markers, in id order
	pending   []*markerInfo                       // validity not decided yet
	multi     []UID                               // units in more than one landed marker
	reclaimed map[string]bool                     // marker keys deleted after landing
	runs      map[string]map[segment.KeyHash]bool // idempotency-key runs decoded (reclaim_oracle.go)
	acked     map[UID]bool
	// givenUp: keyed units their source stopped retrying, unanswered,
	// half an idempotency window after it first sent them
	// (source.giveUp): stored once or not at all, never required.
	givenUp map[UID]bool
	ledger  ackLedger
	bitmaps map[string]*segment.Bitmap // last version of each bitmap key
	// writerEpoch is the epoch of the writer object's last version (0:
	// none yet): pending markers of that epoch or later are the current
	// writer's, and count.
	writerEpoch uint64
	violations  []string
	classes     []string // each violation's format string
	wal         walOracle
}

// unitInfo is what a source produced as one unit, and where it landed.
type unitInfo struct {
	digest    RowDigest
	firstSeen time.Duration
	markers   []*markerInfo
}

type validity uint8

const (
	validityPending validity = iota
	validityValid
	validityInvalid
)

// markerInfo is one landed commit marker and what its segment holds.
type markerInfo struct {
	key      string
	id       engine.SnapshotID
	uids     []UID
	jobs     map[jobKey]RowDigest // expected content of each job: (sink, namespace, schema, CDC-ness)
	validity validity
	bodiless bool            // landed when its body no longer existed
	offsets  segment.Offsets // what the marker says its segment covers
	origin   segment.Origin  // the log the marker says committed it
	// spanning: a version 3 marker, whose segment's PARTs join lanes'
	// spanning jobs, ended by cuts; false: a job per group of it.
	spanning bool
	cuts     []segment.Cut
	created  int64                 // the segment's created_at, Unix ms
	landed   int64                 // when the marker landed, Unix ms of the world's wall clock
	groups   map[jobKey]groupParts // its PARTs by group, from the index
}

// groupParts counts one group's PARTs in a segment.
type groupParts struct {
	parts int
	bytes int64 // payload
}

// keyOf is the job key of a cut's group.
func keyOf(g segment.Group) jobKey { return jobKey{g.SinkRef, g.Namespace, g.Schema, g.CDC} }

// indexGroups counts an index's PARTs by group.
func indexGroups(ix *segment.Index) map[jobKey]groupParts {
	out := map[jobKey]groupParts{}
	for _, e := range ix.Entries {
		k := keyOf(segment.GroupOf(e))
		g := out[k]
		g.parts++
		g.bytes += e.End() - e.ArrowStart
		out[k] = g
	}
	return out
}

// jobKey is what the engine groups a segment's slices into jobs by.
type jobKey struct {
	sink, namespace string
	schema          segment.SchemaFingerprint
	cdc             bool
}

func newOracle(w *World) *Oracle {
	return &Oracle{w: w, mem: memory.DefaultAllocator, units: map[UID]*unitInfo{}, markers: map[string]*markerInfo{},
		reclaimed: map[string]bool{}, runs: map[string]map[segment.KeyHash]bool{}, acked: map[UID]bool{}, givenUp: map[UID]bool{}, ledger: newAckLedger(), bitmaps: map[string]*segment.Bitmap{},
		wal: newWALOracle()}
}

func (o *Oracle) fail(format string, args ...any) {
	if t := o.w.top; t != nil {
		// A further pipeline's violation is the world's, named.
		t.oracle.fail("pipeline %s: "+format, append([]any{o.w.label}, args...)...)
		return
	}
	o.violations = append(o.violations, fmt.Sprintf(format, args...))
	o.classes = append(o.classes, format)
	o.w.note(NoteViolation, 0, "", o.violations[len(o.violations)-1])
}

// Violations returns what broke, in order.
func (o *Oracle) Violations() []string { return o.violations }

// produced records a unit as its source builds it (the first time).
func (o *Oracle) produced(uid UID, b arrow.RecordBatch, sidecar *segment.Sidecar) {
	if _, ok := o.units[uid]; ok {
		return
	}
	var d RowDigest
	var rows []segment.CDCRow
	if sidecar != nil {
		rows = sidecar.Rows
	}
	if err := d.AddBatch(b, rows); err != nil {
		panic(fmt.Sprintf("sim: unit %s: %v", uid, err))
	}
	o.producedDigest(uid, d)
}

// producedDigest records a unit of rows digesting to d (the first time).
func (o *Oracle) producedDigest(uid UID, d RowDigest) {
	if _, ok := o.units[uid]; !ok {
		o.units[uid] = &unitInfo{digest: d, firstSeen: o.w.sched.Now()}
	}
}

// onApply sees every mutation land in the store.
func (o *Oracle) onApply(op Op, key string) {
	if !strings.HasPrefix(key, o.w.layout.Root()) {
		return
	}
	switch {
	case key == o.w.layout.WriterKey() && op == OpPut:
		o.decideValidity()
	case strings.HasSuffix(key, ".seg.commit") && op == OpPut:
		o.markerLanded(key)
	case strings.HasSuffix(key, ".seg.commit") && op == OpDelete:
		if m, ok := o.markers[key]; ok {
			o.reclaimed[key] = true
			o.markerDeleted(m)
			if m.validity == validityValid {
				o.checkReclaimDurable(m)
			}
		}
	case strings.HasSuffix(key, ".seg.scbl"):
		o.bitmapChanged(op, key)
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
	_, id, _, _ := o.w.layout.ParseKey(key)
	m := &markerInfo{key: key, id: id, jobs: map[jobKey]RowDigest{}, offsets: ix.Offsets, origin: ix.Origin,
		spanning: ix.Spanning, cuts: ix.Cuts, groups: indexGroups(ix), created: ix.CreatedAtUnixMs,
		landed: o.w.sched.WallUnixMs()}
	o.markers[key] = m
	i, _ := slices.BinarySearchFunc(o.order, id, func(s *markerInfo, id engine.SnapshotID) int { return s.id.Compare(id) })
	o.order = slices.Insert(o.order, i, m)
	o.pending = append(o.pending, m)
	o.checkCutReasons(m)
	defer o.decideValidity()
	bodyKey := strings.TrimSuffix(key, ".commit")
	body, ok := o.w.store.Object(bodyKey)
	if !ok {
		// A zombie's marker beyond its epoch's seal may land after the
		// sweeper removed its orphan body; a marker that counts may not.
		m.bodiless = true
		return
	}
	b, err := segment.CheckBody(ix, bodyKey, segment.Bytes(body), int64(len(body)))
	if err != nil {
		o.fail("segment %s fails its marker: %v", bodyKey, err)
		return
	}
	for i := range b.Index.Entries {
		o.readSlice(m, b, segment.SliceOrdinal(i))
	}
}

// readSlice checks each unit in a slice against what its source produced
// and adds the slice's rows to its job's expected digest. A unit's rows
// are consecutive in a slice; a unit found in two runs is committed twice
// (checkCommits), a unit split or padded fails its digest.
func (o *Oracle) readSlice(m *markerInfo, b *segment.Body, ord segment.SliceOrdinal) {
	s, err := b.ReadSlice(ord, o.mem)
	if err != nil {
		o.fail("segment %s slice %d: %v", m.key, ord, err)
		return
	}
	defer s.Release()
	k := jobKey{s.Entry.Key.SinkRef, s.Entry.Key.Namespace, s.Entry.Key.Schema, s.Sidecar != nil}
	job := m.jobs[k]
	var cdc []segment.CDCRow
	if s.Sidecar != nil {
		cdc = s.Sidecar.Rows
	}
	run := unitRun{}
	for _, batch := range s.Batches {
		n := int(batch.NumRows())
		var rows []segment.CDCRow
		if cdc != nil {
			if len(cdc) < n {
				o.fail("segment %s slice %d: sidecar of %d rows for %d", m.key, ord, len(cdc), n)
				return
			}
			rows, cdc = cdc[:n], cdc[n:]
		}
		if err := o.digestBatch(m, &job, &run, batch, rows); err != nil {
			o.fail("segment %s slice %d: %v", m.key, ord, err)
			return
		}
	}
	if run.rows > 0 {
		o.unitCommitted(m, run.uid, run.d)
	}
	m.jobs[k] = job
}

// unitRun is the unit whose rows a slice is going through.
type unitRun struct {
	uid  UID
	d    RowDigest
	rows int
}

// digestBatch adds a batch's rows to the job's digest and to the digest
// of the unit each belongs to, hashing each payload once.
func (o *Oracle) digestBatch(m *markerInfo, job *RowDigest, run *unitRun, b arrow.RecordBatch, cdc []segment.CDCRow) error {
	cols, err := UnitColumns(b)
	if err != nil {
		return err
	}
	for i := range cols.Len() {
		uid := UID(cols.UID(i))
		if run.rows > 0 && uid != run.uid {
			o.unitCommitted(m, run.uid, run.d)
			*run = unitRun{}
		}
		run.uid, run.rows = uid, run.rows+1
		ph := xxh3.HashString(cols.Payload(i))
		job.addRow(cols.UID(i), cols.Row(i), ph)
		job.addOptional(cols, i)
		run.d.addRow(cols.UID(i), cols.Row(i), ph)
		run.d.addOptional(cols, i)
		if cdc != nil {
			job.addChange(cdc[i])
			run.d.addChange(cdc[i])
		}
	}
	return nil
}

func (o *Oracle) unitCommitted(m *markerInfo, uid UID, got RowDigest) {
	u, ok := o.units[uid]
	switch {
	case !ok:
		o.fail("segment %s holds unit %s that no source produced", m.key, uid)
		return
	case got != u.digest:
		o.fail("unit %s in %s: %d rows (digest %016x), produced %d rows (digest %016x)", uid, m.key, got.Rows, got.Sum, u.digest.Rows, u.digest.Sum)
	}
	if len(u.markers) == 1 {
		o.multi = append(o.multi, uid)
	}
	u.markers = append(u.markers, m)
	m.uids = append(m.uids, uid)
	o.checkCovers(m, uid)
	if o.wal.logOnly[uid] {
		delete(o.wal.logOnly, uid)
		o.ledger.addSeg(m.key) // acked from the log; now in this segment
	}
}

// checkCovers: a segment's offsets cover every unit it holds — the
// replayable unit's partition at or above its position, the idempotent
// unit's key present — else a recovery that finds this segment last
// resumes a source below what was acked, or forgets a key.
func (o *Oracle) checkCovers(m *markerInfo, uid UID) {
	src := o.w.sourceOf(uid)
	spec := src.spec
	if spec.Replayable {
		key, want := src.offsetOf(uid)
		if v, _ := m.offsets.Get(key); v < want && !m.offsets.Covers(segment.Offsets{{Key: key, Value: want}}) {
			o.fail("marker %s holds unit %s, but its offsets say %s=%d", m.key, uid, key, v)
		}
		return
	}
	if _, ok := m.offsets.Get("idem/" + src.idemKeyOf(uid)); !ok {
		o.fail("marker %s holds unit %s, but its offsets lack its idempotency key %s", m.key, uid, src.idemKeyOf(uid))
	}
}

// decideValidity settles every pending marker whose epoch the writer
// object now seals: the object's versions are seen as they land, so each
// seal is read before a later recovery may drop it.
func (o *Oracle) decideValidity() {
	raw, ok := o.w.store.Object(o.w.layout.WriterKey())
	if !ok {
		return
	}
	rec, err := engine.ParseWriterObject(raw)
	if err != nil {
		o.fail("writer object does not parse: %v", err)
		return
	}
	o.writerEpoch = rec.Epoch()
	keep := o.pending[:0]
	for _, m := range o.pending {
		if m.id.Epoch >= rec.Floor() {
			keep = append(keep, m)
			continue
		}
		m.validity = validityInvalid
		if rec.Valid(m.id) {
			m.validity = validityValid
			o.checkBody(m)
		}
	}
	o.pending = keep
}

// checkBody: a marker that counts landed with its body.
func (o *Oracle) checkBody(m *markerInfo) {
	if m.bodiless {
		o.fail("marker %s counts, but it landed when its body did not exist", m.key)
	}
}

// markerDeleted settles a marker deleted while its validity was pending:
// only its owner reclaims a marker before a recovery seals its epoch (the
// sweeper deletes markers its writer object already rules out, which the
// oracle decided when that object landed), so it counted. A recovery that
// later finds nothing of that epoch leaves it no seal, rightly: nothing of
// it is left to own.
func (o *Oracle) markerDeleted(m *markerInfo) {
	if m.validity != validityPending {
		return
	}
	m.validity = validityValid
	o.checkBody(m)
	o.pending = slices.DeleteFunc(o.pending, func(p *markerInfo) bool { return p == m })
}

// counts reports whether a marker counts as a commit as far as the oracle
// knows: decided valid, or pending and the current writer's (a marker of
// an epoch a recovery in progress is about to seal does not count yet).
func (o *Oracle) counts(m *markerInfo) bool {
	switch m.validity {
	case validityValid:
		return true
	case validityPending:
		return o.writerEpoch == 0 || m.id.Epoch >= o.writerEpoch
	}
	return false
}

// onAck: an ACK must follow a marker holding the unit (S3 WAL) or a
// completed fsync of its log entry (disk WAL).
func (o *Oracle) onAck(uid UID) {
	if o.w.engCfg.Disk != nil {
		o.walAcked(uid)
		if !o.acked[uid] {
			o.acked[uid] = true
			o.ledger.add(uid, o.w.sourceOf(uid), "", o.units[uid].firstSeen)
		}
		return
	}
	u := o.units[uid]
	if u == nil || len(u.markers) == 0 {
		o.fail("unit %s acked before any marker holding it landed", uid)
		return
	}
	if o.acked[uid] { // a resubmitted unit can be acked again
		return
	}
	o.acked[uid] = true
	m := u.markers[len(u.markers)-1]
	for _, c := range u.markers {
		if o.counts(c) {
			m = c
		}
	}
	o.ledger.add(uid, o.w.sourceOf(uid), m.key, u.firstSeen)
}

// checkCommits: no unit is in two markers that count, and every acked
// unit is in one that counts. Cost: the units seen in several markers
// plus the acked units of invalid markers — not every unit.
func (o *Oracle) checkCommits() {
	for _, m := range o.pending {
		if m.bodiless && o.counts(m) {
			o.fail("marker %s counts, but it landed when its body did not exist", m.key)
		}
	}
	for _, uid := range o.multi {
		var valid []string
		for _, m := range o.units[uid].markers {
			if o.counts(m) {
				valid = append(valid, m.key)
			}
		}
		if len(valid) > 1 {
			o.fail("unit %s committed twice: in %s", uid, strings.Join(valid, " and "))
		}
	}
	for _, m := range o.order {
		if m.validity != validityInvalid {
			continue
		}
		for _, uid := range m.uids {
			// A marker still pending — its epoch's successor has claimed
			// but not yet sealed it (a recovery in its fence wait when the
			// run stopped) — cannot be judged yet: the seal decides it.
			if o.acked[uid] && !o.hasValidMarker(uid) && !o.hasUndecidedMarker(uid) {
				o.fail("unit %s was acked, but the only markers holding it (%s) do not count (beyond their epoch's seal)", uid, m.key)
			}
		}
	}
}

// hasUndecidedMarker reports whether a marker holding uid is pending
// under an epoch below the current writer's: a recovery has claimed past
// it and will seal it, but has not yet.
func (o *Oracle) hasUndecidedMarker(uid UID) bool {
	for _, m := range o.units[uid].markers {
		if m.validity == validityPending && !o.counts(m) {
			return true
		}
	}
	return false
}

func (o *Oracle) hasValidMarker(uid UID) bool {
	for _, m := range o.units[uid].markers {
		if o.counts(m) {
			return true
		}
	}
	return false
}

// checkFinal runs when the world has converged.
func (o *Oracle) checkFinal(eng engineView) {
	o.decideValidity()
	o.checkCommits()
	uids := make([]UID, 0, len(o.units))
	for uid := range o.units {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if !o.hasValidMarker(uid) && !o.brokerExcused(uid) && !o.givenUp[uid] {
			o.fail("unit %s produced but never committed", uid)
		}
	}
	o.checkBrokerHoles()
	live := 0
	for _, m := range o.order {
		if o.counts(m) && !o.reclaimed[m.key] {
			live++
		}
	}
	if n := len(eng.Segments()); n != live {
		o.fail("final engine owns %d segments; %d markers that count are not reclaimed", n, live)
	}
	if len(o.w.dests) > 0 {
		// The destinations and their tables are the world's, checked
		// once for every pipeline (World.finish).
		o.checkReclaimed()
		o.walFinal()
	}
}

// checkSafety runs when the run stopped early, as it should have (the
// engine halted on corruption): what was acked is committed and nothing
// is committed twice — the liveness checks do not apply. (The
// destinations, the world's, must then hold nothing but committed rows,
// each at most once: World.finish.)
func (o *Oracle) checkSafety() {
	o.decideValidity()
	o.checkCommits()
}

// checkNoSilentRot runs when the world converged — so no alert was
// raised: the engine must not have been answered with bytes corruption at
// rest damaged, or it went on past corruption without a word (its checks
// refuse such bytes, re-read them and, when every read is damaged, halt
// and alert).
func (o *Oracle) checkNoSilentRot() {
	if rotten := o.w.store.RottenReads(); len(rotten) > 0 {
		o.fail("the engine read %s, damaged at rest, and went on without an alert (%d such reads)", rotten[0], len(rotten))
	}
}

func expiredAfter(now, seen, window time.Duration) bool { return now-seen > window }
