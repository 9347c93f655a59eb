package sim

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/storetest"
)

// storeWorld is a scheduler, a store and one live incarnation.
type storeWorld struct {
	t     *testing.T
	sched *Scheduler
	store *Store
	inc   *Incarnation
	c     engine.ObjectStore
}

func newStoreWorld(t *testing.T, seed uint64, cfg StoreConfig) *storeWorld {
	root := NewRand(seed)
	s := NewScheduler(root.Split("sched"), NewTrace(), SchedulerConfig{})
	st := NewStore(s, root.Split("store"), cfg)
	inc := s.NewIncarnation()
	return &storeWorld{t: t, sched: s, store: st, inc: inc, c: st.Client(inc)}
}

// fixedLatency sets every operation's latency to exactly d.
func fixedLatency(d time.Duration) [NumOps]Latency {
	var l [NumOps]Latency
	for op := range NumOps {
		l[op] = Constant(d)
	}
	return l
}

// await issues one request and steps the world until its callback ran.
func (w *storeWorld) await(issue func(finish func())) {
	w.t.Helper()
	finished := false
	issue(func() { finished = true })
	for !finished {
		if !w.sched.Step() {
			w.t.Fatal("world went idle before the callback ran")
		}
	}
}

func (w *storeWorld) put(in engine.PutObjectInput) (etag string, err error) {
	w.await(func(finish func()) {
		w.c.PutObject(in, func(e string, er error) { etag, err = e, er; finish() })
	})
	return etag, err
}

func (w *storeWorld) del(key string) (err error) {
	w.await(func(finish func()) { w.c.DeleteObject(key, func(e error) { err = e; finish() }) })
	return err
}

func (w *storeWorld) head(key string) (err error) {
	w.await(func(finish func()) {
		w.c.HeadObject(key, func(_ engine.ObjectInfo, e error) { err = e; finish() })
	})
	return err
}

func (w *storeWorld) listPage(prefix, token string) engine.ListPage {
	var page engine.ListPage
	var err error
	w.await(func(finish func()) {
		w.c.ListObjects(prefix, token, func(p engine.ListPage, e error) { page, err = p, e; finish() })
	})
	if err != nil {
		w.t.Fatalf("list %q after %q: %v", prefix, token, err)
	}
	return page
}

// listAll walks every page and returns the keys.
func (w *storeWorld) listAll(prefix string) []string {
	var keys []string
	token := ""
	for range 1000 {
		page := w.listPage(prefix, token)
		if len(page.Objects) > w.store.cfg.PageSize {
			w.t.Fatalf("page of %d objects, page size %d", len(page.Objects), w.store.cfg.PageSize)
		}
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if page.NextToken == "" {
			return keys
		}
		token = page.NextToken
	}
	w.t.Fatal("listing never ends")
	return nil
}

func TestStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		w := newStoreWorld(t, 1, StoreConfig{PageSize: 4})
		return storetest.Harness{Store: w.c, Await: w.await}
	})
}

