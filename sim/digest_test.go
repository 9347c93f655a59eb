package sim

import (
	"testing"

	"pgregory.net/rapid"
)

// TestDigestThen: a digest of rows added one after the other equals the
// Then of digests of any split of them, and a split taken in the other
// order, or a row moved, digests otherwise.
func TestDigestThen(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rows := rapid.SliceOfN(rapid.Int64(), 2, 40).Draw(t, "rows")
		cut := rapid.IntRange(1, len(rows)-1).Draw(t, "cut")
		digest := func(rs []int64) RowDigest {
			var d RowDigest
			for i, r := range rs {
				d.AddRow(r, int32(i), "p")
			}
			return d
		}
		var whole, a, b RowDigest
		for i, r := range rows {
			whole.AddRow(r, int32(i), "p")
			if i < cut {
				a.AddRow(r, int32(i), "p")
			} else {
				b.AddRow(r, int32(i), "p")
			}
		}
		if got := a.Then(b); got != whole {
			t.Fatalf("a.Then(b) = %+v, whole %+v", got, whole)
		}
		if b.Then(a) == whole && digest(rows[cut:]) != digest(rows[:cut]) {
			t.Fatalf("order lost: b.Then(a) equals the whole")
		}
		if (RowDigest{}).Then(whole) != whole || whole.Then(RowDigest{}) != whole {
			t.Fatal("the empty digest is not neutral")
		}
	})
}
