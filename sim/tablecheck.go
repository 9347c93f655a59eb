package sim

import (
	"slices"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
)

// TableChecker is a destination whose tables are the result of applying
// jobs rather than a list of them — a database table whose CDC rows are
// replaced by identity and order token — so that job digests (Contents)
// cannot tell whether each change took effect as it should. After the
// world converged, the oracle hands it the acknowledged-change ledger of
// its namespaces; every string CheckTables returns is a violation.
type TableChecker interface {
	CheckTables(acked Acked) []string
}

// tableViolationsMax bounds what one destination's table check reports:
// one broken rule tends to break many rows.
const tableViolationsMax = 10

// checkTables runs every destination's table check (TableChecker).
func (o *Oracle) checkTables() {
	for _, k := range o.w.spec.Sinks {
		c, ok := o.w.dests[k.Ref].(TableChecker)
		if !ok {
			continue
		}
		bad := c.CheckTables(Acked{w: o.w, ref: k.Ref})
		for i, v := range bad {
			if i == tableViolationsMax {
				o.fail("destination %s tables: %d more violations", k.Ref, len(bad)-i)
				break
			}
			o.fail("destination %s tables: %s", k.Ref, v)
		}
	}
}

// Acked is the acknowledged-change ledger of one destination: the units
// of the namespaces it receives — from every pipeline of the world —
// that the engines acknowledged — acked, or
// covered by the offsets a recovery reported, so that their source moved
// past them (a unit committed by a process that died before it acked,
// which no source sends again), or committed after its source gave up
// on it unanswered. At convergence every unit a source produced is one
// of these, or given up and never committed. Units are content, not copies: a unit's
// rows are a pure function of its id, built again on demand.
type Acked struct {
	w   *World
	ref string
}

// AckedNamespace is one namespace a destination receives.
type AckedNamespace struct {
	Name string
	CDC  bool
}

// AckedUnit is one acknowledged unit as its source produced it.
type AckedUnit struct {
	UID UID
	// Batch has the unit schema (uid, row, payload); it is released
	// once the callback returns.
	Batch arrow.RecordBatch
	// Changes has one change per row of Batch; nil unless CDC.
	Changes []segment.CDCRow
}

// Namespaces returns the namespaces whose sources send to the
// destination, in source order.
func (a Acked) Namespaces() []AckedNamespace {
	var out []AckedNamespace
	seen := map[string]bool{}
	for _, s := range a.sources() {
		if s.spec.sinkRef() == a.ref && !seen[s.spec.Name] {
			seen[s.spec.Name] = true // pipelines may share a plain namespace
			out = append(out, AckedNamespace{Name: s.spec.Name, CDC: s.spec.CDC})
		}
	}
	return out
}

// Units calls fn for every acknowledged unit of namespace ns, in UID
// order.
func (a Acked) Units(ns string, fn func(AckedUnit)) {
	for _, s := range a.sources() {
		if s.spec.Name != ns || s.spec.sinkRef() != a.ref {
			continue
		}
		for _, uid := range s.w.oracle.acknowledged(s) {
			batch, sidecar := unitContent(s.spec, uid)
			u := AckedUnit{UID: uid, Batch: batch}
			if sidecar != nil {
				u.Changes = sidecar.Rows
			}
			fn(u)
			batch.Release()
		}
	}
}

// sources are every pipeline's sources, in pipeline then source order.
func (a Acked) sources() []*source {
	var out []*source
	for _, p := range a.w.all() {
		out = append(out, p.sources...)
	}
	return out
}

// acknowledged returns the units of s the engine acknowledged, sorted:
// those acked, those its recovered offsets cover (replayable
// partitions up to the highest offset a recovery reported, a prefix
// source every piece of the objects its final engine's offsets hold),
// and those its source gave up on that a marker that counts holds
// (source.giveUp: committed, never answered). REQUIRES decideValidity.
func (o *Oracle) acknowledged(s *source) []UID {
	var out []UID
	//engine:orderless — collected, then sorted.
	for uid := range o.acked {
		if uid.source() == s.idx {
			out = append(out, uid)
		}
	}
	//engine:orderless — collected, then sorted.
	for uid := range o.givenUp {
		if uid.source() == s.idx && o.hasValidMarker(uid) {
			out = append(out, uid)
		}
	}
	for p, v := range s.recovered {
		for seq := uint64(1); seq <= v; seq++ {
			if uid := makeUID(s.idx, p, seq); !o.notDelivered(uid) {
				out = append(out, uid)
			}
		}
	}
	if s.spec.Prefix {
		out = append(out, s.donePieces()...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