// A new key is invisible to LIST until exactly its lag has elapsed, while
// GET and HEAD see it at once; a deleted key lingers exactly its linger
// time. Catches: lag applied to reads, off-by-one at the boundary, linger
// not applied, deletes hiding keys from listings at once.
func TestStoreListLag(t *testing.T) {
	const lag, linger, tick = time.Second, 3 * time.Second, time.Millisecond
	w := newStoreWorld(t, 2, StoreConfig{Latency: fixedLatency(tick),
		ListLagMin: lag, ListLagMax: lag, ListLingerMin: linger, ListLingerMax: linger})
	var applied time.Duration
	w.store.OnApply = func(op Op, key string) { applied = w.sched.Now() }

	if _, err := w.put(engine.PutObjectInput{Key: "p/a", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := w.head("p/a"); err != nil {
		t.Fatalf("HEAD lags behind a PUT: %v", err)
	}
	w.listAt(applied+lag-1, "p/", nil)
	w.listAt(applied+lag, "p/", []string{"p/a"})
	w.sched.Run(100)

	if err := w.del("p/a"); err != nil {
		t.Fatal(err)
	}
	if err := w.head("p/a"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("HEAD after delete: %v, want not found", err)
	}
	if _, ok := w.store.Object("p/a"); ok || len(w.store.Keys("p/")) != 0 {
		t.Fatal("truth still holds a deleted key")
	}
	w.listAt(applied+linger-1, "p/", []string{"p/a"})
	w.listAt(applied+linger, "p/", nil)
	w.sched.Run(100)
}

// listAt schedules a single-page LIST to complete exactly at time at
// (LIST latency is 1ms) and checks its keys when it does.
func (w *storeWorld) listAt(at time.Duration, prefix string, want []string) {
	w.t.Helper()
	w.sched.At(at-time.Millisecond, func() {
		w.c.ListObjects(prefix, "", func(p engine.ListPage, err error) {
			var got []string
			for _, o := range p.Objects {
				got = append(got, o.Key)
			}
			if err != nil || !slices.Equal(got, want) || w.sched.Now() != at || p.NextToken != "" {
				w.t.Errorf("list at %v (ran at %v): got %q %v, want %q", at, w.sched.Now(), got, err, want)
			}
		})
	})
}

// A key deleted before it ever became visible never shows up, and one
// re-created while lingering stays listed. Catches ghost listings.
func TestStoreListLagEdges(t *testing.T) {
	w := newStoreWorld(t, 3, StoreConfig{Latency: fixedLatency(time.Millisecond),
		ListLagMin: time.Second, ListLagMax: time.Second, ListLingerMin: time.Second, ListLingerMax: time.Second})
	w.put(engine.PutObjectInput{Key: "ghost", Body: []byte("x")})
	w.del("ghost")
	w.sched.RunUntil(w.sched.Now() + 5*time.Second)
	if got := w.listAll(""); len(got) != 0 {
		t.Fatalf("a key deleted before it was visible is listed: %q", got)
	}
	w.put(engine.PutObjectInput{Key: "k", Body: []byte("1")})
	w.sched.RunUntil(w.sched.Now() + 2*time.Second)
	w.del("k")
	w.put(engine.PutObjectInput{Key: "k", Body: []byte("2")})
	if got := w.listAll(""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("re-created lingering key: %q", got)
	}
}

// Paginating while keys are still appearing: pages never exceed the page
// size, keys come strictly ascending without duplicates, every key visible
// when the walk began is returned, and nothing invisible for the whole
// walk is. Catches tokens that skip or repeat keys, and lag ignored by the
// pager.
func TestStoreListLagPagination(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		w := newStoreWorld(t, seed, StoreConfig{PageSize: 4, ListLagMin: 0, ListLagMax: 300 * time.Millisecond})
		for i := range 13 {
			w.put(engine.PutObjectInput{Key: fmt.Sprintf("seg/%02d", (i*7)%13), Body: []byte{byte(i)}})
		}
		w.put(engine.PutObjectInput{Key: "other", Body: []byte("x")})
		start := w.sched.Now()
		got := w.listAll("seg/")
		end := w.sched.Now()
		for i := 1; i < len(got); i++ {
			if got[i] <= got[i-1] {
				t.Fatalf("seed %d: keys not strictly ascending: %q", seed, got)
			}
		}
		for _, k := range w.store.Keys("seg/") {
			e := w.store.entries[k]
			listed := slices.Contains(got, k)
			if e.visibleAt <= start && !listed {
				t.Fatalf("seed %d: %s visible since %v missing from a walk that began at %v", seed, k, e.visibleAt, start)
			}
			if e.visibleAt > end && listed {
				t.Fatalf("seed %d: %s listed before it was visible (%v > %v)", seed, k, e.visibleAt, end)
			}
		}
		w.sched.RunUntil(end + time.Second)
		if all := w.listAll("seg/"); len(all) != 13 {
			t.Fatalf("seed %d: after the lag, %d keys listed, want 13", seed, len(all))
		}
	}
}

// Uploads follow the same lag and linger rules.
func TestStoreListUploadsLag(t *testing.T) {
	w := newStoreWorld(t, 4, StoreConfig{Latency: fixedLatency(time.Millisecond), PageSize: 2,
		ListLagMin: time.Second, ListLagMax: time.Second, ListLingerMin: time.Second, ListLingerMax: time.Second})
	ids := make([]string, 3)
	for i, k := range []string{"u/b", "u/a", "u/c"} {
		w.await(func(finish func()) {
			w.c.CreateMultipartUpload(k, func(id string, err error) { ids[i] = id; finish() })
		})
	}
	if ups := w.uploads("u/"); len(ups) != 0 {
		t.Fatalf("uploads listed before their lag: %+v", ups)
	}
	if len(w.store.Uploads()) != 3 {
		t.Fatalf("truth has %d uploads, want 3", len(w.store.Uploads()))
	}
	w.sched.RunUntil(w.sched.Now() + time.Second)
	if ups := w.uploads("u/"); len(ups) != 3 || ups[0].Key != "u/a" || ups[2].Key != "u/c" {
		t.Fatalf("uploads after lag: %+v", ups)
	}
	w.await(func(finish func()) { w.c.AbortMultipartUpload("u/b", ids[0], func(error) { finish() }) })
	if ups := w.uploads("u/"); len(ups) != 3 {
		t.Fatalf("aborted upload does not linger: %+v", ups)
	}
	w.sched.RunUntil(w.sched.Now() + time.Second)
	if ups := w.uploads("u/"); len(ups) != 2 {
		t.Fatalf("aborted upload lingers forever: %+v", ups)
	}
}

func (w *storeWorld) uploads(prefix string) []engine.Upload {
	var all []engine.Upload
	km, um := "", ""
	for range 100 {
		var page engine.UploadsPage
		w.await(func(finish func()) {
			w.c.ListMultipartUploads(prefix, km, um, func(p engine.UploadsPage, _ error) { page = p; finish() })
		})
		all = append(all, page.Uploads...)
		if !page.Truncated {
			return all
		}
		km, um = page.NextKeyMarker, page.NextUploadIDMarker
	}
	w.t.Fatal("upload listing never ends")
	return nil
}

// A PUT in flight when its process dies still lands, but its callback
// never runs; a request issued after death never reaches the store.
// Catches: the store dropping in-flight effects on kill (hiding the
// "crash after the marker landed" window), or delivering to the dead.
func TestStoreKilledInFlightPut(t *testing.T) {
	w := newStoreWorld(t, 5, StoreConfig{})
	called := false
	w.c.PutObject(engine.PutObjectInput{Key: "m.commit", Body: []byte("marker")}, func(string, error) { called = true })
	if _, ok := w.store.Object("m.commit"); ok {
		t.Fatal("the PUT completed before the test could kill its process")
	}
	w.inc.Kill()
	w.c.PutObject(engine.PutObjectInput{Key: "after-death", Body: []byte("x")}, func(string, error) { called = true })
	w.sched.Run(1000)
	if body, ok := w.store.Object("m.commit"); !ok || string(body) != "marker" {
		t.Fatal("an in-flight PUT of a killed process did not land")
	}
	if called {
		t.Fatal("a dead incarnation's callback ran")
	}
	if _, ok := w.store.Object("after-death"); ok {
		t.Fatal("a request issued by a dead incarnation took effect")
	}
	c := w.store.Counts(OpPut)
	if c.Issued != 1 || c.Discarded != 1 || c.Applied != 1 || c.Dropped != 1 || c.Delivered != 0 {
		t.Fatalf("counts %+v", c)
	}
}

// Each outcome does exactly what it says, for a PUT, a DELETE and a
// multipart Complete. Catches: ambiguous errors that are not
// ErrAmbiguous, definite errors that apply, applied outcomes that don't.
func TestStoreFaultOutcomes(t *testing.T) {
	cases := []struct {
		outcome Outcome
		want    error // sentinel the caller sees; nil = success
		applied bool
	}{
		{OK, nil, true},
		{Fail, ErrInjected, false},
		{Throttle, engine.ErrThrottled, false},
		{AmbiguousApplied, engine.ErrAmbiguous, true},
		{AmbiguousLost, engine.ErrAmbiguous, false},
	}
	for _, tc := range cases {
		t.Run(tc.outcome.String(), func(t *testing.T) {
			w := newStoreWorld(t, 6, StoreConfig{})
			w.put(engine.PutObjectInput{Key: "old", Body: []byte("o")})
			id, etag := w.startUpload("mp")
			w.store.SetFaults(StoreRulesFaults(StoreFault(tc.outcome)))

			_, err := w.put(engine.PutObjectInput{Key: "new", Body: []byte("n")})
			checkOutcome(t, "put", err, tc.want, w.has("new"), tc.applied)
			err = w.del("old")
			checkOutcome(t, "delete", err, tc.want, !w.has("old"), tc.applied)
			w.await(func(finish func()) {
				w.c.CompleteMultipartUpload("mp", id, []engine.CompletedPart{{Number: 1, ETag: etag}},
					func(e error) { err = e; finish() })
			})
			checkOutcome(t, "complete", err, tc.want, w.has("mp"), tc.applied)
		})
	}
}

func checkOutcome(t *testing.T, what string, err, want error, applied, wantApplied bool) {
	t.Helper()
	if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
		t.Fatalf("%s: error %v, want %v", what, err, want)
	}
	if want != engine.ErrAmbiguous && errors.Is(err, engine.ErrAmbiguous) {
		t.Fatalf("%s: definite outcome reported as ambiguous: %v", what, err)
	}
	if applied != wantApplied {
		t.Fatalf("%s: applied=%v, want %v", what, applied, wantApplied)
	}
}

