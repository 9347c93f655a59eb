package objects

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// mixedObjects puts a JSON-lines, CSV, Parquet and NDJSON object and an
// empty one, and returns every id they hold and their bodies by key.
func mixedObjects(t *testing.T, k kit) ([]int64, map[string][]byte) {
	bodies := map[string][]byte{
		"a.jsonl":        jsonlRows(0, 50),
		"b.csv":          csvRows(1000, 40),
		"c/d.parquet":    parquetBytes(t, 2000, 3, 10),
		"c/e.ndjson":     jsonlRows(3000, 5),
		"c/empty.jsonl":  nil,
		"c/empty.binary": nil, // no format, but nothing to ingest either
	}
	for key, body := range bodies {
		k.put(t, key, body)
	}
	return concat(seq(0, 50), seq(1000, 40), seq(2000, 30), seq(3000, 5)), bodies
}

// mixedConfig cuts the text objects into several units each.
func mixedConfig() Config { return Config{ChunkBytes: 300} }

func TestDirAllFormats(t *testing.T) { testAllFormats(t, dirKit(t)) }
func TestS3AllFormats(t *testing.T)  { testAllFormats(t, s3Kit(t)) }

// testAllFormats: every row of every object ends up in exactly one unit;
// each object's units carry its offset key at growing values, each at a
// record boundary, the last at the object's size (text) or its row
// groups marked done (Parquet).
func testAllFormats(t *testing.T, k kit) {
	want, bodies := mixedObjects(t, k)
	f := newFixture(t, mixedConfig(), k.store)
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), want)
	for key, several := range map[string]bool{"a.jsonl": true, "b.csv": true, "c/e.ndjson": false} {
		checkTextUnits(t, f, key, bodies[key], several)
	}
	// Each row group is over the 300 bytes of a chunk: a unit each.
	var got []uint64
	for _, u := range f.host.unitsOf(f.src.OffsetKey("c/d.parquet")) {
		got = append(got, u.offset.Value)
	}
	if want := []uint64{1, 2, parquetDone | 3}; !slices.Equal(got, want) {
		t.Errorf("parquet offsets %v; want %v", got, want)
	}
	for _, key := range []string{"c/empty.jsonl", "c/empty.binary"} {
		if _, ok := f.host.offsets().Get(f.src.OffsetKey(key)); ok {
			t.Errorf("empty object %s has an offset", key)
		}
	}
	st := f.src.Stats()
	if st.ObjectsDone != 4 || st.ObjectsSkipped != 0 || st.RowsAcked != uint64(len(want)) || st.RowsIngested != st.RowsAcked {
		t.Errorf("stats %+v: want 4 objects done, %d rows acked and ingested", st, len(want))
	}
}

// checkTextUnits checks the units of a text object: several if asked,
// each ending at a record boundary above the last, the last at its size.
func checkTextUnits(t *testing.T, f *fixture, key string, body []byte, several bool) {
	t.Helper()
	units := f.host.unitsOf(f.src.OffsetKey(key))
	if several && len(units) < 2 || len(units) == 0 {
		t.Errorf("%s: %d units; want several", key, len(units))
	}
	prev := uint64(0)
	for i, u := range units {
		v := u.offset.Value
		if v <= prev || v > uint64(len(body)) || body[v-1] != '\n' || bytes.Count(body[:v], []byte{'"'})%2 != 0 {
			t.Errorf("%s unit %d: offset %d after %d is no record boundary of %d bytes", key, i, v, prev, len(body))
		}
		prev = v
	}
	if prev != uint64(len(body)) {
		t.Errorf("%s: last offset %d; want the size %d", key, prev, len(body))
	}
}

func TestDirRestart(t *testing.T) { testRestart(t, dirKit(t)) }
func TestS3Restart(t *testing.T)  { testRestart(t, s3Kit(t)) }

// testRestart stops a run after each number of acked units in turn —
// with the last unit acked, or committed but never answered (a crash
// between commit and ack) — and runs a new source from the committed
// offsets: every row is ingested once, none twice, none skipped.
func testRestart(t *testing.T, k kit) { restartEvery(t, k, newFixture, 1) }

