package diskstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/storetest"
	"github.com/skipprd/skipprd/sim"
)

// tb is what the worlds need of *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

// world is a simulated disk with a store over one live incarnation.
type world struct {
	t     tb
	sched *sim.Scheduler
	disk  *sim.Disk
	c     engine.Disk
	st    *Store
}

func newWorld(t tb, seed uint64) *world {
	root := sim.NewRand(seed)
	s := sim.NewScheduler(root.Split("sched"), sim.NewTrace(), sim.SchedulerConfig{})
	d := sim.NewDisk(s, root.Split("disk"), sim.DiskConfig{})
	c := d.Client(s.NewIncarnation())
	return &world{t: t, sched: s, disk: d, c: c, st: New(c, s.Clock(), root.Split("store"), "seg")}
}

// await issues one request and steps the world until its callback ran,
// failing if the callback ran inside the call.
func (w *world) await(issue func(finish func())) {
	w.t.Helper()
	finished, inCall := false, true
	issue(func() {
		if inCall {
			w.t.Fatal("callback ran inside the call")
		}
		finished = true
	})
	inCall = false
	for !finished {
		if !w.sched.Step() {
			w.t.Fatal("world went idle before the callback ran")
		}
	}
}

func (w *world) put(key string, body []byte) error {
	var err error
	w.await(func(finish func()) {
		w.st.PutObject(engine.PutObjectInput{Key: key, Body: body}, func(_ string, e error) { err = e; finish() })
	})
	return err
}

func (w *world) mustPut(key string, body []byte) {
	w.t.Helper()
	if err := w.put(key, body); err != nil {
		w.t.Fatalf("put %q: %v", key, err)
	}
}

func (w *world) get(key string, rng *engine.ByteRange, limit int64) ([]byte, engine.ObjectInfo, error) {
	var body []byte
	var info engine.ObjectInfo
	var err error
	w.await(func(finish func()) {
		w.st.GetObject(engine.GetObjectInput{Key: key, Range: rng, Limit: limit},
			func(b []byte, i engine.ObjectInfo, e error) { body, info, err = b, i, e; finish() })
	})
	return body, info, err
}

func (w *world) listPage(prefix, token string) (engine.ListPage, error) {
	var page engine.ListPage
	var err error
	w.await(func(finish func()) {
		w.st.ListObjects(prefix, token, func(p engine.ListPage, e error) { page, err = p, e; finish() })
	})
	return page, err
}

// listAll follows the pages and checks each holds at most pageSize keys,
// all strictly after the token.
func (w *world) listAll(prefix string) []string {
	w.t.Helper()
	var keys []string
	token := ""
	for range 10000 {
		page, err := w.listPage(prefix, token)
		if err != nil {
			w.t.Fatalf("list %q after %q: %v", prefix, token, err)
		}
		if len(page.Objects) > w.st.pageSize {
			w.t.Fatalf("page of %d objects, page size %d", len(page.Objects), w.st.pageSize)
		}
		for _, o := range page.Objects {
			if o.Key <= token {
				w.t.Fatalf("key %q at or before the token %q", o.Key, token)
			}
			keys = append(keys, o.Key)
		}
		if token = page.NextToken; token == "" {
			return keys
		}
	}
	w.t.Fatal("listing never ends")
	return nil
}

// The suite again, with pages of 3, so that its listings span pages.
func TestConformanceSmallPages(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Harness {
		w := newWorld(t, 1)
		w.st.pageSize = 3
		return storetest.Harness{Store: w.st, Await: w.await}
	})
}