func (w *storeWorld) has(key string) bool { _, ok := w.store.Object(key); return ok }

// startUpload creates an upload at key with one part and returns its id
// and the part's ETag.
func (w *storeWorld) startUpload(key string) (id, etag string) {
	w.await(func(finish func()) { w.c.CreateMultipartUpload(key, func(u string, _ error) { id = u; finish() }) })
	w.await(func(finish func()) {
		w.c.UploadPart(key, id, 1, []byte("part"), func(e string, _ error) { etag = e; finish() })
	})
	return id, etag
}

// With AmbiguousLandMax, an ambiguous write may land after the caller got
// its error — the window in which a HEAD says "absent" yet the write
// arrives. Catches a model that can never produce that window.
func TestStoreAmbiguousLandsLate(t *testing.T) {
	late := 0
	for seed := uint64(1); seed <= 20; seed++ {
		w := newStoreWorld(t, seed, StoreConfig{AmbiguousLandMax: time.Second,
			Faults: StoreRulesFaults(StoreFault(AmbiguousApplied))})
		_, err := w.put(engine.PutObjectInput{Key: "k", Body: []byte("v")})
		if !errors.Is(err, engine.ErrAmbiguous) {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !w.has("k") {
			late++
		}
		w.sched.Run(100)
		if !w.has("k") {
			t.Fatalf("seed %d: an AmbiguousApplied PUT never landed", seed)
		}
	}
	if late == 0 {
		t.Fatal("no ambiguous PUT landed after its error was delivered")
	}
}

// Two create-only PUTs race (both in flight): exactly one wins, the other
// gets ErrPreconditionFailed, the store holds the winner's body; over many
// seeds both orders occur. Same for two If-Match PUTs with one ETag.
// Catches conditions checked at issue instead of atomically at completion.
func TestStoreConditionalPutRace(t *testing.T) {
	winners := map[string]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		w := newStoreWorld(t, seed, StoreConfig{})
		other := w.store.Client(w.sched.NewIncarnation())
		etag0, _ := w.put(engine.PutObjectInput{Key: "cas", Body: []byte("v0")})
		var errs [2]error
		var ok [2]bool
		for i, c := range []engine.ObjectStore{w.c, other} {
			body := []byte{'A' + byte(i)}
			c.PutObject(engine.PutObjectInput{Key: "fence", Body: body, IfNoneMatch: true}, func(_ string, e error) { errs[i] = e })
			c.PutObject(engine.PutObjectInput{Key: "cas", Body: body, IfMatch: etag0}, func(_ string, e error) { ok[i] = e == nil })
		}
		w.sched.Run(1000)
		if (errs[0] == nil) == (errs[1] == nil) {
			t.Fatalf("seed %d: If-None-Match race: %v / %v, want exactly one winner", seed, errs[0], errs[1])
		}
		win := 0
		if errs[1] == nil {
			win = 1
		}
		if !errors.Is(errs[1-win], engine.ErrPreconditionFailed) {
			t.Fatalf("seed %d: loser got %v", seed, errs[1-win])
		}
		if body, _ := w.store.Object("fence"); string(body) != string(rune('A'+win)) {
			t.Fatalf("seed %d: store holds %q, winner was %c", seed, body, 'A'+win)
		}
		if ok[0] == ok[1] {
			t.Fatalf("seed %d: If-Match race: both or neither won", seed)
		}
		winners[string(rune('A'+win))]++
	}
	if len(winners) != 2 {
		t.Fatalf("the race never went both ways: %v", winners)
	}
}