// restartEvery is testRestart with sources made by mk (polling, or
// once), stopping after every step-th number of acked units.
func restartEvery(t *testing.T, k kit, mk func(*testing.T, Config, Store) *fixture, step int) {
	want, _ := mixedObjects(t, k)
	full := mk(t, mixedConfig(), k.store)
	if err := full.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	total := int(full.src.Stats().UnitsAcked)
	for stopAt := 1; stopAt < total; stopAt += step {
		for _, answered := range []bool{true, false} {
			t.Run(fmt.Sprintf("stop after %d answered %v", stopAt, answered), func(t *testing.T) {
				first := mk(t, mixedConfig(), k.store)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				first.host.onAck = func(n int) error {
					if n < stopAt {
						return nil
					}
					cancel()
					if answered {
						return nil
					}
					return fmt.Errorf("test: host killed before the ack")
				}
				if err := first.run(ctx); err != nil {
					t.Fatal(err)
				}
				second := mk(t, mixedConfig(), k.store)
				second.host = first.host
				first.host.onAck = nil
				if err := second.run(context.Background()); err != nil {
					t.Fatal(err)
				}
				sameIDs(t, second.host.allIDs(), want)
				if got := int(first.src.Stats().UnitsAcked + second.src.Stats().UnitsAcked); answered && got != total {
					t.Errorf("%d units acked over both runs; want %d", got, total)
				}
			})
		}
	}
}

// TestChunksCutAtRecords reads large objects in many chunks: each unit
// ends at a record boundary (never inside a quoted CSV value that spans
// lines) and covers at most ChunkBytes; each CSV unit is decoded with
// the header, so it has the header's columns and types.
func TestChunksCutAtRecords(t *testing.T) {
	k := dirKit(t)
	jl, cs := jsonlRows(0, 3000), csvRows(10_000, 2000)
	k.put(t, "big.jsonl", jl)
	k.put(t, "big.csv", cs)
	const chunk = 4096
	f := newFixture(t, Config{ChunkBytes: chunk}, k.store)
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(0, 3000), seq(10_000, 2000)))
	checkTextUnits(t, f, "big.jsonl", jl, true)
	checkTextUnits(t, f, "big.csv", cs, true)
	for _, key := range []string{"big.jsonl", "big.csv"} {
		prev := uint64(0)
		for i, u := range f.host.unitsOf(f.src.OffsetKey(key)) {
			// The first CSV unit covers the header too.
			if n := u.offset.Value - prev; n > chunk+uint64(len("id,name,v\n")) {
				t.Errorf("%s unit %d covers %d bytes; chunk %d", key, i, n, chunk)
			}
			prev = u.offset.Value
		}
	}
	for i, u := range f.host.unitsOf(f.src.OffsetKey("big.csv")) {
		if got := u.schema.String(); got != csvSchema {
			t.Errorf("csv unit %d schema %s; want %s", i, got, csvSchema)
		}
	}
}

const csvSchema = "schema:\n  fields: 3\n    - id: type=int64, nullable\n    - name: type=utf8, nullable\n    - v: type=float64, nullable"

// TestBlankLines: blank lines before, between and after the rows, in
// more bytes than a chunk, are covered by units that have rows; an
// object of blank lines alone, or a CSV header alone, has no unit, is
// counted done, and is not read again by the next poll.
func TestBlankLines(t *testing.T) {
	k := dirKit(t)
	blanks := bytes.Repeat([]byte(" \n\r\n\n"), 300)
	body := bytes.Join([][]byte{blanks, jsonlRows(0, 20), blanks, jsonlRows(20, 20), blanks}, nil)
	k.put(t, "spaced.jsonl", body)
	k.put(t, "blank.jsonl", blanks)
	k.put(t, "header.csv", []byte("\xEF\xBB\xBFid,name\r\n\r\n"))
	k.put(t, "bom.csv", append([]byte("\xEF\xBB\xBF"), csvRows(100, 3)...))
	f := newFixture(t, Config{ChunkBytes: 512}, k.store)
	passes := 0
	f.src.poll = func(context.Context) error {
		if passes++; passes == 2 {
			return errOnePass
		}
		return nil
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(0, 40), seq(100, 3)))
	units := f.host.unitsOf(f.src.OffsetKey("spaced.jsonl"))
	if last := units[len(units)-1].offset.Value; last != uint64(len(body)) {
		t.Errorf("spaced.jsonl ends at %d; want its size %d", last, len(body))
	}
	for i, u := range units {
		if len(u.ids) == 0 {
			t.Errorf("spaced.jsonl unit %d has no rows", i)
		}
	}
	if st := f.src.Stats(); st.ObjectsDone != 4 {
		t.Errorf("stats %+v: want 4 objects done over two passes", st)
	}
	if got := f.host.unitsOf(f.src.OffsetKey("bom.csv")); len(got) != 1 || got[0].schema.Field(0).Name != "id" {
		t.Errorf("bom.csv units %v: want one, its first column id", got)
	}
}

