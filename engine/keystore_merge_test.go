package engine

import (
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine/segment"
)

// addRun appends a run of count keys to b, as a round does.
func addRun(b *keyBucket, seq *uint64, count int) {
	*seq++
	b.runs = append(b.runs, &keyRun{ref: segment.KeyRunRef{Seq: *seq, Count: count, Value: 1}})
}

// applyPlan merges ins into one run, as mergeKeys does.
func applyPlan(b *keyBucket, ins []*keyRun, seq *uint64) (rewritten int) {
	kept := b.runs[:0:0]
	for _, r := range b.runs {
		in := false
		for _, x := range ins {
			in = in || x == r
		}
		if in {
			rewritten += r.ref.Count
		} else {
			kept = append(kept, r)
		}
	}
	b.runs = kept
	addRun(b, seq, rewritten)
	return rewritten
}

// The merge plan at the production rate: a 90-minute bucket taking
// 1,000 keys a second in rounds of 2 s (one merge per round) keeps few
// runs and rewrites each key a few times; once closed, it consolidates
// into nearly full runs.
func TestMergePlanAtProductionRate(t *testing.T) {
	s := newKeyStore(24 * time.Hour)
	b := s.bucket(7)
	var seq uint64
	added, rewritten, most := 0, 0, 0
	for range 90 * 60 / 2 {
		addRun(b, &seq, 2000)
		added += 2000
		if pb, ins := s.mergePlan(0); pb != nil {
			rewritten += applyPlan(pb, ins, &seq)
		}
		most = max(most, len(b.runs))
	}
	amp := float64(rewritten) / float64(added)
	t.Logf("open bucket: %d keys, at most %d runs, each key rewritten %.1f times", added, most, amp)
	if most > 40 || amp > 6 {
		t.Fatalf("%d runs at most, write amplification %.1f", most, amp)
	}
	merges := 0
	for pb, ins := s.mergePlan(100); pb != nil; pb, ins = s.mergePlan(100) {
		rewritten += applyPlan(pb, ins, &seq)
		merges++
	}
	full := (added + segment.KeyRunEntriesMax - 1) / segment.KeyRunEntriesMax
	t.Logf("closed: %d merges leave %d runs (%d would be full)", merges, len(b.runs), full)
	if len(b.runs) > 2*full {
		t.Fatalf("closed bucket of %d keys keeps %d runs", added, len(b.runs))
	}
}

// Whatever the runs, a plan merges two or more runs of one bucket that
// is not busy, and what it merges fits in one run.
func TestMergePlanIsSound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		s := newKeyStore(time.Hour)
		var seq uint64
		for n := range rapid.IntRange(1, 4).Draw(t, "buckets") {
			b := s.bucket(int64(n))
			b.busy = rapid.Bool().Draw(t, "busy")
			for range rapid.IntRange(0, 40).Draw(t, "runs") {
				addRun(b, &seq, rapid.IntRange(1, segment.KeyRunEntriesMax).Draw(t, "count"))
			}
		}
		b, ins := s.mergePlan(rapid.Int64Range(0, 5).Draw(t, "open from"))
		if b == nil {
			return
		}
		sum := 0
		for _, r := range ins {
			sum += r.ref.Count
			found := false
			for _, x := range b.runs {
				found = found || x == r
			}
			if !found {
				t.Fatalf("run %d planned is not the bucket's", r.ref.Seq)
			}
		}
		if b.busy || len(ins) < 2 || sum > segment.KeyRunEntriesMax {
			t.Fatalf("plan of %d runs, %d keys, bucket busy %t", len(ins), sum, b.busy)
		}
	})
}