// Multipart ETags look like S3's ("…-N") and differ from single-PUT ETags;
// equal bodies get equal single-PUT ETags (content hash).
func TestStoreETags(t *testing.T) {
	w := newStoreWorld(t, 7, StoreConfig{})
	id, etag := w.startUpload("mp")
	var err error
	w.await(func(finish func()) {
		w.c.CompleteMultipartUpload("mp", id, []engine.CompletedPart{{Number: 1, ETag: etag}}, func(e error) { err = e; finish() })
	})
	info, _ := w.store.Info("mp")
	if err != nil || !strings.HasSuffix(info.ETag, `-1"`) || !strings.HasPrefix(info.ETag, `"`) {
		t.Fatalf("multipart etag %q, %v", info.ETag, err)
	}
	a, _ := w.put(engine.PutObjectInput{Key: "a", Body: []byte("same")})
	b, _ := w.put(engine.PutObjectInput{Key: "b", Body: []byte("same")})
	c, _ := w.put(engine.PutObjectInput{Key: "c", Body: []byte("diff")})
	if a != b || a == c || len(a) != 34 {
		t.Fatalf("etags %s %s %s", a, b, c)
	}
}

// The store panics when the engine modifies a PUT body while the request
// is in flight: the borrow rule of engine/ports.go.
func TestStoreBorrowedBodyModified(t *testing.T) {
	w := newStoreWorld(t, 8, StoreConfig{})
	body := []byte("original")
	w.c.PutObject(engine.PutObjectInput{Key: "k", Body: body}, func(string, error) {})
	body[0] = 'X'
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "borrowed") {
			t.Fatalf("no borrow panic: %v", r)
		}
	}()
	w.sched.Run(100)
}

// Deleted keys are eventually forgotten, so a long run does not grow the
// listing index without bound.
func TestStorePurgesLingeringKeys(t *testing.T) {
	w := newStoreWorld(t, 9, StoreConfig{ListLingerMin: time.Millisecond, ListLingerMax: time.Millisecond})
	for i := range 500 {
		k := fmt.Sprintf("k%04d", i)
		w.put(engine.PutObjectInput{Key: k, Body: []byte("x")})
		w.del(k)
	}
	if n := len(w.store.keys); n > 2*purgeMin {
		t.Fatalf("%d keys kept for 500 deleted ones", n)
	}
	if len(w.store.keys) != len(w.store.entries) {
		t.Fatal("keys and entries disagree")
	}
}
