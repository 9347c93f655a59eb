package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/skipprd/skipprd/engine/segment"
)

// onceFixture is a fixture whose source runs with Once; a poll fails
// the test (a once Run never waits for another listing).
func onceFixture(t *testing.T, cfg Config, store Store) *fixture {
	t.Helper()
	cfg.Once = true
	f := newFixture(t, cfg, store)
	f.src.poll = func(context.Context) error {
		t.Error("a once Run polled")
		return errOnePass
	}
	return f
}

func TestDirOnce(t *testing.T) { testOnce(t, dirKit(t)) }
func TestS3Once(t *testing.T)  { testOnce(t, s3Kit(t)) }

// testOnce: a once Run ingests every object of its listing and returns
// nil without polling; a second once Run over the same offsets ingests
// only the objects added since, and a third, with nothing new, nothing.
func testOnce(t *testing.T, k kit) {
	want, _ := mixedObjects(t, k)
	first := onceFixture(t, mixedConfig(), k.store)
	if err := first.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, first.host.allIDs(), want)
	contains(t, first.log.String(), "once: every object of the listing at start is ingested and acked", "objects_ingested=4")

	k.put(t, "c/f.jsonl", jsonlRows(5000, 7))
	k.put(t, "0.csv", csvRows(6000, 3))
	second := onceFixture(t, mixedConfig(), k.store)
	second.host = first.host
	if err := second.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, second.host.allIDs(), concat(want, seq(5000, 7), seq(6000, 3)))
	if st := second.src.Stats(); st.ObjectsDone != 2 || st.RowsIngested != 10 || st.RowsAcked != 10 {
		t.Errorf("second once run: stats %+v; want the 2 new objects, 10 rows, nothing else", st)
	}
	third := onceFixture(t, mixedConfig(), k.store)
	third.host = first.host
	if err := third.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := third.src.Stats(); st.ObjectsDone != 0 || st.RowsIngested != 0 {
		t.Errorf("third once run, nothing new: stats %+v; want nothing ingested", st)
	}
}

// TestOnceStoreErrorsEndTheRun: a listing or read error ends a once Run
// with an error naming the source (and the object), instead of a retry at
// a poll that never comes; a once Run after it, the store healthy again,
// ingests every row exactly once from the acked offsets.
func TestOnceStoreErrorsEndTheRun(t *testing.T) {
	for _, c := range []struct {
		name         string
		lists, opens int
		want         []string
	}{
		{"listing", 1, 0, []string{`objects source "drop": listing after "" failed`, "connection reset"}},
		{"read", 0, 1, []string{`objects source "drop": object "a.jsonl": reading failed`, "connection reset"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			k := dirKit(t)
			k.put(t, "a.jsonl", jsonlRows(0, 5))
			k.put(t, "b.parquet", parquetBytes(t, 10, 2, 5))
			store := &flakyStore{Store: k.store, lists: c.lists, opens: c.opens}
			first := onceFixture(t, Config{InFlight: 1}, store)
			err := first.run(context.Background())
			var se *OnceStoreError
			if !errors.As(err, &se) || !errors.Is(err, errFlaky) {
				t.Fatalf("once Run over a failing store: %v; want an *OnceStoreError with its error", err)
			}
			contains(t, err.Error(), c.want...)
			second := onceFixture(t, Config{}, store)
			second.host = first.host
			if err := second.run(context.Background()); err != nil {
				t.Fatal(err)
			}
			sameIDs(t, second.host.allIDs(), concat(seq(0, 5), seq(10, 10)))
		})
	}
}

// TestOnceAfterACrash: a once Run stopped after each third number of
// acked units (the last one acked, or committed but never answered),
// then a once Run from the committed offsets: every row once, and the
// second run hands over only what the first had not had acked.
func TestOnceAfterACrash(t *testing.T) { restartEvery(t, dirKit(t), onceFixture, 3) }

// TestOnceOrderKeys: with Order "keys" a once Run starts after the floor
// an earlier run left, carries it on its units, ingests what is above
// it, and keeps every new object's offset key (its floor cannot rise).
func TestOnceOrderKeys(t *testing.T) {
	k := dirKit(t)
	for i := range 7 {
		k.put(t, fmt.Sprintf("%02d.jsonl", i), jsonlRows(100*i, 3))
	}
	f := onceFixture(t, Config{Order: OrderKeys, Settle: 1}, k.store)
	floor := segment.FloorKey(family("drop"), "03.jsonl")
	f.host.committed = segment.Offsets{{Key: floor, Value: 1}} // 00..03 are done
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(400, 3), seq(500, 3), seq(600, 3)))
	for _, u := range f.host.units {
		if !strings.HasPrefix(u.offset.Key, "objects/drop/0") || u.offset.Key <= "objects/drop/03.jsonl" {
			t.Errorf("unit at %v: want only the objects above the floor", u.offset)
		}
	}
	if got := f.src.prog.floorMark(); got != "03.jsonl" {
		t.Errorf("floor after the once run %q; want it unchanged, 03.jsonl", got)
	}
	if keys := f.src.prog.size(); keys != 3 {
		t.Errorf("the source holds %d keys; want the 3 objects above the floor", keys)
	}
}