// Keys in byte order of the whole key, across files and directories: a
// directory walk alone would put "a/y" before "a-x" ('-' < '/' but the
// file "a-x.o" sorts after the directory "a.d"), and "a" is both an object
// and a prefix. Catches: no re-sorting, the suffixes leaking into the
// order, a key that is also a prefix lost.
func TestListOrderAcrossDirectories(t *testing.T) {
	keys := []string{"a/y", "a-x", "a", "a/b/c", "a.b", "a0", "b", "a/b", "a/b-", "a/b/c/d", "ab"}
	for _, page := range []int{1, 2, 3, 1000} {
		w := newWorld(t, 2)
		w.st.pageSize = page
		for _, k := range keys {
			w.mustPut(k, []byte(k))
		}
		want := slices.Sorted(slices.Values(keys))
		if got := w.listAll(""); !slices.Equal(got, want) {
			t.Fatalf("page %d: got %q, want %q", page, got, want)
		}
		for _, prefix := range []string{"a", "a/", "a/b", "a/b/", "a-", "a.", "b", "c", "a//", "/a"} {
			var want []string
			for _, k := range slices.Sorted(slices.Values(keys)) {
				if strings.HasPrefix(k, prefix) {
					want = append(want, k)
				}
			}
			if got := w.listAll(prefix); !slices.Equal(got, want) {
				t.Fatalf("page %d prefix %q: got %q, want %q", page, prefix, got, want)
			}
		}
		for _, k := range keys {
			if got, _, err := w.get(k, nil, 100); err != nil || string(got) != k {
				t.Fatalf("get %q: %q %v", k, got, err)
			}
		}
	}
}

// Listing against a model: random keys over a tiny alphabet that makes
// prefixes, "/"-vs-other-byte order and keys-that-are-prefixes common;
// random deletes; random prefixes, tokens and page sizes. The pages must
// be exactly the model's sorted keys under the prefix after the token.
func TestListMatchesModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		w := newWorld(rt, rapid.Uint64().Draw(rt, "seed"))
		w.st.pageSize = rapid.IntRange(1, 5).Draw(rt, "page")
		elem := rapid.StringOfN(rapid.SampledFrom([]rune("a-.0")), 1, 3, -1).Filter(func(s string) bool { return s != "." && s != ".." })
		key := rapid.Custom(func(t *rapid.T) string {
			return strings.Join(rapid.SliceOfN(elem, 1, 3).Draw(t, "elems"), "/")
		})
		model := map[string]bool{}
		for range rapid.IntRange(0, 25).Draw(rt, "keys") {
			k := key.Draw(rt, "key")
			if model[k] && rapid.Bool().Draw(rt, "delete") {
				var err error
				w.await(func(finish func()) { w.st.DeleteObject(k, func(e error) { err = e; finish() }) })
				if err != nil {
					rt.Fatal(err)
				}
				delete(model, k)
				continue
			}
			w.mustPut(k, []byte(k))
			model[k] = true
		}
		var sorted []string
		//engine:orderless
		for k := range model {
			sorted = append(sorted, k)
		}
		slices.Sort(sorted)
		prefix := rapid.SampledFrom([]string{"", "a", "a/", "a-", "a.", "-", "0/a", "a/a"}).Draw(rt, "prefix")
		token := rapid.SampledFrom(append([]string{"", "a/", "a-", "zz"}, sorted...)).Draw(rt, "token")
		var want []string
		for _, k := range sorted {
			if strings.HasPrefix(k, prefix) && k > token {
				want = append(want, k)
			}
		}
		var got []string
		tok := token
		for range 1000 {
			page, err := w.listPage(prefix, tok)
			if err != nil {
				rt.Fatal(err)
			}
			for _, o := range page.Objects {
				got = append(got, o.Key)
				if o.Size != int64(len(o.Key)) || o.ETag == "" {
					rt.Fatalf("listed %+v", o)
				}
			}
			if tok = page.NextToken; tok == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			rt.Fatalf("prefix %q token %q: got %q, want %q", prefix, token, got, want)
		}
	})
}

