package engine

import (
	"errors"
	"testing"
)

// Once the engine failed closed nothing more is deleted: a DELETE asked
// afterwards — a reclaim's retry, the sweeper's next object, scheduled
// before the failure — is not sent, and is answered later, on the loop,
// with the failure. Before the failure the same DELETE goes out.
func TestNoDeleteAfterFailingClosed(t *testing.T) {
	e := bare()
	s, h := recording(e)
	key := e.layout.Key(e.layout.SegmentsPrefix()+"p_month=01/", SnapshotID{1, 1}, KindBody)
	e.p.Store.DeleteObject(key, func(error) {})
	if len(s.requests) != 1 {
		t.Fatalf("a ready engine's delete: issued %q; want it sent", s.requests)
	}
	e.broken("a test's failure")
	s.requests = nil
	var answered error
	e.p.Store.DeleteObject(key, func(err error) { answered = err })
	wantNotIssued(t, s, h, &answered)
}

// Start fails when a check fails while recovery replays the disk log: it
// is not answered as ready, and the sweeper (which deletes) and
// compaction do not start on the failed engine.
func TestStartFailsWhenReplayBreaks(t *testing.T) {
	e := bare()
	s, _ := recording(e)
	l := testDiskLog(e, 1)
	l.scan = &logScan{seals: map[SnapshotID]*sealScan{}, flushed: map[SnapshotID]uint64{}}
	e.dlog = l
	e.state = stateRecovering
	e.queue = []*snapshot{{id: SnapshotID{1, 1}, content: newBatchSet()}} // replay's check: an empty writer
	r := recovered{view: newOffsetsView(), keys: e.keys}
	answered := false
	var got error
	e.finishRecovery(r, nil, writerRecord{epoch: e.epoch, nonce: e.writerNonce}, 0, func(err error) { answered, got = true, err })
	if !answered || !errors.Is(got, ErrInvariant) {
		t.Fatalf("Start answered %t with %v; want the replay's failure", answered, got)
	}
	if e.stats.Sweeps != 0 || len(s.requests) != 0 {
		t.Fatalf("after the failure: %d sweeps, requests %q; want none", e.stats.Sweeps, s.requests)
	}
}
