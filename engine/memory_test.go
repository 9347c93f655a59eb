package engine

import (
	"testing"

	"pgregory.net/rapid"
)

func TestSplitPool(t *testing.T) {
	const mib, gib = int64(1) << 20, int64(1) << 30
	for _, c := range []struct {
		name                        string
		available, admission, cache int64
	}{
		{"cache at its ceiling", 100 * gib, 35 * gib, 16 * gib},
		{"both at their ceilings", 1000 * gib, 64 * gib, 16 * gib},
		{"even split", gib, gib / 100 * 70 / 2, gib/100*70 - gib/100*70/2},
		{"tiny: degraded inside the pool", 300 * mib, 300 * mib / 100 * 70 / 100 * 80, 300*mib/100*70 - 300*mib/100*70/100*80},
	} {
		b := splitPool(c.available)
		if b.admission != c.admission || b.cache != c.cache {
			t.Errorf("%s: %+v, want admission %d cache %d", c.name, b, c.admission, c.cache)
		}
	}
}

// Whatever the hint, the split stays inside the pool, and the floors hold
// whenever the pool can afford them.
func TestSplitPoolBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		avail := rapid.Int64Range(0, 1<<42).Draw(t, "available")
		b := splitPool(avail)
		if b.admission < 0 || b.cache < 0 || b.admission+b.cache > b.pool || b.pool > avail*poolPercent/100 {
			t.Fatalf("available %d: %+v", avail, b)
		}
		if b.pool >= admissionMin+cacheMin && (b.admission < admissionMin || b.cache < cacheMin) {
			t.Fatalf("floors not met with a pool of %d: %+v", b.pool, b)
		}
		if b.admission > admissionMax || b.cache > cacheMax {
			t.Fatalf("ceiling exceeded: %+v", b)
		}
	})
}