// Invalid keys fail every request with ErrInvalidKey, later (await checks
// the callback does not run inside the call), and touch nothing.
func TestInvalidKeys(t *testing.T) {
	long := strings.Repeat("x", ElemMax+1)
	for _, key := range []string{"", "/a", "a/", "a//b", "./a", "a/..", "a\x00b", "\xff", long,
		strings.Repeat("ab/", KeyMax/3) + "cd"} {
		w := newWorld(t, 3)
		errs := map[string]error{}
		w.await(func(finish func()) {
			w.st.PutObject(engine.PutObjectInput{Key: key, Body: []byte("x")}, func(_ string, e error) { errs["put"] = e; finish() })
		})
		_, _, errs["get"] = w.get(key, nil, 10)
		w.await(func(finish func()) {
			w.st.HeadObject(key, func(_ engine.ObjectInfo, e error) { errs["head"] = e; finish() })
		})
		w.await(func(finish func()) { w.st.DeleteObject(key, func(e error) { errs["delete"] = e; finish() }) })
		w.await(func(finish func()) {
			w.st.CreateMultipartUpload(key, func(_ string, e error) { errs["create"] = e; finish() })
		})
		//engine:orderless
		for op, err := range errs {
			if !errors.Is(err, ErrInvalidKey) || errors.Is(err, engine.ErrAmbiguous) {
				t.Errorf("%s %q: %v, want ErrInvalidKey", op, key, err)
			}
		}
		if p := w.disk.Paths(); len(p) != 0 {
			t.Fatalf("key %q: files made: %q", key, p)
		}
	}
	// The longest valid key works.
	w := newWorld(t, 3)
	k := strings.Repeat("a/", KeyMax/2-1) + "bc"
	if len(k) != KeyMax {
		t.Fatalf("test key of %d bytes", len(k))
	}
	w.mustPut(k, []byte("deep"))
	if got, _, err := w.get(k, nil, 10); err != nil || string(got) != "deep" {
		t.Fatalf("get the longest key: %q %v", got, err)
	}
}

// Ranges: clipped at the end, refused when empty, negative or past the
// end, read from the header's first read or with a second read; Limit
// applies to the range. Catches off-by-one offsets into the body.
func TestRanges(t *testing.T) {
	w := newWorld(t, 4)
	body := make([]byte, 5000)
	for i := range body {
		body[i] = byte(i * 7)
	}
	w.mustPut("r", body)
	for _, c := range []struct{ start, length, limit int64 }{
		{0, 1, 1}, {0, 5000, 5000}, {1000, 10, 10}, {4990, 100, 10}, {4999, 1, 1}, {3, 2000, 2000},
	} {
		got, info, err := w.get("r", &engine.ByteRange{Start: c.start, Length: c.length}, c.limit)
		end := min(c.start+c.length, 5000)
		if err != nil || !bytes.Equal(got, body[c.start:end]) || info.Size != 5000 {
			t.Fatalf("range %+v: %d bytes, %+v, %v", c, len(got), info, err)
		}
	}
	// Around the end of the header's first read, which serves ranges that
	// lie within it without a second read.
	inFirst := headerMax - header{key: "r"}.size()
	for _, r := range []engine.ByteRange{{Start: 0, Length: inFirst}, {Start: 0, Length: inFirst + 1},
		{Start: inFirst - 1, Length: 2}, {Start: inFirst, Length: 1}, {Start: inFirst - 1, Length: 1}} {
		got, _, err := w.get("r", &r, 5000)
		if err != nil || !bytes.Equal(got, body[r.Start:r.Start+r.Length]) {
			t.Fatalf("range %+v at the first read's end: %v", r, err)
		}
	}
	for _, r := range []engine.ByteRange{{Start: 5000, Length: 1}, {Start: -1, Length: 3}, {Start: 0, Length: 0}} {
		if _, _, err := w.get("r", &r, 100); !errors.Is(err, ErrInvalidRange) {
			t.Fatalf("range %+v: %v, want ErrInvalidRange", r, err)
		}
	}
	if _, _, err := w.get("r", &engine.ByteRange{Start: 10, Length: 11}, 10); !errors.Is(err, engine.ErrTooLarge) {
		t.Fatalf("range over the limit: %v", err)
	}
	if _, _, err := w.get("r", nil, 0); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("limit 0: %v", err)
	}
	w.mustPut("empty", nil)
	if got, info, err := w.get("empty", nil, 1); err != nil || len(got) != 0 || info.Size != 0 {
		t.Fatalf("empty object: %q %+v %v", got, info, err)
	}
}

