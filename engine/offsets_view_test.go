package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// viewModel runs the offsets view against a trivially simple model: a
// plain map of every key, expiry as the spec says it (an idempotency key
// goes when the end of its bucket is before now − window), and a store
// of checkpoint objects, each a map with a version, that a foreign writer
// may add to. It checks after every step that
//
//   - the view's invariants hold (offsetsView.check);
//   - the view holds exactly the model's keys and values;
//   - whatever the view calls durable is in the store, in the object the
//     key belongs to, at or above the value asked (or expired);
//   - a write carries exactly the model's keys of that object;
//   - a key the store held never leaves it unless it expired or the view
//     holds it higher (a segment not yet reclaimed covers it), provided
//     _offsets is written only while no bucket is dirty (as a round
//     does);
//
// and, at the end, that full rounds (buckets, then _offsets) leave
// everything durable and every object equal to the model.
type viewModel struct {
	v        *offsetsView
	vals     map[string]uint64
	store    map[int64]*storedObject // by part number (sourcesPart: _offsets)
	stored   map[string]uint64       // the most each key was ever stored at
	cutoffMs int64
	flying   *viewPart       // a write begun and not yet ended
	body     segment.Offsets // what it carries
}

type storedObject struct {
	version int
	keys    map[string]uint64
}

const (
	modelWindow = 64 * time.Millisecond // buckets of 4 ms
	modelWidth  = 4
)

func (m *viewModel) home(key string, val uint64) int64 {
	if !strings.HasPrefix(key, idemPrefix) {
		return sourcesPart
	}
	return int64(val / modelWidth)
}

func (m *viewModel) expired(key string, val uint64) bool {
	return strings.HasPrefix(key, idemPrefix) && int64(val/modelWidth+1)*modelWidth < m.cutoffMs
}

func drawOffsets(t *rapid.T, label string) segment.Offsets {
	key := rapid.Custom(func(t *rapid.T) string {
		if rapid.Bool().Draw(t, "idem") {
			return fmt.Sprintf("idem/k%02d", rapid.IntRange(0, 25).Draw(t, "k"))
		}
		return fmt.Sprintf("s%d", rapid.IntRange(0, 4).Draw(t, "s"))
	})
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
	o := drawOffsets(t, "commit")
	m.v.merge(o)
	m.maxMerge(o)
}

// Time passes and expired buckets go.
func (m *viewModel) expire(t *rapid.T) {
	m.cutoffMs += rapid.Int64Range(0, 12).Draw(t, "advance")
	dropped, _ := m.v.expire(m.cutoffMs)
	for _, p := range dropped {
		if p == m.flying {
			m.flying = nil // its completion will find it dropped
		}
	}
	maps.DeleteFunc(m.vals, m.expired)
}

// A foreign writer adds keys that belong to one object.
func (m *viewModel) foreign(t *rapid.T) {
	o := drawOffsets(t, "foreign")
	if len(o) == 0 {
		return
	}
	n := m.home(o[0].Key, o[0].Value)
	keys := map[string]uint64{}
	for _, e := range o {
		if m.home(e.Key, e.Value) == n {
			keys[e.Key] = e.Value
		}
	}
	m.put(n, keys, false)
}

func (m *viewModel) object(n int64) *storedObject {
	if m.store[n] == nil {
		m.store[n] = &storedObject{keys: map[string]uint64{}}
	}
	return m.store[n]
}

// put stores keys in object n, replacing (a write) or adding (a foreign
// writer's max-merge).
func (m *viewModel) put(n int64, keys map[string]uint64, replace bool) {
	obj := m.object(n)
	if replace {
		obj.keys = map[string]uint64{}
	}
	for k, val := range keys {
		obj.keys[k] = max(obj.keys[k], val)
		m.stored[k] = max(m.stored[k], val)
	}
	obj.version++
}

// matches is If-Match / If-None-Match: the object is the version p saw.
func (m *viewModel) matches(p *viewPart) bool {
	obj := m.store[p.bucket]
	if obj == nil {
		return p.etag == ""
	}
	return p.etag == strconv.Itoa(obj.version)
}

