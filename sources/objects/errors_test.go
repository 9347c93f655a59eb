package objects

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	httpsrc "github.com/skipprd/skipprd/sources/http"
)

// badJSON is 100 JSON lines whose line 57 has a string where the others
// have numbers; badAt is that line's byte offset.
func badJSON() (body []byte, badAt int) {
	var b bytes.Buffer
	for i := range 100 {
		if i == 56 {
			badAt = b.Len()
			fmt.Fprintf(&b, "{\"id\":%d,\"v\":\"oops\"}\n", 5000+i)
			continue
		}
		fmt.Fprintf(&b, "{\"id\":%d,\"v\":%d}\n", 5000+i, i)
	}
	return b.Bytes(), badAt
}

// corruptObjects puts a good object, a bad one, and another good one.
func corruptObjects(t *testing.T, k kit) (bad []byte, badAt int) {
	bad, badAt = badJSON()
	k.put(t, "1.jsonl", jsonlRows(0, 30))
	k.put(t, "2.jsonl", bad)
	k.put(t, "3.jsonl", jsonlRows(100, 30))
	return bad, badAt
}

// TestCorruptStop: the error names the source, the object, its line
// and byte offset and the field, though the line is in a later chunk;
// rows before the bad chunk are acked, nothing after it is read (one
// object in flight: with more, those in flight stop after their unit).
func TestCorruptStop(t *testing.T) {
	k := dirKit(t)
	_, badAt := corruptObjects(t, k)
	f := newFixture(t, Config{ChunkBytes: 400, InFlight: 1}, k.store)
	err := f.run(context.Background())
	var oe *ObjectError
	if !errors.As(err, &oe) {
		t.Fatalf("Run = %v; want an *ObjectError", err)
	}
	contains(t, err.Error(), `objects source "drop"`, `object "2.jsonl"`, fmt.Sprintf("line 57 (byte offset %d)", badAt), `field "v"`)
	var ie *httpsrc.InputError
	if !errors.As(err, &ie) || ie.Line != 57 {
		t.Errorf("cause %v: want an InputError at line 57", ie)
	}
	if v, _ := f.host.offsets().Get(f.src.OffsetKey("2.jsonl")); v == 0 || v > uint64(badAt) {
		t.Errorf("2.jsonl acked to %d; want the chunks before byte %d", v, badAt)
	}
	if len(f.host.unitsOf(f.src.OffsetKey("3.jsonl"))) != 0 {
		t.Error("3.jsonl ingested after a stop")
	}

	// A new source resuming inside the object names the same line.
	again := newFixture(t, Config{ChunkBytes: 400}, k.store)
	again.host = f.host
	err = again.run(context.Background())
	contains(t, fmt.Sprint(err), `object "2.jsonl"`, fmt.Sprintf("line 57 (byte offset %d)", badAt))
}

// TestCorruptSkip: the bad object is logged at error level and
// counted, the next one ingested; the skipped object is not marked done
// and a later poll of the same run does not report it again.
func TestCorruptSkip(t *testing.T) {
	k := dirKit(t)
	bad, _ := corruptObjects(t, k)
	f := newFixture(t, Config{ChunkBytes: 400, OnError: OnErrorSkip}, k.store)
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
	if st := f.src.Stats(); st.ObjectsSkipped != 1 || st.ObjectsDone != 2 {
		t.Errorf("stats %+v: want 1 skipped, 2 done", st)
	}
	contains(t, f.log.String(), "level=ERROR", "2.jsonl", "line 57")
	if n := strings.Count(f.log.String(), "level=ERROR"); n != 1 {
		t.Errorf("%d errors logged over two passes; want 1", n)
	}
	if v, _ := f.host.offsets().Get(f.src.OffsetKey("2.jsonl")); v >= uint64(len(bad)) {
		t.Errorf("skipped object marked done (%d of %d)", v, len(bad))
	}
	got := f.host.allIDs()
	if _, ok := slicesIndex(got, 129); !ok {
		t.Error("3.jsonl not ingested after the skip")
	}
}

func slicesIndex(s []int64, v int64) (int, bool) {
	for i, x := range s {
		if x == v {
			return i, true
		}
	}
	return 0, false
}

// TestObjectErrors: each kind of bad object names the object and where.
func TestObjectErrors(t *testing.T) {
	cases := []struct {
		name, key string
		body      []byte
		cfg       Config
		want      []string
	}{
		{"csv field count", "x.csv", []byte("id,name\n1,a\n2,b,c\n"), Config{},
			[]string{`object "x.csv"`, "line 3 (byte offset 12)", "3 fields where the header has 2"}},
		{"csv field count resumed", "x.csv", append(csvRows(0, 60), "7\n"...), Config{ChunkBytes: 256},
			[]string{`object "x.csv"`, "line 74 ", "1 fields where the header has 3"}},
		{"line over a chunk", "long.jsonl", append(jsonlRows(0, 3), append(bytes.Repeat([]byte(" "), 300), "{}\n"...)...), Config{ChunkBytes: 200},
			[]string{`object "long.jsonl"`, "line 4 (byte offset", "longer than 200 bytes"}},
		{"unclosed quote", "q.csv", []byte("id,name\n1,\"open\n2,b\n"), Config{},
			[]string{`object "q.csv"`, "line 2", "still open at the end"}},
		{"no format", "notes.txt", []byte("hello\n"), Config{},
			[]string{`object "notes.txt"`, `no format for the extension ".txt"`}},
		{"not parquet", "x.parquet", []byte("PAR1 but not really\n"), Config{},
			[]string{`object "x.parquet"`, "not a readable Parquet file"}},
		{"fixed format", "data.bin", []byte("{\"id\":1}\nnope\n"), Config{Format: FormatJSONLines},
			[]string{`object "data.bin"`, "line 2 (byte offset 9)", "invalid JSON"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := dirKit(t)
			k.put(t, c.key, c.body)
			f := newFixture(t, c.cfg, k.store)
			err := f.run(context.Background())
			var oe *ObjectError
			if !errors.As(err, &oe) {
				t.Fatalf("Run = %v; want an *ObjectError", err)
			}
			contains(t, err.Error(), c.want...)
		})
	}
}

