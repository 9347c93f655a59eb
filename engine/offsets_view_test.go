package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// viewModel runs the offsets view against a trivially simple model: a
// plain map of every source offset, and the _offsets object as a map
// with a version, which a foreign writer may add to. It checks after
// every step that
//
//   - the view's invariants hold (offsetsView.check);
//   - the view holds exactly the model's keys and values;
//   - whatever the view calls durable is in the object at or above the
//     value asked;
//   - a write carries exactly the model's keys;
//   - a key the object held never leaves it unless the view holds it
//     higher (a segment not yet reclaimed covers it);
//
// and, at the end, that writing until nothing is dirty leaves everything
// durable and the object equal to the model.
type viewModel struct {
	v      *offsetsView
	vals   map[string]uint64
	obj    *storedObject     // nil: no object
	stored map[string]uint64 // the most each key was ever stored at
	flying bool              // a write begun and not yet ended
	body   segment.Offsets   // what it carries
	legacy segment.Offsets   // idempotency keys the view handed back from an old-format object
}

type storedObject struct {
	version int
	keys    map[string]uint64
}

func drawSourceOffsets(t *rapid.T, label string) segment.Offsets {
	key := rapid.Custom(func(t *rapid.T) string { return fmt.Sprintf("s%d", rapid.IntRange(0, 9).Draw(t, "s")) })
	var o segment.Offsets
	for _, k := range rapid.SliceOfNDistinct(key, 0, 6, rapid.ID).Draw(t, label) {
		o = append(o, segment.Offset{Key: k, Value: rapid.Uint64Range(0, 120).Draw(t, "v")})
	}
	slices.SortFunc(o, func(a, b segment.Offset) int { return strings.Compare(a.Key, b.Key) })
	return o
}

func (m *viewModel) maxMerge(o segment.Offsets) {
	for _, e := range o {
		if cur, ok := m.vals[e.Key]; !ok || e.Value > cur {
			m.vals[e.Key] = e.Value
		}
	}
}

// A segment commits offsets.
func (m *viewModel) commit(t *rapid.T) {
	o := drawSourceOffsets(t, "commit")
	m.v.merge(o)
	m.maxMerge(o)
}

// A foreign writer adds keys.
func (m *viewModel) foreign(t *rapid.T) {
	keys := map[string]uint64{}
	for _, e := range drawSourceOffsets(t, "foreign") {
		keys[e.Key] = e.Value
	}
	m.put(keys, false)
}

// put stores keys in the object, replacing (a write) or adding (a
// foreign writer's max-merge).
func (m *viewModel) put(keys map[string]uint64, replace bool) {
	if m.obj == nil {
		m.obj = &storedObject{keys: map[string]uint64{}}
	}
	if replace {
		m.obj.keys = map[string]uint64{}
	}
	for k, val := range keys {
		m.obj.keys[k] = max(m.obj.keys[k], val)
		m.stored[k] = max(m.stored[k], val)
	}
	m.obj.version++
}

// matches is If-Match / If-None-Match: the object is the version the
// view saw.
func (m *viewModel) matches() bool {
	if m.obj == nil {
		return m.v.etag == ""
	}
	return m.v.etag == strconv.Itoa(m.obj.version)
}

// The engine reads the object (recovery, or after a refused write).
func (m *viewModel) read(*rapid.T) {
	if !m.flying { // the engine reads the object only between its writes
		m.readInto()
	}
}

func (m *viewModel) readInto() {
	if m.obj == nil {
		m.v.etag = ""
		return
	}
	var o segment.Offsets
	for _, k := range slices.Sorted(maps.Keys(m.obj.keys)) {
		o = append(o, segment.Offset{Key: k, Value: m.obj.keys[k]})
	}
	m.legacy = append(m.legacy, m.v.mergeObject(o)...)
	m.v.etag = strconv.Itoa(m.obj.version)
	m.maxMerge(slices.DeleteFunc(o, isIdemOffset))
}

// A write begins: it must carry exactly the model's keys.
func (m *viewModel) begin(t *rapid.T) {
	if m.flying {
		return
	}
	m.flying, m.body = true, m.v.beginWrite()
	m.checkBody(t, m.body)
}

