package sim

import (
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// Keyed CDC units: tokens unique in the namespace (so per identity),
// identities from the small key space and repeated across units and
// partitions, every kind, and tokens that arrive out of order within a
// partition (a later unit carrying an older token) — the workload the
// Postgres table oracle relies on.
func TestKeyedCDCChanges(t *testing.T) {
	const keys, partitions, units, rows = 5, 3, 400, 20
	tokens := map[uint64]UID{}
	kinds := map[segment.MutationKind]int{}
	partitionsOf := map[string]map[int]bool{} // identity → partitions changing it
	outOfOrder := 0
	for p := range partitions {
		newest := uint64(0)
		for seq := uint64(1); seq <= units; seq++ {
			u := makeUID(2, p, seq)
			sc := cdcSidecar(SourceSpec{CDC: true, Keys: keys}, u, rows)
			if len(sc.Rows) != rows || sc.Validate() != nil {
				t.Fatalf("unit %s: %d rows, %v", u, len(sc.Rows), sc.Validate())
			}
			for _, c := range sc.Rows {
				if prev, dup := tokens[c.Order]; dup {
					t.Fatalf("token %#x in units %s and %s", c.Order, prev, u)
				}
				tokens[c.Order] = u
				kinds[c.Kind]++
				id := string(c.Identity)
				if partitionsOf[id] == nil {
					partitionsOf[id] = map[int]bool{}
				}
				partitionsOf[id][p] = true
				if c.Order < newest {
					outOfOrder++
				}
				newest = max(newest, c.Order)
			}
		}
	}
	if len(partitionsOf) != keys {
		t.Fatalf("%d identities over a key space of %d", len(partitionsOf), keys)
	}
	for id, ps := range partitionsOf {
		if len(ps) != partitions {
			t.Fatalf("identity %s changed by %d partitions of %d", id, len(ps), partitions)
		}
	}
	if kinds[segment.Insert] == 0 || kinds[segment.Update] == 0 || kinds[segment.Delete] == 0 {
		t.Fatalf("kinds %v", kinds)
	}
	if outOfOrder < units/10 {
		t.Fatalf("only %d changes arrived below their partition's newest token", outOfOrder)
	}
}

// A spec without Keys keeps the rule older worlds were recorded with.
func TestUnkeyedCDCIsTheOldRule(t *testing.T) {
	u := makeUID(1, 2, 33)
	got, want := cdcSidecar(SourceSpec{CDC: true}, u, 7), sidecarOf(u, 7)
	for i := range want.Rows {
		if got.Rows[i].Order != want.Rows[i].Order || string(got.Rows[i].Identity) != string(want.Rows[i].Identity) || got.Rows[i].Kind != want.Rows[i].Kind {
			t.Fatalf("row %d: %+v, want %+v", i, got.Rows[i], want.Rows[i])
		}
	}
}
