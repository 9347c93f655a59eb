package objects

import (
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// With Order "keys" the source keeps a floor: a mark such that every
// object whose key sorts at or below it is done. Listings start after
// it, and each unit carries it as a segment floor, which retires the
// offset keys of the objects it covers from the host's offsets view and
// from _offsets: what the source keeps is the floor and the keys of
// the objects above it — those in flight and those in the window.
//
// The floor rises over an object once the object is done and its page
// was listed at least Settle after it was first listed (below): an
// object that appears later with a key below one already listed is
// still found, as long as it appears within Settle. One that appears
// later still, below the floor, is never
// listed: the contract of Order "keys" is that names sort by arrival
// within Settle (time-stamped names, as log shippers write them).
//
// Settle is counted to when the page holding the object was listed (in
// the pass that raises the floor), not to now: a pass lists page after
// page, so an object that became visible behind a later page's position
// is missed by this pass, and only a listing of its range made Settle
// after the higher object was first seen is sure to show it. So the
// floor rises over objects in a later pass than the one that first saw
// them, and a pass ends once its line holds lineMax objects (the next
// starts at once, from the floor): the floor keeps up however long the
// prefix is.
//
// floorLine is the dispatcher's view of the objects above the floor,
// in key order, for one pass, each with when its page was listed; seen
// (across passes) when each was first listed. Only the dispatcher
// touches it.
type floorLine struct {
	items []lineItem
	seen  map[string]time.Time
}

// lineItem is an object of the line and when its page was listed.
type lineItem struct {
	Object
	pageAt time.Time
}

// lineMax ends a pass whose line holds this many objects (Order "keys").
const lineMax = 10_000

// add appends o, of a page listed at pageAt, in key order.
func (l *floorLine) add(o Object, pageAt time.Time) {
	l.items = append(l.items, lineItem{o, pageAt})
	if _, ok := l.seen[o.Key]; !ok {
		l.seen[o.Key] = pageAt
	}
}

// advanceFloor raises the floor over the done and settled objects at the
// front of the line.
func (s *Source) advanceFloor() {
	if s.cfg.Order != OrderKeys {
		return
	}
	l := &s.line
	mark := ""
	for len(l.items) > 0 {
		o := l.items[0]
		if o.pageAt.Sub(l.seen[o.Key]) < s.cfg.Settle || !s.finished(o.Object) {
			break
		}
		mark = o.Key
		l.items = l.items[1:]
	}
	if mark == "" {
		return
	}
	fam := family(s.cfg.Name)
	if n := segment.FloorMarkMax(fam); len(mark) > n {
		mark = mark[:n] // below the whole key: still a sound floor
	}
	s.prog.floorTo(mark, fam)
	for k := range l.seen {
		if k <= mark {
			delete(l.seen, k)
		}
	}
}

// finished reports whether o needs nothing more: ignored, empty, done by
// its offset, or settled (no rows, skipped).
func (s *Source) finished(o Object) bool {
	if ignored(o.Key) || o.Size == 0 || s.prog.isSettled(o.Key) {
		return true
	}
	f, err := formatOf(s.cfg.Format, o.Key)
	return err == nil && done(f, s.prog.get(s.OffsetKey(o.Key)), o.Size)
}

// family is the offset-key family of source name's plain keys, which
// its floor covers.
func family(name string) string { return offsetKeyPrefix + name + "/" }