// Multipart edge cases: a part bigger than the copy chunk, an empty part,
// a wrong ETag, a missing part, numbers out of order, the wrong key for an
// upload, part numbers out of range, and a retried Complete after success.
func TestMultipartEdges(t *testing.T) {
	w := newWorld(t, 5)
	create := func(key string) string {
		var id string
		var err error
		w.await(func(finish func()) {
			w.st.CreateMultipartUpload(key, func(u string, e error) { id, err = u, e; finish() })
		})
		if err != nil || !validID(id) {
			t.Fatalf("create: %q %v", id, err)
		}
		return id
	}
	part := func(key, id string, n int32, body []byte) (string, error) {
		var etag string
		var err error
		w.await(func(finish func()) {
			w.st.UploadPart(key, id, n, body, func(e string, er error) { etag, err = e, er; finish() })
		})
		return etag, err
	}
	complete := func(key, id string, parts []engine.CompletedPart) error {
		var err error
		w.await(func(finish func()) { w.st.CompleteMultipartUpload(key, id, parts, func(e error) { err = e; finish() }) })
		return err
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), copyChunk/16+100)
	id := create("mp")
	e1, err1 := part("mp", id, 1, big)
	e2, err2 := part("mp", id, 2, nil)
	e3, err3 := part("mp", id, 3, []byte("tail"))
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what  string
		parts []engine.CompletedPart
	}{
		{"none", nil},
		{"wrong etag", []engine.CompletedPart{{Number: 1, ETag: e3}}},
		{"missing", []engine.CompletedPart{{Number: 1, ETag: e1}, {Number: 4, ETag: e3}}},
		{"out of order", []engine.CompletedPart{{Number: 3, ETag: e3}, {Number: 1, ETag: e1}}},
		{"repeated", []engine.CompletedPart{{Number: 1, ETag: e1}, {Number: 1, ETag: e1}}},
	} {
		if err := complete("mp", id, c.parts); !errors.Is(err, ErrInvalidPart) || errors.Is(err, engine.ErrAmbiguous) {
			t.Fatalf("complete with %s: %v, want ErrInvalidPart", c.what, err)
		}
	}
	if _, err := part("mp", id, 0, []byte("x")); !errors.Is(err, ErrInvalidPart) {
		t.Fatalf("part 0: %v", err)
	}
	if _, err := part("other", id, 1, []byte("x")); !errors.Is(err, engine.ErrNoSuchUpload) {
		t.Fatalf("part for another key: %v", err)
	}
	if err := complete("other", id, []engine.CompletedPart{{Number: 1, ETag: e1}}); !errors.Is(err, engine.ErrNoSuchUpload) {
		t.Fatalf("complete for another key: %v", err)
	}
	if _, err := part("mp", "../../objects", 1, []byte("x")); !errors.Is(err, engine.ErrNoSuchUpload) {
		t.Fatalf("a path as upload id: %v", err)
	}
	parts := []engine.CompletedPart{{Number: 1, ETag: e1}, {Number: 2, ETag: e2}, {Number: 3, ETag: e3}}
	if err := complete("mp", id, parts); err != nil {
		t.Fatal(err)
	}
	want := append(slices.Clone(big), "tail"...)
	got, info, err := w.get("mp", nil, 1<<30)
	if err != nil || !bytes.Equal(got, want) || info.ETag != etagOf(digestOf(want)) {
		t.Fatalf("completed object: %d bytes, %+v, %v", len(got), info, err)
	}
	if err := complete("mp", id, parts); !errors.Is(err, engine.ErrNoSuchUpload) {
		t.Fatalf("complete again: %v", err)
	}
	for _, p := range w.disk.Paths() {
		if strings.HasPrefix(p, "seg/uploads/") {
			t.Fatalf("upload files left after complete: %q", w.disk.Paths())
		}
	}
}

// Upload listings: key then id order across pages of 2, the marker pair
// continuing exactly after the last upload, a key marker alone skipping
// every upload of its key, the prefix filter.
func TestListUploadsMarkers(t *testing.T) {
	w := newWorld(t, 6)
	w.st.pageSize = 2
	type up struct{ key, id string }
	var all []up
	for _, k := range []string{"u/b", "u/a", "u/b", "u/c", "u/a", "v/a"} {
		var id string
		w.await(func(finish func()) { w.st.CreateMultipartUpload(k, func(u string, _ error) { id = u; finish() }) })
		all = append(all, up{k, id})
	}
	slices.SortFunc(all, func(a, b up) int { return strings.Compare(a.key+" "+a.id, b.key+" "+b.id) })
	list := func(prefix, km, um string) engine.UploadsPage {
		var page engine.UploadsPage
		var err error
		w.await(func(finish func()) {
			w.st.ListMultipartUploads(prefix, km, um, func(p engine.UploadsPage, e error) { page, err = p, e; finish() })
		})
		if err != nil {
			t.Fatal(err)
		}
		return page
	}
	var got []up
	km, um := "", ""
	for pages := 1; ; pages++ {
		page := list("u/", km, um)
		if len(page.Uploads) > 2 || pages > 10 {
			t.Fatalf("page %d: %+v", pages, page)
		}
		for _, u := range page.Uploads {
			got = append(got, up{u.Key, u.UploadID})
		}
		if !page.Truncated {
			break
		}
		km, um = page.NextKeyMarker, page.NextUploadIDMarker
	}
	if !slices.Equal(got, all[:5]) {
		t.Fatalf("uploads %v, want %v", got, all[:5])
	}
	if page := list("u/", "u/a", ""); len(page.Uploads) != 2 || page.Uploads[0].Key != "u/b" {
		t.Fatalf("after key marker u/a: %+v", page)
	}
	if page := list("u/", "u/a", all[0].id); len(page.Uploads) != 2 || page.Uploads[0].UploadID != all[1].id {
		t.Fatalf("after the first upload of u/a: %+v", page)
	}
}