// An old-format _offsets holds idempotency keys too.
func (m *viewModel) legacy(t *rapid.T) {
	keys := map[string]uint64{}
	for _, e := range drawOffsets(t, "legacy") {
		keys[e.Key] = e.Value
	}
	m.put(sourcesPart, keys, false)
}

// The engine reads one object (recovery, or after a refused write).
func (m *viewModel) read(t *rapid.T) {
	n := rapid.SampledFrom(slices.Sorted(maps.Keys(m.store))).Draw(t, "object")
	p := m.v.part(n)
	if p == m.flying {
		return // the engine reads an object only between its writes
	}
	m.readInto(p)
}

func (m *viewModel) readInto(p *viewPart) {
	obj := m.store[p.bucket]
	if obj == nil {
		p.etag = ""
		return
	}
	var o segment.Offsets
	for _, k := range slices.Sorted(maps.Keys(obj.keys)) {
		o = append(o, segment.Offset{Key: k, Value: obj.keys[k]})
	}
	m.v.mergeObject(o, p)
	p.etag = strconv.Itoa(obj.version)
	m.maxMerge(o)
}

// A write of one part begins: it must carry exactly the model's keys.
// _offsets is written only while no bucket is dirty, as in a round.
func (m *viewModel) begin(t *rapid.T) {
	if m.flying != nil {
		return
	}
	p := m.v.sources
	if n := rapid.IntRange(-1, len(m.v.nums)-1).Draw(t, "part"); n >= 0 {
		p = m.v.buckets[m.v.nums[n]]
	} else if len(m.v.dirtyBuckets()) > 0 {
		return
	}
	m.flying, m.body = p, m.v.beginWrite(p)
	m.checkBody(t, p, m.body)
}

func (m *viewModel) checkBody(t *rapid.T, p *viewPart, body segment.Offsets) {
	var want segment.Offsets
	for _, k := range slices.Sorted(maps.Keys(m.vals)) {
		if m.home(k, m.vals[k]) == p.bucket {
			want = append(want, segment.Offset{Key: k, Value: m.vals[k]})
		}
	}
	if !slices.Equal(body, want) {
		t.Fatalf("write of part %d carries %v, model %v", p.bucket, body, want)
	}
}

// The write in flight ends: it lands if the object is still the version
// last seen (If-Match), else it is refused and the object re-read.
func (m *viewModel) end(t *rapid.T) { m.land(t, rapid.Bool().Draw(t, "unheard")) }

// land ends the write in flight; it reports whether it landed.
func (m *viewModel) land(t *rapid.T, unheard bool) bool {
	p := m.flying
	if p == nil {
		return false
	}
	m.flying = nil
	if !m.matches(p) || unheard {
		m.v.endWrite(p, false)
		m.readInto(p)
		return false
	}
	keys := map[string]uint64{}
	for _, e := range m.body {
		keys[e.Key] = e.Value
	}
	m.put(p.bucket, keys, true)
	p.etag = strconv.Itoa(m.store[p.bucket].version)
	m.v.endWrite(p, true)
	m.checkKept(t)
	return true
}

// checkKept: a key the store held is still there, unless it expired or
// the view holds it higher.
func (m *viewModel) checkKept(t *rapid.T) {
	for k, val := range m.stored {
		if m.expired(k, val) || m.vals[k] > val {
			continue
		}
		kept := false
		for _, obj := range m.store {
			kept = kept || obj.keys[k] >= val
		}
		if !kept {
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
			if !m.v.durable(segment.Offsets{{Key: k, Value: w}}, m.cutoffMs) || m.expired(k, w) {
				continue
			}
			obj := m.store[m.home(k, val)]
			if obj == nil || obj.keys[k] < w {
				t.Fatalf("%s ≥ %d called durable; its object holds %v", k, w, obj)
			}
		}
	}
}

