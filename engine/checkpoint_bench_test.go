package engine

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// BenchmarkCheckpointRound measures the CPU and bytes of one checkpoint
// write round after five new idempotency keys and a source offset, with
// the production window (24 h, buckets of 90 min) holding keys spread
// evenly over it — the newest bucket half full, as on average.
//
//   - full-checkpoint (the baseline): what a round cost before buckets —
//     the whole view in key order (kept incrementally: one bucket
//     spanning everything behaves as the old view did), encoded, and a
//     scan of every key for expiry.
//   - dirty-buckets: expiry, then each dirty bucket and _offsets
//     snapshotted and encoded (the PUTs themselves are not timed).
func BenchmarkCheckpointRound(b *testing.B) {
	for _, keys := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d/full-checkpoint", keys), func(b *testing.B) {
			v, now := benchView(keys, math.MaxInt64)
			benchRounds(b, v, now, func() int {
				cutoff := uint64(now - (24 * time.Hour).Milliseconds())
				//engine:orderless — a check of each entry alone.
				for k, val := range v.vals {
					if strings.HasPrefix(k, idemPrefix) && val < cutoff {
						b.Fatal("an expired key in the benchmark's view")
					}
				}
				body, err := segment.EncodeCheckpoint(1, v.sorted())
				if err != nil {
					b.Fatal(err)
				}
				return len(body)
			})
		})
		b.Run(fmt.Sprintf("keys=%d/dirty-buckets", keys), func(b *testing.B) {
			v, now := benchView(keys, 24*time.Hour)
			benchRounds(b, v, now, func() int {
				v.expire(now - (24 * time.Hour).Milliseconds())
				n := 0
				for _, p := range append(v.dirtyBuckets(), v.sources) {
					body, err := segment.EncodeCheckpoint(1, v.beginWrite(p))
					if err != nil {
						b.Fatal(err)
					}
					v.endWrite(p, true)
					n += len(body)
				}
				return n
			})
		})
	}
}

// benchView returns a view of keys idempotency keys spread evenly over
// the 24 h window up to now, all durable, and a few source offsets. Its
// buckets are those of bucketsWindow.
func benchView(keys int, bucketsWindow time.Duration) (*offsetsView, int64) {
	const window = 24 * time.Hour
	v := newOffsetsView(bucketsWindow)
	now := int64(1_800_000_000_000)
	span := window.Milliseconds() - IdemBucketWidth(window).Milliseconds()/2
	o := make(segment.Offsets, 0, keys)
	for i := range keys {
		o = append(o, segment.Offset{Key: fmt.Sprintf("idem/req-%08d", i), Value: uint64(now - span + int64(i)*span/int64(keys))})
	}
	o = append(o, segment.Offset{Key: "src/a", Value: 1}, segment.Offset{Key: "src/b", Value: 1})
	v.merge(o)
	if bucketsWindow == math.MaxInt64 && len(v.nums) != 1 {
		panic(fmt.Sprintf("the baseline's view has %d buckets", len(v.nums)))
	}
	for _, p := range append(v.dirtyBuckets(), v.sources) {
		v.beginWrite(p)
		v.endWrite(p, true)
	}
	return v, now
}

// benchRounds times round after committing five keys and a source
// offset before each (the same five keys at later times, so that the
// view does not grow with b.N), and reports the bytes it encodes.
func benchRounds(b *testing.B, v *offsetsView, now int64, round func() int) {
	bytes := 0
	for i := range b.N {
		b.StopTimer()
		var o segment.Offsets
		for j := range 5 {
			o = append(o, segment.Offset{Key: fmt.Sprintf("idem/new-%d", j), Value: uint64(now + int64(i))})
		}
		v.merge(append(o, segment.Offset{Key: "src/a", Value: uint64(i + 2)}))
		b.StartTimer()
		bytes += round()
	}
	b.ReportMetric(float64(bytes)/float64(b.N), "bytes/round")
}