// Temp files: an in-flight write's temp is not removed by a listing that
// meets it; a leftover (of a dead process) is, and is never listed.
func TestListingRemovesOnlyLeftoverTemps(t *testing.T) {
	w := newWorld(t, 7)
	w.mustPut("d/k", []byte("v1"))
	leftover := "seg/objects/d.d/.00000000deadbeef.tmp"
	f, err := openFile(w, leftover, engine.OpenMode{Create: true, Write: true})
	if err != nil {
		t.Fatal(err)
	}
	w.await(func(finish func()) { f.Close(func(error) { finish() }) })
	// Start a PUT and step until its temp exists, then list.
	done := false
	w.st.PutObject(engine.PutObjectInput{Key: "d/k", Body: []byte("v2")}, func(_ string, err error) {
		if err != nil {
			t.Errorf("put: %v", err)
		}
		done = true
	})
	for len(w.st.temps) == 0 || !w.disk.Exists(tempOf(w)) {
		if !w.sched.Step() {
			t.Fatal("idle")
		}
	}
	if keys := w.listAll("d/"); !slices.Equal(keys, []string{"d/k"}) {
		t.Fatalf("listed %q", keys)
	}
	w.sched.Run(10000)
	if !done {
		t.Fatal("the put did not finish: its temp file was removed under it?")
	}
	if w.disk.Exists(leftover) {
		t.Fatal("the leftover temp file was not removed")
	}
	if got, _, err := w.get("d/k", nil, 10); err != nil || string(got) != "v2" {
		t.Fatalf("get: %q %v", got, err)
	}
}

func tempOf(w *world) string {
	for _, p := range w.disk.Paths() {
		if _, ok := w.st.temps[p]; ok {
			return p
		}
	}
	return ""
}

func openFile(w *world, path string, mode engine.OpenMode) (engine.File, error) {
	var f engine.File
	var err error
	w.await(func(finish func()) { w.c.Open(path, mode, func(ff engine.File, e error) { f, err = ff, e; finish() }) })
	return f, err
}

// The lock table: FIFO, shared holders together, an exclusive request
// waits for all and blocks shared ones behind it, and the table empties.
func TestLockTable(t *testing.T) {
	var lt lockTable
	var log []string
	hold := func(name string) func() {
		return func() { log = append(log, name) }
	}
	lt.acquire("k", shared, hold("r1"))
	lt.acquire("k", shared, hold("r2"))
	lt.acquire("k", exclusive, hold("w1"))
	lt.acquire("k", shared, hold("r3"))
	lt.acquire("k", shared, hold("r4"))
	lt.acquire("k", exclusive, hold("w2"))
	lt.acquire("other", exclusive, hold("o"))
	if want := []string{"r1", "r2", "o"}; !slices.Equal(log, want) {
		t.Fatalf("granted %q, want %q", log, want)
	}
	lt.release("k")
	if len(log) != 3 {
		t.Fatalf("w1 granted while r2 holds: %q", log)
	}
	lt.release("k")
	lt.release("k") // w1
	if want := []string{"r1", "r2", "o", "w1", "r3", "r4"}; !slices.Equal(log, want) {
		t.Fatalf("granted %q, want %q", log, want)
	}
	lt.release("k")
	lt.release("k")
	lt.release("k") // w2
	lt.release("other")
	if lt.held() != 0 || len(log) != 7 {
		t.Fatalf("held %d, log %q", lt.held(), log)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("releasing a free lock did not panic")
		}
	}()
	lt.release("k")
}

