package objects

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// testClock is a clock a test moves.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// putObjects puts n JSON-lines objects prefix000… of 3 rows each, ids
// from on, and returns their ids.
func putObjects(t *testing.T, k kit, prefix string, n, from int) []int64 {
	for i := range n {
		k.put(t, fmt.Sprintf("%s%03d.jsonl", prefix, i), jsonlRows(from+3*i, 3))
	}
	return seq(from, 3*n)
}

// countingStore counts the objects its listings return.
type countingStore struct {
	Store
	mu     sync.Mutex
	listed int
}

func (s *countingStore) List(ctx context.Context, after string) (Page, error) {
	p, err := s.Store.List(ctx, after)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listed += len(p.Objects)
	return p, err
}

// With Order "keys", the floor rises over objects done and listed at
// least Settle ago; the next unit carries it, and the host's offsets
// then hold the floor and the keys above it only. A source resuming
// from them lists after the floor and ingests nothing twice.
func TestOrderKeysRetiresOffsetsBehindAFloor(t *testing.T) {
	k := dirKit(t)
	want := putObjects(t, k, "a", 30, 0)
	clock := &testClock{now: time.Unix(1e9, 0)}
	cfg := Config{Order: OrderKeys, Settle: time.Minute, Now: clock.Now}
	f := newFixture(t, cfg, k.store)
	passes := 0
	f.src.poll = func(context.Context) error {
		passes++
		clock.add(2 * time.Minute)
		if passes == 1 {
			want = append(want, putObjects(t, k, "b", 5, 1000)...)
		}
		if passes == 2 {
			return errOnePass
		}
		return nil
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), want)
	// Pass 1 ingested a000…a029, too recent for the floor; pass 2 raised
	// it to a029 and the b objects' units carried it.
	floor := segment.FloorKey(family("drop"), "a029.jsonl")
	if _, ok := f.host.offsets().Get(floor); !ok || len(f.host.offsets()) != 6 {
		t.Fatalf("host offsets %v: want the floor %q and the 5 b keys", f.host.offsets(), floor)
	}
	if n := f.src.prog.size(); n != 5 {
		t.Errorf("the source holds %d keys and settled objects; want the 5 above the floor", n)
	}

	store := &countingStore{Store: k.store}
	again := newFixture(t, cfg, store)
	again.host = f.host
	if err := again.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), want)
	if store.listed != 5 {
		t.Errorf("a resumed source listed %d objects; want the 5 above the floor", store.listed)
	}
}

// An object that appears with a key below one already ingested is
// ingested, as long as it appears within Settle: the floor waits.
func TestOrderKeysFindsALateObjectWithinSettle(t *testing.T) {
	k := dirKit(t)
	want := putObjects(t, k, "a", 3, 0)
	k.put(t, "c.jsonl", jsonlRows(100, 2))
	want = append(want, seq(100, 2)...)
	clock := &testClock{now: time.Unix(1e9, 0)}
	f := newFixture(t, Config{Order: OrderKeys, Settle: time.Minute, Now: clock.Now}, k.store)
	passes := 0
	f.src.poll = func(context.Context) error {
		passes++
		switch passes {
		case 1:
			clock.add(30 * time.Second)
			k.put(t, "b.jsonl", jsonlRows(200, 2)) // below c, within Settle
			want = append(want, seq(200, 2)...)
		case 2:
			clock.add(time.Hour)
		case 3:
			k.put(t, "d.jsonl", jsonlRows(300, 1)) // carries the floor
			want = append(want, 300)
		default:
			return errOnePass
		}
		return nil
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), want)
	if _, ok := f.host.offsets().Get(segment.FloorKey(family("drop"), "c.jsonl")); !ok {
		t.Errorf("host offsets %v: want the floor at c.jsonl", f.host.offsets())
	}
}

// Several objects are in flight at once: the host holds its answers
// until InFlight units are with it together, which a source ingesting
// one object at a time never reaches.
func TestSeveralObjectsInFlight(t *testing.T) {
	k := dirKit(t)
	want := putObjects(t, k, "a", 12, 0)
	f := newFixture(t, Config{InFlight: 4}, k.store)
	var mu sync.Mutex
	inside, most := 0, 0
	all, once := make(chan struct{}), sync.Once{}
	ingest := func(ctx context.Context, u engine.Unit) error {
		mu.Lock()
		inside++
		most = max(most, inside)
		if inside == 4 {
			once.Do(func() { close(all) })
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(5 * time.Second):
		}
		defer func() { mu.Lock(); inside--; mu.Unlock() }()
		return f.host.ingest(ctx, u)
	}
	if err := f.src.Run(context.Background(), ingest, nil); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), want)
	if most != 4 {
		t.Errorf("at most %d units in flight at once; want 4", most)
	}
}

// A full offsets view (order any: a key per object) makes units wait,
// and the log says once why and what to do.
func TestAFullOffsetsViewIsExplainedOnce(t *testing.T) {
	k := dirKit(t)
	want := putObjects(t, k, "a", 3, 0)
	f := newFixture(t, Config{InFlight: 1}, k.store)
	f.host.answer = func(n int, _ engine.Unit) error {
		if n <= 4 {
			return fmt.Errorf("%w (262144 source offsets with this unit, limit 262144)", engine.ErrOffsetsViewFull)
		}
		return nil
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), want)
	if n := strings.Count(f.log.String(), "offsets view is full"); n != 1 {
		t.Errorf("the full view explained %d times; want once:\n%s", n, f.log.String())
	}
	contains(t, f.log.String(), "order: keys")
}

// With several objects in flight, an object that stops the source
// stops the ones after it in key order; those before it go on to their
// end, as when objects went one at a time.
func TestAStopLetsTheObjectsBeforeItFinish(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a-good.jsonl", jsonlRows(0, 300))
	k.put(t, "b-bad.jsonl", []byte("{\"id\":1000}\nnot json\n"))
	f := newFixture(t, Config{InFlight: 4, ChunkBytes: 400}, k.store)
	err := f.run(context.Background())
	var oe *ObjectError
	if !errors.As(err, &oe) || oe.Object != "b-bad.jsonl" {
		t.Fatalf("Run = %v; want b-bad.jsonl's *ObjectError", err)
	}
	sameIDs(t, f.host.allIDs(), seq(0, 300))
}