// TestErrorLineResumed: a source that resumes inside an object still
// names the object's line, counted from its start.
func TestErrorLineResumed(t *testing.T) {
	k := dirKit(t)
	body := append(csvRows(0, 60), "7\n"...) // 73 lines, then a bad one
	k.put(t, "x.csv", body)
	first := newFixture(t, Config{ChunkBytes: 256}, k.store)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first.host.onAck = func(int) error { cancel(); return nil }
	if err := first.run(ctx); err != nil {
		t.Fatal(err)
	}
	if v, _ := first.host.offsets().Get(first.src.OffsetKey("x.csv")); v == 0 {
		t.Fatal("the first run acked nothing")
	}
	first.host.onAck = nil
	again := newFixture(t, Config{ChunkBytes: 256}, k.store)
	again.host = first.host
	err := again.run(context.Background())
	contains(t, fmt.Sprint(err), `object "x.csv"`, fmt.Sprintf("line 74 (byte offset %d)", len(body)-2))
}

// TestRetriesSameUnit: backpressure, recovery and an unknown outcome
// are retried with the very same unit after a doubling backoff; a unit
// committed whose answer was lost is acked on retry, not stored twice.
func TestRetriesSameUnit(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a.jsonl", jsonlRows(0, 10))
	f := newFixture(t, Config{}, k.store)
	var seen []string
	f.host.answer = func(n int, u engine.Unit) error {
		seen = append(seen, fmt.Sprintf("%v %d", u.Offsets, u.Batches[0].NumRows()))
		switch n {
		case 1, 2:
			return fmt.Errorf("test: %w", engine.ErrResourceExhausted)
		case 3:
			return engine.ErrNotReady
		case 4:
			return engine.ErrUnknownOutcome
		}
		return nil
	}
	lost := false
	f.host.onAck = func(int) error {
		if !lost {
			lost = true
			return errors.New("test: answer lost")
		}
		return nil
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), seq(0, 10))
	for i := range seen {
		if seen[i] != seen[0] {
			t.Errorf("call %d offered %s; call 1 %s", i+1, seen[i], seen[0])
		}
	}
	if len(seen) != 6 {
		t.Errorf("%d calls; want 6", len(seen))
	}
	want := []time.Duration{25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond}
	if fmt.Sprint(f.sleeps) != fmt.Sprint(want) {
		t.Errorf("backoffs %v; want %v", f.sleeps, want)
	}
	if st := f.src.Stats(); st.Retries != 5 || st.RowsAcked != 10 || st.RowsIngested != 10 || st.UnitsAcked != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestHostRefuses: a unit the host will never take is the object's
// error; a host that closed ends Run with an error.
func TestHostRefuses(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a.jsonl", jsonlRows(0, 10))
	f := newFixture(t, Config{}, k.store)
	f.host.answer = func(int, engine.Unit) error { return fmt.Errorf("%w: too big", engine.ErrInvalidUnit) }
	err := f.run(context.Background())
	contains(t, fmt.Sprint(err), `object "a.jsonl"`, "line 1 (byte offset 0)", "host refuses")

	g := newFixture(t, Config{OnError: OnErrorSkip}, k.store)
	g.host.answer = func(int, engine.Unit) error { return engine.ErrClosed }
	err = g.run(context.Background())
	if !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Run = %v; want engine.ErrClosed", err)
	}
	if st := g.src.Stats(); st.RowsIngested != 0 {
		t.Errorf("stats %+v: a refused unit is not ingested", st)
	}
}

// TestStopWhileRefused: a source backing off returns nil when ctx ends.
func TestStopWhileRefused(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a.jsonl", jsonlRows(0, 10))
	f := newFixture(t, Config{}, k.store)
	ctx, cancel := context.WithCancel(context.Background())
	f.host.answer = func(n int, _ engine.Unit) error {
		if n == 3 {
			cancel()
		}
		return engine.ErrResourceExhausted
	}
	if err := f.run(ctx); err != nil {
		t.Fatalf("Run = %v; want nil after ctx ended", err)
	}
}

// TestSparseChunkHalved: a chunk that decodes to more Arrow memory than
// the limits allow (sparse JSON: each line another field) is read again
// in halves until it fits; every row arrives once.
func TestSparseChunkHalved(t *testing.T) {
	k := dirKit(t)
	var b bytes.Buffer
	for i := range 200 {
		fmt.Fprintf(&b, "{\"id\":%d,\"f%d\":1}\n", i, i)
	}
	k.put(t, "sparse.jsonl", b.Bytes())
	lim := httpsrc.DefaultLimits()
	lim.BodyBytes = 4096
	f := newFixture(t, Config{ChunkBytes: 4000, Limits: lim}, k.store)
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), seq(0, 200))
	contains(t, f.log.String(), "reading it in halves")
}
