package engine_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/sim"
)

// The key-store day's rates: make test's, and make soak's (production).
const (
	keyDayRateTest = 100
	keyDayRateSoak = 1000
)

// TestKeyStoreDay is the key store's world at the production rate: 1,000
// new idempotency keys a second, committed every 2 s, for a simulated
// day and two hours (the 24 h window fills, then expires), on a 2 GiB
// host, with a crash and recovery every two hours. It checks that
//
//   - every key made durable and not expired is found by a lookup (a
//     sample every round, across the whole window), before and after
//     every recovery;
//   - keys never submitted are not found (and counts the block reads
//     their false filter hits cost);
//   - the key store's memory stays within its share of the pool;
//   - recovery's requests follow the key objects, not the keys.
//
// make test runs it at keyDayRateTest keys a second — the same day,
// window, commits, crashes and lookups, a tenth of the keys per round —
// and make soak at the production rate, keyDayRateSoak (about 6 minutes
// on two cores). SKIPPR_KEY_DAY_RATE sets the rate (keys a second).
func TestKeyStoreDay(t *testing.T) {
	if testing.Short() {
		t.Skip("the key-store day: run without -short")
	}
	rate := keyDayRateTest
	if v := os.Getenv("SKIPPR_KEY_DAY_RATE"); v != "" {
		if _, err := fmt.Sscan(v, &rate); err != nil || rate < 1 {
			t.Fatalf("SKIPPR_KEY_DAY_RATE=%q: want a whole number of keys a second, e.g. %d", v, keyDayRateSoak)
		}
	}
	const (
		round   = 2 * time.Second
		span    = 26 * time.Hour
		crashes = 2 * time.Hour
		window  = 24 * time.Hour
	)
	r := newRig(t, sim.StoreConfig{})
	r.memory = 2 << 30
	r.cfg.IdempotencyWindow = window
	r.cfg.CheckpointDelay = round
	r.start()
	perRound := rate * int(round/time.Second)
	rounds := int(span / round)
	durable := make([]bool, rounds)
	wallAt := make([]int64, rounds)
	rng := sim.NewRand(7)
	var (
		looked, found, misses, wrong int
		pending                      int // lookups of the current incarnation not answered yet
		peakMem                      int64
		peakRuns, recoveries         int
		worstRecOps                  uint64
		before                       engine.Stats // summed over the incarnations that ended
	)
	check := func(key string, want bool) {
		looked++
		pending++
		eng := r.eng
		eng.LookupKey(key, func(ok bool, err error) {
			if eng != r.eng {
				return // an answer from a crashed incarnation: not counted (looked was corrected)
			}
			pending--
			switch {
			case err != nil:
				t.Errorf("lookup %s: %v", key, err)
			case ok != want:
				wrong++
				if wrong < 5 {
					t.Errorf("lookup %s: found %t, want %t", key, ok, want)
				}
			case ok:
				found++
			default:
				misses++
			}
		})
	}
	start := r.sched.Now()
	for n := range rounds {
		r.sched.RunUntil(start + time.Duration(n)*round)
		if n > 0 && time.Duration(n)*round%crashes == 0 {
			st := r.eng.Stats()
			before.KeyBlockReads += st.KeyBlockReads
			before.KeyFalseHits += st.KeyFalseHits
			looked, pending = looked-pending, 0 // lookups in flight die with the process
			r.start()                           // a crash: what was not durable is forgotten, as its segments would recover it
			recoveries++
			st = r.eng.Stats()
			worstRecOps = max(worstRecOps, st.RecoveryOps)
			if bound := uint64(engine.AttemptsMax) * uint64(20+2*engine.IdemBucketsPerWindow+st.KeyRuns); st.RecoveryOps > bound {
				t.Fatalf("recovery with %d runs took %d requests, bound %d", st.KeyRuns, st.RecoveryOps, bound)
			}
		}
		keys := make([]string, perRound)
		for i := range keys {
			keys[i] = fmt.Sprintf("k-%d-%d", n, i)
		}
		wallAt[n] = r.sched.WallUnixMs()
		r.eng.CommitKeys(keys, uint64(wallAt[n]), func() { durable[n] = true })
		for range 4 {
			if old := rng.Intn(n + 1); durable[old] && wallAt[n]-wallAt[old] < window.Milliseconds() {
				check(fmt.Sprintf("k-%d-%d", old, rng.Intn(perRound)), true)
			}
			check(fmt.Sprintf("never-%d-%d", n, rng.Intn(1<<30)), false)
		}
		st := r.eng.Stats()
		peakMem, peakRuns = max(peakMem, st.KeyMemBytes), max(peakRuns, st.KeyRuns)
	}
	r.settle()
	st := r.eng.Stats()
	pool := int64(r.memory) / 100 * 70
	t.Logf("%d keys/s for %v: %d lookups (%d found, %d absent), %d block reads, %d false hits; peak %d runs, peak memory %.1f MiB (limit %.1f MiB); %d recoveries, worst %d requests",
		rate, span, looked, found, misses, before.KeyBlockReads+st.KeyBlockReads, before.KeyFalseHits+st.KeyFalseHits, peakRuns, float64(peakMem)/(1<<20), float64(pool/4)/(1<<20), recoveries, worstRecOps)
	if wrong > 0 || found+misses != looked {
		t.Fatalf("%d wrong answers, %d of %d lookups answered", wrong, found+misses, looked)
	}
	if peakMem > pool/4 {
		t.Fatalf("key store memory peaked at %d bytes, its share of the pool is %d", peakMem, pool/4)
	}
}
