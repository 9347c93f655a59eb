package objects

import (
	"errors"
	"sync"

	"github.com/skipprd/skipprd/engine/segment"
)

// progress is what a Run knows of its objects: where each resumes, which
// are finished without an offset to say so, which have a unit in
// flight, and the floor. The tasks ingesting objects at once share it,
// under mu; no lock is held across a call that may block (a read, an
// ingest, a sleep).
//
// INVARIANT: no key of pos and no object of settled is at or below the
// floor (floorTo drops them); a key has at most one unit in flight
// (claim checks it).
type progress struct {
	mu sync.Mutex
	// pos: the source's own copy of its offsets, from the view Run was
	// given, advanced as each unit is acked, never otherwise.
	pos map[string]uint64
	// settled: objects Run has finished with that no offset marks done —
	// ones holding no rows, ones skipped — so a poll passes them over.
	// Memory only: a restart reads them again (unless under the floor).
	settled map[string]bool
	flying  map[string]bool // offset keys with a unit in flight
	// floor: with Order "keys", every object whose key sorts at or below
	// it is done ("": none). Carried by every unit as the family's
	// segment floor, and what a listing starts after.
	floor string
	// err: the error the Run stops with — of the object first in key
	// order that failed (stopAt, its key), or one that is no object's
	// (stopAt ""): objects at or after stopAt start no new unit, those
	// before it go on to their end, as when objects went one at a time.
	err    error
	stopAt string
}

func newProgress(view segment.Offsets, name string) *progress {
	p := &progress{pos: map[string]uint64{}, settled: map[string]bool{}, flying: map[string]bool{}}
	fam := family(name)
	for _, o := range ownOffsets(view, name) {
		if f, mark, ok := segment.ParseFloor(o.Key); ok && f == fam {
			p.floor = max(p.floor, mark)
		} else if !segment.IsFloor(o.Key) {
			p.pos[o.Key] = o.Value
		}
	}
	return p
}

func (p *progress) get(key string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pos[key]
}

// claim records that a unit advancing key to value is in flight, and
// returns the floor it carries; it refuses one that breaks what submit
// relies on: offsets only advance, one unit per key at a time.
func (p *progress) claim(key string, value uint64) (floor string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flying[key] {
		return "", invariantf("a unit for %q submitted while another is in flight", key)
	}
	if cur := p.pos[key]; value <= cur {
		return "", invariantf("unit for %q at offset %d, not above the acked %d", key, value, cur)
	}
	p.flying[key] = true
	return p.floor, nil
}

// answered ends key's unit in flight; acked, it advances pos.
func (p *progress) answered(key string, value uint64, acked bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.flying, key)
	if acked {
		p.pos[key] = max(p.pos[key], value)
	}
}

func (p *progress) settle(object string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.settled[object] = true
}

func (p *progress) isSettled(object string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.settled[object]
}

// failed records the error a task stopped with, ingesting object (its
// key), and returns the Run's.
func (p *progress) failed(err error, object string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var oe *ObjectError
	if !errors.As(err, &oe) {
		object = "" // the host refuses, or an invariant broke: stop all
	}
	if p.err == nil || (p.stopAt != "" && object < p.stopAt) {
		p.err, p.stopAt = err, object
	}
}

// stops reports whether a unit of object may not start: the Run stops,
// and object is not before the failed one.
func (p *progress) stops(object string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err != nil && (p.stopAt == "" || object >= p.stopAt)
}

func (p *progress) firstErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *progress) floorMark() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.floor
}

// floorTo raises the floor to mark and forgets what it covers.
func (p *progress) floorTo(mark, fam string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mark <= p.floor {
		return
	}
	p.floor = mark
	for k := range p.pos {
		if segment.Floored(k, fam, mark) {
			delete(p.pos, k)
		}
	}
	for o := range p.settled {
		if o <= mark {
			delete(p.settled, o)
		}
	}
}

// size is how many keys and settled objects are held.
func (p *progress) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pos) + len(p.settled)
}