// flush runs full rounds without interference until nothing is dirty,
// as writeCheckpoint does: dirty buckets, then _offsets if they all
// landed; a refused write re-reads and the round starts again.
func (m *viewModel) flush(t *rapid.T) {
	m.land(t, false)
	write := func(p *viewPart) bool {
		m.flying, m.body = p, m.v.beginWrite(p)
		m.checkBody(t, p, m.body)
		return m.land(t, false)
	}
	expire := func() {
		m.v.expire(m.cutoffMs)
		maps.DeleteFunc(m.vals, m.expired)
	}
	expire()
	for round := 0; len(m.v.dirtyBuckets()) > 0 || m.v.sources.dirty(); round++ {
		if round > 4 {
			t.Fatalf("still dirty after %d rounds", round)
		}
		expire()
		ok := true
		for _, p := range m.v.dirtyBuckets() {
			ok = write(p) && ok
		}
		if ok && m.v.sources.dirty() {
			write(m.v.sources)
		}
	}
	for k, val := range m.vals {
		if !m.v.durable(segment.Offsets{{Key: k, Value: val}}, m.cutoffMs) {
			t.Fatalf("%s=%d not durable after a full round", k, val)
		}
	}
	for n, obj := range m.store {
		if p := m.v.part(n); m.matches(p) { // the view has seen all of it
			var have segment.Offsets
			for _, k := range slices.Sorted(maps.Keys(obj.keys)) {
				if !m.expired(k, obj.keys[k]) && m.vals[k] <= obj.keys[k] { // not superseded elsewhere
					have = append(have, segment.Offset{Key: k, Value: obj.keys[k]})
				}
			}
			m.checkBody(t, p, have)
		}
	}
}

func TestOffsetsViewMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		m := &viewModel{v: newOffsetsView(modelWindow), vals: map[string]uint64{}, store: map[int64]*storedObject{}, stored: map[string]uint64{}}
		if m.v.widthMs != modelWidth {
			t.Fatalf("bucket width %d ms, model %d", m.v.widthMs, modelWidth)
		}
		if rapid.Bool().Draw(t, "old format") {
			m.legacy(t)
		}
		t.Repeat(map[string]func(*rapid.T){
			"commit":  m.commit,
			"expire":  m.expire,
			"foreign": m.foreign,
			"read": func(t *rapid.T) {
				if len(m.store) > 0 {
					m.read(t)
				}
			},
			"begin": m.begin,
			"end":   m.end,
			"":      m.check,
		})
		m.flush(t)
	})
}

// The sorted snapshot of a part is incremental: keys that left a bucket
// (their value grew past it) are dropped from its order.
func TestViewPartDropsKeysThatMoved(t *testing.T) {
	v := newOffsetsView(modelWindow)
	v.merge(segment.Offsets{{Key: "idem/a", Value: 1}, {Key: "idem/b", Value: 2}})
	first := v.buckets[0]
	if got := v.snapshot(first); len(got) != 2 {
		t.Fatalf("bucket 0 holds %v", got)
	}
	v.merge(segment.Offsets{{Key: "idem/a", Value: 9}})
	if got := v.snapshot(first); len(got) != 1 || got[0].Key != "idem/b" {
		t.Fatalf("bucket 0 holds %v after idem/a moved to bucket 2", got)
	}
	if got := v.snapshot(v.buckets[2]); len(got) != 1 || got[0].Value != 9 {
		t.Fatalf("bucket 2 holds %v", got)
	}
}

// Expiry drops whole buckets whose end is before the cutoff, and only
// those: a key of the next bucket stays, and expiring again at the same
// cutoff drops nothing.
func TestExpiryDropsWholeBucketsOnly(t *testing.T) {
	v := newOffsetsView(modelWindow)
	for i := range uint64(40) {
		v.merge(segment.Offsets{{Key: fmt.Sprintf("idem/k%02d", i), Value: i}})
	}
	dropped, keys := v.expire(9) // buckets ending at 4 and 8 are before 9
	if len(dropped) != 2 || keys != 8 || v.len() != 32 {
		t.Fatalf("dropped %d buckets, %d keys; %d left", len(dropped), keys, v.len())
	}
	if _, ok := v.get("idem/k08"); !ok {
		t.Fatal("idem/k08 (bucket 2, ending at 12) dropped early")
	}
	if dropped, keys = v.expire(9); len(dropped) != 0 || keys != 0 {
		t.Fatalf("a second expiry at the same cutoff dropped %d buckets", len(dropped))
	}
}