func (m *viewModel) checkBody(t *rapid.T, body segment.Offsets) {
	var want segment.Offsets
	for _, k := range slices.Sorted(maps.Keys(m.vals)) {
		want = append(want, segment.Offset{Key: k, Value: m.vals[k]})
	}
	if !slices.Equal(body, want) {
		t.Fatalf("write carries %v, model %v", body, want)
	}
}

// The write in flight ends: it lands if the object is still the version
// last seen (If-Match), else it is refused and the object re-read.
func (m *viewModel) end(t *rapid.T) { m.land(t, rapid.Bool().Draw(t, "unheard")) }

// land ends the write in flight; it reports whether it landed.
func (m *viewModel) land(t *rapid.T, unheard bool) bool {
	if !m.flying {
		return false
	}
	m.flying = false
	if !m.matches() || unheard {
		m.v.endWrite(false)
		m.readInto()
		return false
	}
	keys := map[string]uint64{}
	for _, e := range m.body {
		keys[e.Key] = e.Value
	}
	m.put(keys, true)
	m.v.etag = strconv.Itoa(m.obj.version)
	m.v.endWrite(true)
	m.checkKept(t)
	return true
}

// checkKept: a source offset the object held is still there, unless the
// view holds it higher.
func (m *viewModel) checkKept(t *rapid.T) {
	for k, val := range m.stored {
		if !strings.HasPrefix(k, idemPrefix) && m.vals[k] <= val && m.obj.keys[k] < val {
			t.Fatalf("%s=%d was stored and is no longer", k, val)
		}
	}
}

func (m *viewModel) check(t *rapid.T) {
	if err := m.v.check(); err != nil {
		t.Fatal(err)
	}
	got, want := m.v.sorted(), segment.Offsets{}
	for _, k := range slices.Sorted(maps.Keys(m.vals)) {
		want = append(want, segment.Offset{Key: k, Value: m.vals[k]})
	}
	if !slices.Equal(got, want) || m.v.len() != len(m.vals) {
		t.Fatalf("view %v (len %d), model %v", got, m.v.len(), want)
	}
	for k, val := range m.vals {
		for _, w := range []uint64{val, val / 2} {
			if m.v.durable(segment.Offsets{{Key: k, Value: w}}) && (m.obj == nil || m.obj.keys[k] < w) {
				t.Fatalf("%s ≥ %d called durable; the object holds %v", k, w, m.obj)
			}
		}
	}
}

// flush writes without interference until nothing is dirty.
func (m *viewModel) flush(t *rapid.T) {
	m.land(t, false)
	for round := 0; m.v.dirty(); round++ {
		if round > 2 {
			t.Fatalf("still dirty after %d writes", round)
		}
		m.flying, m.body = true, m.v.beginWrite()
		m.checkBody(t, m.body)
		m.land(t, false)
	}
	for k, val := range m.vals {
		if !m.v.durable(segment.Offsets{{Key: k, Value: val}}) {
			t.Fatalf("%s=%d not durable after a write", k, val)
		}
	}
	if m.obj != nil && slices.ContainsFunc(slices.Collect(maps.Keys(m.obj.keys)), func(k string) bool { return strings.HasPrefix(k, idemPrefix) }) {
		t.Fatalf("the object still holds idempotency keys after a write: %v", m.obj.keys)
	}
}

func TestOffsetsViewMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &viewModel{v: newOffsetsView(), vals: map[string]uint64{}, stored: map[string]uint64{}}
		if rapid.Bool().Draw(t, "old format") {
			// An old-format _offsets holds idempotency keys too: the view
			// hands them back and stays stale until written.
			keys := map[string]uint64{"idem/a": 5, "idem/b": 7}
			for _, e := range drawSourceOffsets(t, "legacy") {
				keys[e.Key] = e.Value
			}
			m.put(keys, false)
			m.readInto()
			if len(m.legacy) != 2 || !m.v.stale {
				t.Fatalf("old format: handed back %v, stale %t", m.legacy, m.v.stale)
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"commit":  m.commit,
			"foreign": m.foreign,
			"read":    m.read,
			"begin":   m.begin,
			"end":     m.end,
			"":        m.check,
		})
		m.flush(t)
	})
}