// A lock state in the table always has holders (lockTable's INVARIANT):
// release panics on one without, naming it.
func TestLockStateWithoutHolders(t *testing.T) {
	lt := lockTable{locks: map[string]*lockState{"ok": {queue: []lockWaiter{{mode: shared}}}}}
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "a lock state has holders > 0: ok has 0 holders, 1 waiting") {
			t.Fatalf("recovered %q; want the panic naming the lock", msg)
		}
	}()
	lt.release("ok")
}

// decodeHeader and decodeMeta never panic and never accept bytes that
// are not exactly what an encoder made; lengths are checked before use.
func TestDecodeRejectsDamage(t *testing.T) {
	h := header{key: "a/b", modifiedUnixMs: 1234, bodyLen: 99, digest: digestOf([]byte("x"))}
	good := encodeHeader(h)
	if got, err := decodeHeader(good); err != nil || got != h {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	for i := range good {
		for _, bit := range []byte{1, 0x80} {
			bad := slices.Clone(good)
			bad[i] ^= bit
			if _, err := decodeHeader(bad); err == nil {
				t.Fatalf("flip of bit %#x at %d accepted", bit, i)
			}
		}
	}
	for n := range len(good) {
		if _, err := decodeHeader(good[:n]); err == nil {
			t.Fatalf("header cut to %d bytes accepted", n)
		}
	}
	huge := slices.Clone(good)
	binary.BigEndian.PutUint64(huge[16:], 1<<62)
	binary.BigEndian.PutUint64(huge[len(huge)-8:], 0)
	if _, err := decodeHeader(huge); err == nil {
		t.Fatal("a huge body length accepted")
	}
	m := meta{key: "u/k", initiatedUnixMs: 42}
	gm := encodeMeta(m)
	if got, err := decodeMeta(gm); err != nil || got != m {
		t.Fatalf("meta round trip: %+v %v", got, err)
	}
	for i := range gm {
		bad := slices.Clone(gm)
		bad[i] ^= 4
		if _, err := decodeMeta(bad); err == nil {
			t.Fatalf("meta flip at %d accepted", i)
		}
	}
	if _, err := decodeMeta(append(slices.Clone(gm), 0)); err == nil {
		t.Fatal("meta with a trailing byte accepted")
	}
	rapid.Check(t, func(rt *rapid.T) {
		b := rapid.SliceOfN(rapid.Byte(), 0, 200).Draw(rt, "bytes")
		if rapid.Bool().Draw(rt, "magic") && len(b) >= 4 {
			copy(b, objectMagic)
		}
		_, _ = decodeHeader(b)
		_, _ = decodeMeta(b)
	})
}

// Streaming the body digest (Complete) equals hashing it whole (PUT), so
// an object has the same ETag however it was written.
func TestDigestStreamsLikeWhole(t *testing.T) {
	w := newWorld(t, 8)
	body := bytes.Repeat([]byte("xyz"), 3000)
	var putETag string
	w.await(func(finish func()) {
		w.st.PutObject(engine.PutObjectInput{Key: "p", Body: body}, func(e string, _ error) { putETag = e; finish() })
	})
	var id string
	w.await(func(finish func()) { w.st.CreateMultipartUpload("m", func(u string, _ error) { id = u; finish() }) })
	var parts []engine.CompletedPart
	for i, chunk := range [][]byte{body[:1234], body[1234:5000], body[5000:]} {
		w.await(func(finish func()) {
			w.st.UploadPart("m", id, int32(i+1), chunk, func(e string, _ error) {
				parts = append(parts, engine.CompletedPart{Number: int32(i + 1), ETag: e})
				finish()
			})
		})
	}
	w.await(func(finish func()) { w.st.CompleteMultipartUpload("m", id, parts, func(error) { finish() }) })
	_, info, err := w.get("m", nil, 1<<20)
	if err != nil || info.ETag != putETag {
		t.Fatalf("multipart ETag %s (%v), PUT ETag %s", info.ETag, err, putETag)
	}
	if !strings.HasPrefix(putETag, `"`) || len(putETag) != 34 || strings.ToLower(putETag) != putETag {
		t.Fatalf("ETag %s is not quoted lowercase hex", putETag)
	}
}

// An object file that does not belong where it is found fails as corrupt:
// one longer or shorter than its header says (a HEAD reads no body, so
// only the size tells), and one moved under another key's name.
func TestObjectFileMismatches(t *testing.T) {
	w := newWorld(t, 9)
	w.mustPut("a", []byte("body of a"))
	w.mustPut("b", []byte("body of b"))
	head := func(key string) error {
		var err error
		w.await(func(finish func()) { w.st.HeadObject(key, func(_ engine.ObjectInfo, e error) { err = e; finish() }) })
		return err
	}
	f, err := openFile(w, "seg/objects/a.o", engine.OpenMode{Write: true})
	if err != nil {
		t.Fatal(err)
	}
	w.await(func(finish func()) { f.Append([]byte("!"), func(int64, error) { finish() }) })
	if err := head("a"); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("HEAD of a file with a trailing byte: %v", err)
	}
	w.await(func(finish func()) { f.Truncate(header{key: "a"}.size()+3, func(error) { finish() }) })
	if err := head("a"); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("HEAD of a file cut short: %v", err)
	}
	w.await(func(finish func()) { f.Close(func(error) { finish() }) })

	w.await(func(finish func()) { w.c.Rename("seg/objects/b.o", "seg/objects/c.o", func(error) { finish() }) })
	if _, _, err := w.get("c", nil, 100); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("GET of b's file under c's name: %v", err)
	}
	if _, err := w.listPage("c", ""); !errors.Is(err, engine.ErrCorrupt) {
		t.Fatalf("LIST of b's file under c's name: %v", err)
	}
}

