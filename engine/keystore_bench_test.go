package engine

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine/segment"
)

// benchKeys is a key store of 10⁷ keys in ten full runs of one bucket,
// with the runs' bytes (what a block GET would return), and the same keys
// in a plain map: the design that holds every key in memory. Built once.
var benchKeys struct {
	s        *keyStore
	bodies   map[*keyRun][]byte
	exact    map[segment.KeyHash]uint64
	storeMem int64 // what the key store holds in memory
	mapMem   uint64
}

const benchKeyCount = 10_000_000

func benchKeyName(i int) string { return fmt.Sprintf("req-%09d", i) }

func loadBenchKeys(b *testing.B) {
	if benchKeys.s != nil {
		return
	}
	s := newKeyStore(24 * time.Hour)
	bk := s.bucket(1)
	bodies := map[*keyRun][]byte{}
	per := segment.KeyRunEntriesMax
	for start := 0; start < benchKeyCount; start += per {
		n := min(per, benchKeyCount-start)
		es := make([]segment.KeyEntry, n)
		for i := range es {
			es[i] = segment.KeyEntry{Hash: segment.KeyHashOf(benchKeyName(start + i)), Value: uint64(start + i)}
		}
		sortEntries(es)
		body, meta, err := segment.EncodeKeyRun(es)
		if err != nil {
			b.Fatal(err)
		}
		r := &keyRun{ref: segment.KeyRunRef{Seq: uint64(start), Count: n, MinValue: meta.MinValue, Value: meta.Value}, meta: meta}
		bk.runs = append(bk.runs, r)
		bodies[r] = body
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	exact := make(map[segment.KeyHash]uint64)
	for i := range benchKeyCount {
		exact[segment.KeyHashOf(benchKeyName(i))] = uint64(i)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	benchKeys.s, benchKeys.bodies, benchKeys.exact = s, bodies, exact
	benchKeys.storeMem, benchKeys.mapMem = s.memBytes(), after.HeapAlloc-before.HeapAlloc
}

// lookup is the key store's lookup with the block GET answered from
// memory: the filter probes, the index search, the block's decode and
// verification, and the search in it.
func benchLookup(b *testing.B, h segment.KeyHash) bool {
	for _, c := range benchKeys.s.candidates(h) {
		start, n := segment.KeyRunBlockRange(c.run.ref.Count, c.block)
		es, err := segment.DecodeKeyRunBlock("bench", benchKeys.bodies[c.run][start:start+n], c.run.meta, c.block)
		if err != nil {
			b.Fatal(err)
		}
		if entryList(es).has(h) {
			return true
		}
	}
	return false
}

// BenchmarkKeyLookup: lookups at 10⁷ keys (ten runs of 2²⁰), for a key
// the store holds (a retry: filter hit, one block read) and a new key
// (filters only, a block on a false hit), against the baseline of every
// key in a Go map — and what each holds in memory. The block GET itself
// is not timed (a store round trip: milliseconds on S3).
func BenchmarkKeyLookup(b *testing.B) {
	loadBenchKeys(b)
	b.Run("keys=1e7/known/key-store", func(b *testing.B) {
		for i := range b.N {
			if !benchLookup(b, segment.KeyHashOf(benchKeyName(i*7919%benchKeyCount))) {
				b.Fatal("a stored key not found")
			}
		}
		b.ReportMetric(float64(benchKeys.storeMem)/(1<<20), "MiB-held")
	})
	b.Run("keys=1e7/new/key-store", func(b *testing.B) {
		for i := range b.N {
			if benchLookup(b, segment.KeyHashOf(fmt.Sprintf("new-%09d", i))) {
				b.Fatal("a new key found")
			}
		}
		b.ReportMetric(float64(benchKeys.storeMem)/(1<<20), "MiB-held")
	})
	b.Run("keys=1e7/known/map-baseline", func(b *testing.B) {
		for i := range b.N {
			if _, ok := benchKeys.exact[segment.KeyHashOf(benchKeyName(i*7919%benchKeyCount))]; !ok {
				b.Fatal("a stored key not found")
			}
		}
		b.ReportMetric(float64(benchKeys.mapMem)/(1<<20), "MiB-held")
	})
	b.Run("keys=1e7/new/map-baseline", func(b *testing.B) {
		for i := range b.N {
			if _, ok := benchKeys.exact[segment.KeyHashOf(fmt.Sprintf("new-%09d", i))]; ok {
				b.Fatal("a new key found")
			}
		}
		b.ReportMetric(float64(benchKeys.mapMem)/(1<<20), "MiB-held")
	})
}

// BenchmarkKeyRound: the CPU and bytes of one checkpoint round's key
// writes after 2,000 new keys (two seconds at 1,000 keys/s), with the
// window holding 10⁵ or 10⁶ keys: the key store encodes a run of the new
// keys and its bucket's manifest; the baseline (the design before runs)
// re-encodes every key of the window in one checkpoint (up to its limit
// of 2¹⁸ keys, so the 10⁶ case is capped there and flatters it).
func BenchmarkKeyRound(b *testing.B) {
	const fresh = 2000
	for _, window := range []int{100_000, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d/key-store", window), func(b *testing.B) {
			runs := make([]segment.KeyRunRef, 20) // a bucket's runs, as merges keep them
			for i := range runs {
				runs[i] = segment.KeyRunRef{Seq: uint64(i), Count: window / 20, Value: 1}
			}
			bytes := 0
			for i := range b.N {
				es := make([]segment.KeyEntry, fresh)
				for j := range es {
					es[j] = segment.KeyEntry{Hash: segment.KeyHashOf(fmt.Sprintf("new-%d-%d", i, j)), Value: 1}
				}
				sortEntries(es)
				body, _, err := segment.EncodeKeyRun(es)
				if err != nil {
					b.Fatal(err)
				}
				m, err := segment.EncodeKeyManifest(1, append(runs, segment.KeyRunRef{Seq: 99, Count: fresh, Value: 1}))
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(body) + len(m)
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/round")
		})
		b.Run(fmt.Sprintf("keys=%d/full-checkpoint", window), func(b *testing.B) {
			n := min(window, segment.CheckpointEntriesMax-fresh)
			all := make(segment.Offsets, 0, n+fresh)
			for j := range n {
				all = append(all, segment.Offset{Key: fmt.Sprintf("idem/req-%09d", j), Value: 1})
			}
			bytes := 0
			for i := range b.N {
				o := slices.Clone(all)
				for j := range fresh {
					o = append(o, segment.Offset{Key: fmt.Sprintf("idem/rew-%04d-%09d", j, i), Value: 1})
				}
				slices.SortFunc(o, func(x, y segment.Offset) int { return strings.Compare(x.Key, y.Key) })
				body, err := segment.EncodeCheckpoint(1, o)
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(body)
			}
			b.ReportMetric(float64(bytes)/float64(b.N), "bytes/round")
		})
	}
}
