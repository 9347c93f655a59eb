package segment

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

func drawKeyEntries(t *rapid.T, n int) []KeyEntry {
	seen := map[KeyHash]bool{}
	var out []KeyEntry
	for i := range n {
		h := KeyHashOf(fmt.Sprintf("k%d-%d", i, rapid.IntRange(0, 1<<30).Draw(t, "salt")))
		if !seen[h] {
			seen[h] = true
			out = append(out, KeyEntry{Hash: h, Value: rapid.Uint64Range(0, 1<<45).Draw(t, "value")})
		}
	}
	slices.SortFunc(out, func(a, b KeyEntry) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	return out
}

// A run reads back whole, by meta and blocks, and its filter and index
// find every key it holds; damage anywhere is rejected.
func TestKeyRunRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		entries := drawKeyEntries(t, rapid.IntRange(1, 3*KeyRunBlockEntries).Draw(t, "n"))
		b, m, err := EncodeKeyRun(entries)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(b)) != KeyRunBytes(len(entries)) {
			t.Fatalf("run of %d keys: %d bytes, KeyRunBytes says %d", len(entries), len(b), KeyRunBytes(len(entries)))
		}
		meta, got, err := DecodeKeyRun("r", b, len(entries))
		if err != nil || !slices.Equal(got, entries) || meta.Value != m.Value || meta.MinValue != m.MinValue {
			t.Fatalf("round trip: %d of %d entries, err %v", len(got), len(entries), err)
		}
		for _, e := range entries {
			if !meta.MayContain(e.Hash) {
				t.Fatalf("filter misses %x", e.Hash)
			}
			i := meta.BlockOf(e.Hash)
			start, n := KeyRunBlockRange(len(entries), i)
			blk, err := DecodeKeyRunBlock("r", b[start:start+n], meta, i)
			if err != nil || !slices.Contains(blk, e) {
				t.Fatalf("block %d of %x: %v", i, e.Hash, err)
			}
		}
		bad := damage(t, b)
		if _, _, err := DecodeKeyRun("r", bad, len(entries)); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("damaged run: %v", err)
		}
		if _, _, err := DecodeKeyRun("r", b, len(entries)+1); err == nil {
			t.Fatal("a run read with another count decoded")
		}
	})
}

// The filter's false hits stay near their design rate (~0.02% at 20 bits
// a key): measured over keys the run does not hold.
func TestKeyRunFilterFalseHits(t *testing.T) {
	var entries []KeyEntry
	for i := range 100_000 {
		entries = append(entries, KeyEntry{Hash: KeyHashOf(fmt.Sprint("in-", i)), Value: 1})
	}
	slices.SortFunc(entries, func(a, b KeyEntry) int { return bytes.Compare(a.Hash[:], b.Hash[:]) })
	_, m, err := EncodeKeyRun(entries)
	if err != nil {
		t.Fatal(err)
	}
	hits := 0
	const probes = 200_000
	for i := range probes {
		if m.MayContain(KeyHashOf(fmt.Sprint("out-", i))) {
			hits++
		}
	}
	rate := float64(hits) / probes
	t.Logf("false hits: %.5f of %d probes at %d bits a key", rate, probes, KeyRunFilterBitsPerKey)
	if rate > 0.0005 {
		t.Fatalf("false hit rate %.4f over %d probes, want under 0.0005", rate, probes)
	}
}

func TestKeyRunRefusesBadInput(t *testing.T) {
	a, b := KeyEntry{Hash: KeyHashOf("a")}, KeyEntry{Hash: KeyHashOf("b")}
	if bytes.Compare(a.Hash[:], b.Hash[:]) > 0 {
		a, b = b, a
	}
	for name, in := range map[string][]KeyEntry{"empty": nil, "unsorted": {b, a}, "duplicate": {a, a}} {
		if _, _, err := EncodeKeyRun(in); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
}

func TestKeyManifestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(0, 20).Draw(t, "runs")
		var runs []KeyRunRef
		for i := range n {
			lo := rapid.Uint64Range(0, 1<<40).Draw(t, "min")
			runs = append(runs, KeyRunRef{Epoch: uint64(i / 3), Seq: uint64(i), Count: rapid.IntRange(1, KeyRunEntriesMax).Draw(t, "count"),
				MinValue: lo, Value: lo + rapid.Uint64Range(0, 1<<20).Draw(t, "span")})
		}
		epoch := rapid.Uint64().Draw(t, "epoch")
		b, err := EncodeKeyManifest(epoch, runs)
		if err != nil {
			t.Fatal(err)
		}
		gotEpoch, got, err := DecodeKeyManifest("m", b)
		if err != nil || gotEpoch != epoch || !slices.Equal(got, runs) {
			t.Fatalf("round trip: epoch %d %v, err %v", gotEpoch, got, err)
		}
		if IsCheckpoint(b) {
			t.Fatal("a manifest looks like a checkpoint")
		}
		if _, _, err := DecodeKeyManifest("m", damage(t, b)); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedVersion) {
			t.Fatalf("damaged manifest: %v", err)
		}
	})
	if _, err := EncodeKeyManifest(1, []KeyRunRef{{Seq: 2, Count: 1}, {Seq: 1, Count: 1}}); err == nil {
		t.Fatal("unsorted runs encoded")
	}
}

func FuzzDecodeKeyManifest(f *testing.F) {
	b, _ := EncodeKeyManifest(7, []KeyRunRef{{Epoch: 1, Seq: 1, Count: 3, MinValue: 5, Value: 9}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		epoch, runs, err := DecodeKeyManifest("m", b)
		if err != nil {
			return
		}
		again, err := EncodeKeyManifest(epoch, runs)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("decoded manifest does not re-encode to its bytes: %v", err)
		}
	})
}
