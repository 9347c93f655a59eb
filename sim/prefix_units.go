package sim

import (
	"math"
	"strings"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// How the world holds the objects source to its units. Each unit must
// be a contiguous run of one object's pieces (prefix_objects.go), each
// whole, starting at the first piece the source's offsets do not cover
// — the recovered ones it started from, advanced by every unit answered
// nil — and its offset must be the last piece's: rows are never skipped
// or sent twice by one run, offsets only advance and say exactly where
// the rows end. Across runs the oracles take over: every piece is
// committed once (a unit the engine committed before a crash is found
// covered by its offset when it comes again), and at convergence every
// object is done in the engine's offsets — or, unreadable, skipped by
// the source and counted.

// ownOffsets are the entries of the offsets view of the prefix source
// called name.
func ownOffsets(view segment.Offsets, name string) map[string]uint64 {
	out := map[string]uint64{}
	for _, o := range view {
		if strings.HasPrefix(o.Key, "objects/"+name+"/") {
			out[o.Key] = o.Value
		}
	}
	return out
}

// ingest maps a unit to the pieces it holds and hands it to the engine;
// once it is acked, so is each piece.
func (r *prefixRun) ingest(c *call, answer func()) {
	s, w := r.s, r.s.w
	obj, first, uids, ok := r.piecesOf(c.unit)
	if !ok {
		return
	}
	o := plainOffset(c.unit)
	key, value := o.Key, o.Value
	resumed := first > 0 && !r.acked[key]
	if r.inFlight > 0 {
		w.mark(MarkPrefixParallel)
	}
	r.inFlight++
	inc := w.inc.ID()
	w.submitUnit(uids[0], c.unit, nil, func(err error) {
		r.inFlight--
		if err != nil {
			w.sourceError(s, uids[0], err)
		} else {
			w.prefixAcked(uids, inc)
			r.pos[key], r.acked[key] = value, true
			r.markUnit(obj, first, len(uids), resumed)
		}
		c.err = err
		answer()
	})
}

// prefixAcked: every piece of an acked unit is acked.
func (w *World) prefixAcked(uids []UID, inc uint64) {
	for _, uid := range uids {
		w.oracle.onAck(uid) // a zombie's acks count too
	}
	if w.tapping() {
		w.note(NoteAck, inc, "", uids[0].String())
	}
}

// piecesOf checks that a unit is a contiguous run of one object's whole
// pieces from the first its source has not ingested, under the last
// one's offset, and returns the object, the first piece and the pieces'
// ids; anything else fails the run.
func (r *prefixRun) piecesOf(u engine.Unit) (*objectLayout, int, []UID, bool) {
	s, w := r.s, r.s.w
	if !r.checkOffsets(u.Offsets) {
		return nil, 0, nil, false
	}
	o := plainOffset(u)
	i, known := s.objKeys[o.Key]
	if !known || s.objects[i].corrupt != "" {
		w.oracle.fail("prefix source %s: a unit with offset key %q, which names no object it can ingest", s.spec.Name, o.Key)
		return nil, 0, nil, false
	}
	obj := s.objects[i]
	first := obj.firstUncovered(r.pos[o.Key])
	runs, err := uidRuns(u)
	if err != nil || len(runs) == 0 {
		w.oracle.fail("prefix source %s: object %s: a unit whose rows cannot be read (%d runs): %v", s.spec.Name, obj.name, len(runs), err)
		return nil, 0, nil, false
	}
	uids := make([]UID, len(runs))
	for j, run := range runs {
		if p := first + j; p >= len(obj.pieces) || run.uid != obj.pieces[p].uid || run.rows != obj.pieces[p].rows {
			w.oracle.fail("prefix source %s: object %s: a unit at offset %d holds rows of %s (%d) as its piece %d; "+
				"the pieces from %d on are due (rows skipped, split or sent twice)", s.spec.Name, obj.name, r.pos[o.Key], run.uid, run.rows, j, first)
			return nil, 0, nil, false
		}
		uids[j] = run.uid
	}
	if want := obj.pieces[first+len(runs)-1].end; o.Value != want {
		w.oracle.fail("prefix source %s: object %s ingested with offset %s=%d, want %s=%d (the end of the rows it holds)",
			s.spec.Name, obj.name, o.Key, o.Value, o.Key, want)
		return nil, 0, nil, false
	}
	return obj, first, uids, true
}

// firstUncovered is the first piece an offset value v does not cover.
func (o *objectLayout) firstUncovered(v uint64) int {
	for i, p := range o.pieces {
		if p.end > v {
			return i
		}
	}
	return len(o.pieces)
}

// uidRun is a run of rows of one unit id.
type uidRun struct {
	uid  UID
	rows int
}

// uidRuns are a unit's rows as runs of one id, in order.
func uidRuns(u engine.Unit) ([]uidRun, error) {
	var out []uidRun
	for _, b := range u.Batches {
		cols, err := UnitColumns(b)
		if err != nil {
			return out, err
		}
		for i := range cols.Len() {
			uid := UID(cols.UID(i))
			if n := len(out); n > 0 && out[n-1].uid == uid {
				out[n-1].rows++
				continue
			}
			out = append(out, uidRun{uid: uid, rows: 1})
		}
	}
	return out, nil
}

// markUnit counts the rare paths an acked unit took.
func (r *prefixRun) markUnit(obj *objectLayout, first, n int, resumed bool) {
	w := r.s.w
	if first > 0 {
		w.mark(MarkPrefixMidObject)
	}
	if resumed {
		w.mark(MarkPrefixResumed)
	}
	if obj.format == objParquet && n > 1 {
		w.mark(MarkPrefixSpan)
	}
	if first+n < len(obj.pieces) {
		return
	}
	switch {
	case obj.format == objJSONL:
		w.mark(MarkPrefixJSONL)
	case obj.format == objCSV:
		w.mark(MarkPrefixCSV)
	case len(obj.pieces) > 1 && r.s.spec.Formats != "":
		w.mark(MarkPrefixRowGroups)
	}
}

// checkSkipped: the source skips no more objects than the world dropped
// that it cannot ingest (a readable object skipped is never done, but
// say so at once).
func (r *prefixRun) checkSkipped() {
	n := r.runner.Skipped()
	for ; r.skipped < n; r.skipped++ {
		r.s.w.mark(MarkPrefixSkipped)
		if r.skipped == uint64(r.s.corrupt) {
			r.s.w.oracle.fail("prefix source %s skipped %d objects; the world dropped %d it cannot ingest", r.s.spec.Name, n, r.s.corrupt)
		}
	}
}

// drop puts the prefix source's next object in the store, as an outside
// producer's PUT that landed, and schedules the one after.
func (s *source) drop() {
	if s.exhausted(s.newSeq+1, s.newSeq) {
		return
	}
	s.newSeq++
	obj, body, err := s.buildObject(s.newSeq)
	if err != nil {
		s.w.oracle.fail("prefix source %s: writing object %d: %v", s.spec.Name, s.newSeq, err)
		return
	}
	if _, err := s.w.store.put(landingRoot+s.spec.Name+"/"+obj.name, body, false, ""); err != nil {
		s.w.oracle.fail("prefix source %s: dropping object %s: %v", s.spec.Name, obj.name, err)
		return
	}
	s.objKeys[obj.offsetKey] = len(s.objects)
	s.objects = append(s.objects, obj)
	if obj.corrupt != "" {
		s.corrupt++
	}
	s.w.sched.After(s.rand.Exp(s.spec.Interval), s.drop)
}

// plainOffset is the offset of u that is no floor.
func plainOffset(u engine.Unit) segment.Offset {
	for _, o := range u.Offsets {
		if !segment.IsFloor(o.Key) {
			return o
		}
	}
	return segment.Offset{}
}

// checkOffsets: a unit of the objects source carries its object's
// offset and, with order "keys", its floor — which must be sound: every
// object at or below it done (floorSound).
func (r *prefixRun) checkOffsets(o segment.Offsets) bool {
	s, w := r.s, r.s.w
	fam := "objects/" + s.spec.Name + "/"
	plain, floors := 0, 0
	for _, e := range o {
		f, mark, ok := segment.ParseFloor(e.Key)
		switch {
		case !segment.IsFloor(e.Key):
			plain++
		case !ok || f != fam || !s.spec.OrderKeys:
			w.oracle.fail("prefix source %s: a unit with the floor %q (family %q; order keys %v)", s.spec.Name, e.Key, fam, s.spec.OrderKeys)
			return false
		default:
			floors++
			w.mark(MarkPrefixFloor)
			if !r.floorSound(mark) {
				return false
			}
		}
	}
	if plain != 1 || floors > 1 {
		w.oracle.fail("prefix source %s: a unit with offsets %v: want its object's, and a floor or none", s.spec.Name, o)
		return false
	}
	return true
}

// floorSound: every object whose name sorts at or below mark is done —
// committed to its end in the engine's offsets — or one the source
// cannot ingest.
// Objects are named in drop order (objName), so the check walks on from
// where the last floor left it.
func (r *prefixRun) floorSound(mark string) bool {
	s, w := r.s, r.s.w
	if mark > r.floor {
		r.floor = mark
	}
	for ; s.floorUpTo < len(s.objects) && s.objects[s.floorUpTo].name <= mark; s.floorUpTo++ {
		obj := s.objects[s.floorUpTo]
		if obj.corrupt != "" {
			w.mark(MarkPrefixFloorSkipped)
			continue
		}
		end := obj.pieces[len(obj.pieces)-1].end
		if v, _ := w.eng.Offset(obj.offsetKey); v < end {
			w.oracle.fail("prefix source %s: a unit carries the floor %q, but object %s under it is not done (%s=%d, its end %d)",
				s.spec.Name, mark, obj.name, obj.offsetKey, v, end)
			return false
		}
	}
	return true
}

// prefixIdle: every readable object dropped is done in the engine's
// offsets (an object committed before a crash is done without an ACK
// the world saw), the current run skipped every unreadable one, and
// nothing is with the engine. ackedUpTo walks forward only: the
// offsets view never goes back.
func (s *source) prefixIdle() bool {
	if s.run != nil && s.run.inFlight > 0 || s.w.eng == nil || !s.w.eng.Ready() {
		return false
	}
	for s.ackedUpTo < s.newSeq {
		obj := s.objects[s.ackedUpTo]
		if obj.corrupt == "" {
			if v, _ := s.w.eng.Offset(obj.offsetKey); v < obj.pieces[len(obj.pieces)-1].end {
				break
			}
		}
		s.ackedUpTo++
	}
	return s.ackedUpTo == s.newSeq && (s.corrupt == 0 || s.run != nil && s.run.runner.Skipped() >= s.unfloored())
}

// unfloored counts the objects the source cannot ingest that no floor in
// the engine's offsets covers: each current run must skip them. (Under a
// floor one is never listed again: order "keys" reports a skipped object
// once, not at every restart.)
func (s *source) unfloored() uint64 {
	n := uint64(0)
	for _, obj := range s.objects {
		if obj.corrupt == "" {
			continue
		}
		if v, _ := s.w.eng.Offset(obj.offsetKey); v != math.MaxUint64 {
			n++
		}
	}
	return n
}

// pieceOf is the object holding piece uid of a prefix source, and the
// piece.
func (s *source) pieceOf(uid UID) (*objectLayout, piece) {
	k, i := uid.seq(), 0
	if s.spec.Formats != "" {
		k, i = uid.seq()>>pieceBits, pieceIndex(uid)
	}
	obj := s.objects[k-1]
	return obj, obj.pieces[i]
}

// donePieces are the pieces of the objects up to ackedUpTo: all done.
func (s *source) donePieces() []UID {
	var out []UID
	for _, obj := range s.objects[:s.ackedUpTo] {
		for _, p := range obj.pieces {
			out = append(out, p.uid)
		}
	}
	return out
}

// offsetOf is where the offsets hold a replayable unit: its key, and the
// value that covers it.
func (s *source) offsetOf(uid UID) (string, uint64) {
	if s.spec.Prefix {
		obj, p := s.pieceOf(uid)
		return obj.offsetKey, p.end
	}
	return s.keyOf(uid.partition()), uid.seq() + uint64(s.first())
}
