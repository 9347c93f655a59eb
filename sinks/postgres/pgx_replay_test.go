package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/skipprd/skipprd/engine/segment"
)

// bigBatch is rows rows of two int64 columns, a = row number.
func bigBatch(t testing.TB, rows int) arrow.RecordBatch {
	t.Helper()
	data := make([][]*int64, rows)
	for r := range data {
		data[r] = []*int64{i64(int64(r)), i64(int64(r) * 10)}
	}
	return int64Batch(t, []string{"a", "b"}, data)
}

// A job applied again stores its rows once: the replay finds its id in
// the applied-jobs table and writes nothing (plain and CDC jobs alike).
func TestPGXReplayStoresOnce(t *testing.T) {
	s := newServer(t, 2)
	plain := plainJob("j-plain", "replay", bigBatch(t, 100))
	changes := []segment.CDCRow{{Kind: segment.Insert, Identity: []byte("k"), Order: 5}}
	cdc := cdcJob("j-cdc", "replay_cdc", changes, int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}}))
	for range 3 {
		s.mustApply(t, plain)
		s.mustApply(t, cdc)
	}
	if n := s.count(t, "SELECT count(*) FROM replay"); n != 100 {
		t.Fatalf("%d rows, want 100", n)
	}
	if n := s.count(t, "SELECT count(*) FROM replay_cdc"); n != 1 {
		t.Fatalf("%d CDC rows, want 1", n)
	}
	for _, id := range []string{"j-plain", "j-cdc"} {
		if n := s.appliedRows(t, id); n != 1 {
			t.Fatalf("job %s: %d applied-jobs rows", id, n)
		}
	}
	if got := s.texts(t, "SELECT table_name, rows::text FROM skipprd_applied_jobs WHERE compaction_id = 'j-plain'"); got[0][0] != "replay" || got[0][1] != "100" {
		t.Fatalf("applied-jobs row %v, want [replay 100]", got[0])
	}
}

// The same job applied from several goroutines at once (as after a crash
// while the old attempt is still on the server) commits once; every
// attempt returns nil — the later ones wait on the first's applied-jobs
// key and then find it.
func TestPGXReplayConcurrent(t *testing.T) {
	const attempts = 4
	s := newServer(t, attempts)
	for round := range 3 {
		job := plainJob(fmt.Sprintf("j%d", round), "concurrent", bigBatch(t, 5000))
		var wg sync.WaitGroup
		errs := make([]error, attempts)
		for a := range attempts {
			wg.Go(func() { errs[a] = s.apply(t, job) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if n := s.count(t, "SELECT count(*) FROM concurrent"); n != int64(5000*(round+1)) {
			t.Fatalf("round %d: %d rows, want %d", round, n, 5000*(round+1))
		}
	}
}
