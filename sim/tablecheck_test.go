package sim

import (
	"slices"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// The acknowledged-change ledger of a destination: per namespace sent to
// it, the units acked and those a recovery's offsets covered, each once,
// in UID order, each with the content its source produced (and its
// changes when CDC) — and nothing of another namespace or destination.
func TestAckedLedger(t *testing.T) {
	spec := SmallSpec("")
	spec.Sources = append(spec.Sources, SourceSpec{Name: "elsewhere", Sink: "lake2", Replayable: true, Partitions: 1, RowsMin: 1, RowsMax: 2})
	w := NewWorld(Config{Seed: 1, Iters: 1, World: &spec})
	o := w.oracle
	for _, u := range []UID{makeUID(0, 1, 5), makeUID(0, 0, 2), makeUID(3, 0, 4), makeUID(4, 0, 1)} {
		o.acked[u] = true
	}
	w.sources[0].recovered[0] = 3 // events partition 0: units 1..3 covered (2 also acked)
	w.sources[2].recovered[0] = 2 // orders (CDC)
	a := Acked{w: w, ref: "lake"}
	if got := a.Namespaces(); !slices.Equal(got, []AckedNamespace{{"events", false}, {"pageviews", false}, {"orders", true}, {"http", false}}) {
		t.Fatalf("namespaces %v", got)
	}
	for _, c := range []struct {
		ns   string
		want []UID
	}{
		{"events", []UID{makeUID(0, 0, 1), makeUID(0, 0, 2), makeUID(0, 0, 3), makeUID(0, 1, 5)}},
		{"pageviews", nil},
		{"orders", []UID{makeUID(2, 0, 1), makeUID(2, 0, 2)}},
		{"http", []UID{makeUID(3, 0, 4)}},
		{"elsewhere", nil},
	} {
		var got []UID
		a.Units(c.ns, func(u AckedUnit) {
			got = append(got, u.UID)
			spec := w.sources[u.UID.source()].spec
			var d, want RowDigest
			if err := d.AddBatch(u.Batch, u.Changes); err != nil {
				t.Fatal(err)
			}
			b, sc := unitContent(spec, u.UID)
			defer b.Release()
			if err := want.AddBatch(b, sidecarRows(sc)); err != nil {
				t.Fatal(err)
			}
			if d != want || (u.Changes != nil) != spec.CDC {
				t.Fatalf("unit %s: digest %v, produced %v; changes %d, CDC %v", u.UID, d, want, len(u.Changes), spec.CDC)
			}
		})
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: units %v, want %v", c.ns, got, c.want)
		}
	}
}

func sidecarRows(sc *segment.Sidecar) []segment.CDCRow {
	if sc == nil {
		return nil
	}
	return sc.Rows
}
