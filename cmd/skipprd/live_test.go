package main

import (
	"fmt"
	"slices"
	"testing"

	"github.com/skipprd/skipprd/engine"
)

// Segments that leave the tape are shown as reclaimed in commit order,
// whatever order they went in, and only the newest liveReclaimedMax.
func TestLiveReclaimedInCommitOrder(t *testing.T) {
	v := &liveView{}
	tape := func(ids ...int) []engine.TapeSegment {
		out := make([]engine.TapeSegment, len(ids))
		for i, id := range ids {
			out[i].ID = fmt.Sprintf("%06d", id)
		}
		return out
	}
	v.reclaim(tape(1, 2, 3, 4))
	v.reclaim(tape(1, 3))    // 2 and 4 go
	got := v.reclaim(tape()) // then 1 and 3
	if want := []string{"000001", "000002", "000003", "000004"}; !slices.Equal(got, want) {
		t.Fatalf("reclaimed %v, want %v", got, want)
	}
	var many []int
	for i := range 2 * liveReclaimedMax {
		many = append(many, 100+i)
	}
	v.reclaim(tape(many...))
	got = v.reclaim(tape())
	if len(got) != liveReclaimedMax || got[len(got)-1] != fmt.Sprintf("%06d", 100+2*liveReclaimedMax-1) {
		t.Fatalf("kept %d: %v", len(got), got)
	}
}