// A listing reads only the directories that can hold keys of its page:
// not those outside the prefix, not those wholly before the token, and
// none after the page is full (it stops early). Counted as ReadDir calls
// on the simulated disk.
func TestListReadsOnlyWhatThePageNeeds(t *testing.T) {
	w := newWorld(t, 10)
	for d := range 10 {
		for f := range 3 {
			w.mustPut(strings.Repeat("x/", d%2)+string(rune('d'))+string(rune('0'+d))+"/"+string(rune('a'+f)), []byte("v"))
		}
	}
	readDirs := func(prefix, token string, page int) uint64 {
		w.st.pageSize = page
		before := w.disk.Counts().Issued[sim.DiskReadDir]
		if _, err := w.listPage(prefix, token); err != nil {
			t.Fatal(err)
		}
		return w.disk.Counts().Issued[sim.DiskReadDir] - before
	}
	for _, c := range []struct {
		prefix, token string
		page          int
		want          uint64
	}{
		{"d2", "", 1000, 2},           // objects/, d2.d/ — not d0, d4, …, not x.d/
		{"d2/", "", 1000, 1},          // d2.d/ only
		{"x/d3", "", 1000, 2},         // x.d/, x.d/d3.d/
		{"", "d4/zz", 1000, 10},       // objects/, d4 (the token's own), d6, d8, x.d/ and its 5 — not d0, d2
		{"", "", 2, 2},                // objects/, d0.d/: the page (and one more) is full
		{"x/", "x/d5/b", 1000, 1 + 3}, // x.d/, d5, d7, d9 — not d1, d3
	} {
		if got := readDirs(c.prefix, c.token, c.page); got != c.want {
			t.Errorf("list %q after %q (page %d): %d ReadDirs, want %d", c.prefix, c.token, c.page, got, c.want)
		}
	}
}

// A directory removed behind the store's back fails the PUT that finds it
// gone (definitely), and the next PUT makes it again.
func TestDirectoryRemovedBehindTheStore(t *testing.T) {
	w := newWorld(t, 11)
	w.mustPut("d/a", []byte("1"))
	for _, p := range []string{"seg/objects/d.d/a.o", "seg/objects/d.d"} {
		w.await(func(finish func()) { w.c.Remove(p, func(error) { finish() }) })
	}
	if err := w.put("d/b", []byte("2")); err == nil || errors.Is(err, engine.ErrAmbiguous) {
		t.Fatalf("put into a vanished directory: %v, want a definite error", err)
	}
	w.mustPut("d/b", []byte("2"))
	if got, _, err := w.get("d/b", nil, 10); err != nil || string(got) != "2" {
		t.Fatalf("get: %q %v", got, err)
	}
}
