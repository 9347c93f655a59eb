package wal

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Fuzz targets: Scan and DecodeRecord, on any input, return without
// panicking; what Scan returns is consistent with the bytes, and what
// DecodeRecord accepts re-encodes to the same bytes (the encodings are
// canonical). The seed corpus under testdata/fuzz is written by
// `go test ./engine/wal -run Golden -update`; run a target with
// `go test ./engine/wal -run '^$' -fuzz '^FuzzScan$'`.

func FuzzScan(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r := Scan("fuzz", data)
		if r.End < 0 || r.End > int64(len(data)) {
			t.Fatalf("end %d outside 0..%d", r.End, len(data))
		}
		var at int64
		for i, e := range r.Entries {
			if e.Offset != at {
				t.Fatalf("entry %d at %d, want %d (entries are contiguous from 0)", i, e.Offset, at)
			}
			n := int64(EntryBytes(len(e.Payload)))
			if e.Offset+n > r.End {
				t.Fatalf("entry %d [%d, %d) runs past end %d", i, e.Offset, e.Offset+n, r.End)
			}
			if framed := AppendEntry(nil, e.Payload); !bytes.Equal(framed, data[e.Offset:e.Offset+n]) {
				t.Fatalf("entry %d does not re-frame to its bytes", i)
			}
			at += n
		}
		if at != r.End {
			t.Fatalf("entries end at %d, End %d", at, r.End)
		}
		tail := bytes.ContainsFunc(data[r.End:], func(r rune) bool { return r != 0 })
		switch c := r.Corrupt; {
		case c != nil && r.Torn:
			t.Fatal("both torn and corrupt")
		case c != nil:
			if c.Offset != r.End || c.Next <= c.Offset || c.Next >= int64(len(data)) {
				t.Fatalf("corruption %+v does not fit end %d, size %d", c, r.End, len(data))
			}
			if next := Scan("next", data[c.Next:]); len(next.Entries) == 0 || !Kind(next.Entries[0].Payload[0]).known() {
				t.Fatalf("no valid entry at Next %d", c.Next)
			}
		case r.Torn != tail:
			t.Fatalf("torn %v, but non-zero bytes after End: %v", r.Torn, tail)
		}
	})
}

func FuzzDecodeRecord(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRecord("fuzz", data)
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("untyped decode error %T: %v", err, err)
			}
			return
		}
		again, err := encodeRecord(nil, r)
		if err != nil {
			t.Fatalf("accepted record does not re-encode: %v", err)
		}
		if !bytes.Equal(again, data) {
			t.Fatalf("accepted payload is not canonical:\n in  %x\n out %x", data, again)
		}
	})
}

// writeFuzzCorpus seeds each target with the golden image, damaged copies
// of it and its payloads, in the go test corpus format.
func writeFuzzCorpus(t *testing.T, img []byte) {
	t.Helper()
	r := Scan("golden", img)
	last := r.Entries[len(r.Entries)-1].Offset
	flipped := bytes.Clone(img)
	flipped[r.Entries[1].Offset+20] ^= 0x04
	scan := map[string][]byte{
		"golden":         img,
		"entries_only":   img[:r.End],
		"torn_last":      append(bytes.Clone(img[:last+7]), make([]byte, 64)...),
		"corrupt_unit":   flipped,
		"header_entry":   img[:r.Entries[1].Offset],
		"zeros_and_junk": append(make([]byte, 300), 1, 2, 3),
	}
	decode := map[string][]byte{}
	for i, e := range r.Entries {
		decode[fmt.Sprintf("entry%d_%s", i, Kind(e.Payload[0]))] = e.Payload
	}
	for target, files := range map[string]map[string][]byte{"FuzzScan": scan, "FuzzDecodeRecord": decode} {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			entry := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(entry), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