// TestOffsetKeys: a key too long for an offset key is hashed, into a
// form no plain key of any source can take.
func TestOffsetKeys(t *testing.T) {
	if got := offsetKey("drop", "a/b.csv"); got != "objects/drop/a/b.csv" {
		t.Errorf("offsetKey = %q", got)
	}
	long := string(bytes.Repeat([]byte("x"), 300))
	got := offsetKey("drop", long)
	if len(got) > segment.OffsetKeyBytesMax || got[:len("objects/drop#/")] != "objects/drop#/" {
		t.Errorf("offsetKey of a long key = %q", got)
	}
	if got == offsetKey("drop", long+"y") {
		t.Error("two long keys share an offset key")
	}
	own := ownOffsets(segment.Offsets{{Key: "generator/x/0", Value: 1}, {Key: got, Value: 2}, {Key: "objects/drop/a", Value: 3}, {Key: "objects/dropx/a", Value: 4}}, "drop")
	if len(own) != 2 || own[0].Key != got || own[1].Key != "objects/drop/a" {
		t.Errorf("ownOffsets = %v", own)
	}
}

// TestLongKey ingests an object whose offset key is hashed.
func TestLongKey(t *testing.T) {
	k := dirKit(t)
	key := string(bytes.Repeat([]byte("d"), 200)) + "/" + string(bytes.Repeat([]byte("f"), 200)) + ".jsonl"
	k.put(t, key, jsonlRows(0, 3))
	f := newFixture(t, Config{}, k.store)
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), seq(0, 3))
	if v, _ := f.host.offsets().Get(offsetKey("drop", key)); v != uint64(len(jsonlRows(0, 3))) {
		t.Errorf("hashed offset %d", v)
	}
}

// TestParquetGroups: row groups of no rows join a neighbouring unit; a
// file of such groups alone has no unit and is done; two files whose
// schemas differ in metadata alone give one schema.
func TestParquetGroups(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a.parquet", parquetGroups(t, 0, 0, 10, 0, 10, 0))
	k.put(t, "b.parquet", parquetGroups(t, 100, 0, 0))
	k.put(t, "c.parquet", parquetGroups(t, 200, 3))
	f := newFixture(t, Config{ChunkBytes: 1}, k.store)
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(0, 20), seq(200, 3)))
	var got []uint64
	for _, u := range f.host.unitsOf(f.src.OffsetKey("a.parquet")) {
		got = append(got, u.offset.Value)
	}
	if want := []uint64{3, parquetDone | 5}; !slices.Equal(got, want) {
		t.Errorf("a.parquet offsets %v; want %v", got, want)
	}
	if st := f.src.Stats(); st.ObjectsDone != 3 {
		t.Errorf("stats %+v: want 3 objects done", st)
	}
	a, c := f.host.unitsOf(f.src.OffsetKey("a.parquet"))[0].schema, f.host.unitsOf(f.src.OffsetKey("c.parquet"))[0].schema
	if !a.Equal(c) || a.HasMetadata() {
		t.Errorf("schemas %v and %v: want one, without metadata", a, c)
	}
}

// TestRunOnce: a second Run while one runs is refused.
func TestRunOnce(t *testing.T) {
	f := newFixture(t, Config{}, dirKit(t).store)
	f.src.running.Store(true)
	if err := f.run(context.Background()); err == nil {
		t.Error("a second Run ran")
	}
}

// TestRowsPerChunk: a chunk holds at most Limits.Rows rows (the CSV
// header aside), so a file of short lines never makes a body the
// decoder refuses for its row count.
func TestRowsPerChunk(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a.jsonl", jsonlRows(0, 50))
	k.put(t, "b.csv", csvRows(100, 50))
	lim := httpsrc.DefaultLimits()
	lim.Rows = 7
	f := newFixture(t, Config{Limits: lim}, k.store)
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(0, 50), seq(100, 50)))
	for _, key := range []string{"a.jsonl", "b.csv"} {
		units := f.host.unitsOf(f.src.OffsetKey(key))
		for i, u := range units {
			if len(u.ids) != 7 && i != len(units)-1 {
				t.Errorf("%s unit %d has %d rows; want 7", key, i, len(u.ids))
			}
		}
	}
}
