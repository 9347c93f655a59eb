package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

func TestWriterRecordRoundTrip(t *testing.T) {
	for _, wal := range []segment.WALID{{}, {0xab, 1, 2, 3}} {
		w := writerRecord{epoch: 12, nonce: 0xdeadbeef, wal: wal, floor: 11, seals: []seal{{3, 0}, {9, 41}, {10, 7}}}
		b := w.encode()
		got, err := parseWriterRecord(b)
		if err != nil || got.epoch != w.epoch || got.nonce != w.nonce || got.wal != wal || got.floor != w.floor || !slices.Equal(got.seals, w.seals) {
			t.Fatalf("round trip of WAL id %s: %+v %v", wal, got, err)
		}
		if magic := string(b[:bytes.IndexByte(b, '\n')]); (magic == writerMagic) == wal.IsZero() {
			t.Fatalf("WAL id %s written as %q: want version 3 with an id, 2 without", wal, magic)
		}
	}
	v3 := "skipprd-writer 3\nepoch 1\nnonce 00\n"
	for _, bad := range []string{
		v3 + "floor 0\n",         // no wal line
		v3 + "wal 00\nfloor 0\n", // short
		v3 + "wal " + strings.Repeat("0", 32) + "\nfloor 0\n",
		v3 + "wal " + strings.Repeat("x", 32) + "\nfloor 0\n",
	} {
		sum := sha256.Sum256([]byte(bad))
		if _, err := parseWriterRecord(append([]byte(bad), "sha256 "+hex.EncodeToString(sum[:])+"\n"...)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("accepted %q: %v", bad, err)
		}
	}
	const head = "skipprd-writer 1\nepoch 5\nnonce 00\n"
	for _, bad := range []string{
		"",
		"skipprd-writer 4\nepoch 1\nnonce 00\nfloor 0\n",
		"skipprd-writer 2\nepoch 1\nnonce 00\nfloor 0\n", // no checksum
		"skipprd-writer 1\nepoch x\nnonce 00\nfloor 0\n",
		head,                           // no floor
		head + "floor 6\n",             // floor above the epoch
		head + "floor 4\nsealed 4 1\n", // a seal at the floor
		head + "floor 4\nsealed 3 1\nsealed 2 1\n", // out of order
		head + "floor 4\nsealed 3\n",
		head + "floor 4\nbogus 3 1\n",
	} {
		if _, err := parseWriterRecord([]byte(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// Version 1 objects (no checksum) are still read; a version 2 object
// whose bytes changed anywhere fails its checksum — in particular a digit
// that flipped into another digit, which would otherwise parse.
func TestWriterObjectChecksum(t *testing.T) {
	w := writerRecord{epoch: 15, nonce: 3, floor: 12, seals: []seal{{11, 4}}}
	good := w.encode()
	if _, err := parseWriterRecord(good); err != nil {
		t.Fatal(err)
	}
	v1 := []byte("skipprd-writer 1\nepoch 15\nnonce 0000000000000003\nfloor 12\nsealed 11 4\n")
	if got, err := parseWriterRecord(v1); err != nil || got.epoch != 15 || len(got.seals) != 1 {
		t.Fatalf("version 1: %+v %v", got, err)
	}
	flipped := bytes.Replace(good, []byte("epoch 15"), []byte("epoch 14"), 1)
	if _, err := parseWriterRecord(flipped); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a changed epoch digit parsed: %v", err)
	}
	for i := range len(good) - 1 {
		b := bytes.Clone(good)
		b[i] ^= 0x04
		if got, err := parseWriterRecord(b); err == nil {
			t.Fatalf("a flip at byte %d parsed (epoch %d floor %d)", i, got.epoch, got.floor)
		}
	}
}

func TestWriterValidity(t *testing.T) {
	w := writerRecord{epoch: 10, floor: 10, seals: []seal{{4, 20}, {7, 0}}}
	for _, c := range []struct {
		id   SnapshotID
		want bool
	}{
		{SnapshotID{10, 1}, true},  // ours
		{SnapshotID{4, 20}, true},  // at the seal
		{SnapshotID{4, 21}, false}, // landed after the seal
		{SnapshotID{7, 1}, false},  // epoch sealed before any marker landed
		{SnapshotID{5, 1}, false},  // no seal: nothing of it was listed when superseded
	} {
		if got := w.valid(c.id); got != c.want {
			t.Errorf("valid(%s) = %v, want %v", c.id, got, c.want)
		}
	}
}

// Sealing sets a seal for every epoch from the floor up that is listed
// (at its highest marker, 0 if it has only bodies), keeps existing seals
// where they are, drops seals of epochs with nothing left, never seals an
// epoch decided below the floor, and moves the floor up.
func TestWriterSealed(t *testing.T) {
	w := writerRecord{epoch: 10, floor: 5, seals: []seal{{2, 5}, {4, 20}}}
	ls := func(epoch, seq uint64, marker bool) *listedSegment {
		l := &listedSegment{id: SnapshotID{epoch, seq}, body: &ObjectInfo{}}
		if marker {
			l.marker = &ObjectInfo{}
		}
		return l
	}
	listing := []*listedSegment{ls(3, 1, true), ls(4, 19, true), ls(4, 25, true), ls(6, 3, true), ls(6, 9, true), ls(8, 2, false), ls(10, 1, true)}
	got := w.sealed(listing, nil)
	want := []seal{{4, 20}, {6, 9}, {8, 0}} // epoch 3: decided below the floor without a seal: never valid
	if !slices.Equal(got.seals, want) || got.epoch != 10 || got.floor != 10 {
		t.Fatalf("seals %v floor %d, want %v floor 10", got.seals, got.floor, want)
	}
}
