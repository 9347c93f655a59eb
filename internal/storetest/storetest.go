package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/skipprd/skipprd/engine"
)

// Harness adapts a store under test.
type Harness struct {
	Store engine.ObjectStore
	// Await calls start, which issues exactly one request whose callback
	// calls finish, and returns once finish has run. A production harness
	// posts start to its loop and waits; a simulated one steps its world.
	Await func(start func(finish func()))
	// Listing must show writes and deletes immediately (LIST lag off): the
	// suite checks listing contents exactly.
}

// Run runs every contract check; newHarness returns a fresh, empty store.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	for _, c := range []struct {
		name string
		fn   func(*testing.T, *client)
	}{
		{"PutGetHead", testPutGetHead},
		{"Missing", testMissing},
		{"RangeAndLimit", testRangeAndLimit},
		{"IfNoneMatch", testIfNoneMatch},
		{"IfMatch", testIfMatch},
		{"Delete", testDelete},
		{"ListPrefixOrderPages", testList},
		{"Multipart", testMultipart},
		{"MultipartErrors", testMultipartErrors},
		{"ListMultipartUploads", testListUploads},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t)
			c.fn(t, &client{t: t, h: h})
		})
	}
}

// client issues one request at a time through the harness and checks the
// loop contract: a callback never runs inside the call that asked for it.
type client struct {
	t *testing.T
	h Harness
}

func (c *client) await(issue func(finish func())) {
	c.t.Helper()
	c.h.Await(func(finish func()) {
		inCall := true
		issue(func() {
			if inCall {
				c.t.Errorf("callback ran synchronously inside the request")
			}
			finish()
		})
		inCall = false
	})
}

func (c *client) put(in engine.PutObjectInput) (etag string, err error) {
	c.await(func(finish func()) {
		c.h.Store.PutObject(in, func(e string, er error) { etag, err = e, er; finish() })
	})
	return etag, err
}

func (c *client) mustPut(key string, body []byte) string {
	c.t.Helper()
	etag, err := c.put(engine.PutObjectInput{Key: key, Body: body})
	if err != nil {
		c.t.Fatalf("put %s: %v", key, err)
	}
	return etag
}

func (c *client) get(key string, rng *engine.ByteRange, limit int64) (body []byte, info engine.ObjectInfo, err error) {
	c.await(func(finish func()) {
		c.h.Store.GetObject(engine.GetObjectInput{Key: key, Range: rng, Limit: limit},
			func(b []byte, i engine.ObjectInfo, e error) { body, info, err = b, i, e; finish() })
	})
	return body, info, err
}

func (c *client) head(key string) (info engine.ObjectInfo, err error) {
	c.await(func(finish func()) {
		c.h.Store.HeadObject(key, func(i engine.ObjectInfo, e error) { info, err = i, e; finish() })
	})
	return info, err
}

func (c *client) del(key string) (err error) {
	c.await(func(finish func()) { c.h.Store.DeleteObject(key, func(e error) { err = e; finish() }) })
	return err
}

// listAll follows pages to the end and returns the keys and page count.
func (c *client) listAll(prefix string) (keys []string, pages int) {
	c.t.Helper()
	token := ""
	for {
		var page engine.ListPage
		var err error
		c.await(func(finish func()) {
			c.h.Store.ListObjects(prefix, token, func(p engine.ListPage, e error) { page, err = p, e; finish() })
		})
		if err != nil {
			c.t.Fatalf("list %q: %v", prefix, err)
		}
		pages++
		for _, o := range page.Objects {
			keys = append(keys, o.Key)
		}
		if page.NextToken == "" {
			return keys, pages
		}
		if pages > 1000 {
			c.t.Fatal("list never ends")
		}
		token = page.NextToken
	}
}

func (c *client) create(key string) string {
	c.t.Helper()
	var id string
	var err error
	c.await(func(finish func()) {
		c.h.Store.CreateMultipartUpload(key, func(u string, e error) { id, err = u, e; finish() })
	})
	if err != nil || id == "" {
		c.t.Fatalf("create upload %s: %q %v", key, id, err)
	}
	return id
}

func (c *client) part(key, id string, n int32, body []byte) string {
	c.t.Helper()
	var etag string
	var err error
	c.await(func(finish func()) {
		c.h.Store.UploadPart(key, id, n, body, func(e string, er error) { etag, err = e, er; finish() })
	})
	if err != nil {
		c.t.Fatalf("upload part %d of %s: %v", n, key, err)
	}
	return etag
}

func (c *client) complete(key, id string, parts []engine.CompletedPart) (err error) {
	c.await(func(finish func()) {
		c.h.Store.CompleteMultipartUpload(key, id, parts, func(e error) { err = e; finish() })
	})
	return err
}

func (c *client) abort(key, id string) (err error) {
	c.await(func(finish func()) {
		c.h.Store.AbortMultipartUpload(key, id, func(e error) { err = e; finish() })
	})
	return err
}

func (c *client) uploads(prefix string) []engine.Upload {
	c.t.Helper()
	var all []engine.Upload
	km, um := "", ""
	for range 1000 {
		var page engine.UploadsPage
		var err error
		c.await(func(finish func()) {
			c.h.Store.ListMultipartUploads(prefix, km, um, func(p engine.UploadsPage, e error) { page, err = p, e; finish() })
		})
		if err != nil {
			c.t.Fatalf("list uploads: %v", err)
		}
		all = append(all, page.Uploads...)
		if !page.Truncated {
			return all
		}
		km, um = page.NextKeyMarker, page.NextUploadIDMarker
	}
	c.t.Fatal("upload listing never ends")
	return nil
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got %v, want %v", what, err, want)
	}
}

func testPutGetHead(t *testing.T, c *client) {
	body := []byte("hello, segment")
	etag := c.mustPut("a/b.seg", body)
	if etag == "" {
		t.Fatal("put returned no ETag")
	}
	got, info, err := c.get("a/b.seg", nil, 1<<20)
	if err != nil || !bytes.Equal(got, body) {
		t.Fatalf("get: %q %v", got, err)
	}
	if info.Size != int64(len(body)) || info.ETag != etag || info.Key != "a/b.seg" {
		t.Fatalf("get info %+v, want size %d etag %s", info, len(body), etag)
	}
	hi, err := c.head("a/b.seg")
	if err != nil || hi.Size != int64(len(body)) || hi.ETag != etag {
		t.Fatalf("head: %+v %v", hi, err)
	}
	if hi.LastModifiedUnixMs <= 0 {
		t.Fatalf("head: no last-modified time: %+v", hi)
	}
	c.mustPut("a/b.seg", []byte("v2"))
	if got, _, _ := c.get("a/b.seg", nil, 1<<20); string(got) != "v2" {
		t.Fatalf("overwrite not visible to get: %q", got)
	}
}

func testMissing(t *testing.T, c *client) {
	_, _, err := c.get("nope", nil, 10)
	wantErr(t, "get missing", err, engine.ErrNotFound)
	_, err = c.head("nope")
	wantErr(t, "head missing", err, engine.ErrNotFound)
}

func testRangeAndLimit(t *testing.T, c *client) {
	c.mustPut("r", []byte("0123456789"))
	got, _, err := c.get("r", &engine.ByteRange{Start: 3, Length: 4}, 4)
	if err != nil || string(got) != "3456" {
		t.Fatalf("range get: %q %v", got, err)
	}
	_, _, err = c.get("r", nil, 9)
	wantErr(t, "get past limit", err, engine.ErrTooLarge)
	got, _, err = c.get("r", nil, 10)
	if err != nil || len(got) != 10 {
		t.Fatalf("get at exactly the limit: %q %v", got, err)
	}
}

func testIfNoneMatch(t *testing.T, c *client) {
	if _, err := c.put(engine.PutObjectInput{Key: "m", Body: []byte("first"), IfNoneMatch: true}); err != nil {
		t.Fatalf("create-only put on a new key: %v", err)
	}
	_, err := c.put(engine.PutObjectInput{Key: "m", Body: []byte("second"), IfNoneMatch: true})
	wantErr(t, "create-only put on an existing key", err, engine.ErrPreconditionFailed)
	if got, _, _ := c.get("m", nil, 100); string(got) != "first" {
		t.Fatalf("failed conditional put changed the object: %q", got)
	}
}

func testIfMatch(t *testing.T, c *client) {
	_, err := c.put(engine.PutObjectInput{Key: "e", Body: []byte("x"), IfMatch: `"0123"`})
	wantErr(t, "if-match on a missing key", err, engine.ErrPreconditionFailed)
	etag := c.mustPut("e", []byte("v1"))
	etag2, err := c.put(engine.PutObjectInput{Key: "e", Body: []byte("v2"), IfMatch: etag})
	if err != nil {
		t.Fatalf("if-match with the current ETag: %v", err)
	}
	_, err = c.put(engine.PutObjectInput{Key: "e", Body: []byte("v3"), IfMatch: etag})
	wantErr(t, "if-match with a stale ETag", err, engine.ErrPreconditionFailed)
	if got, info, _ := c.get("e", nil, 100); string(got) != "v2" || info.ETag != etag2 {
		t.Fatalf("after CAS: %q %s, want v2 %s", got, info.ETag, etag2)
	}
}

func testDelete(t *testing.T, c *client) {
	c.mustPut("d", []byte("x"))
	if err := c.del("d"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err := c.head("d")
	wantErr(t, "head after delete", err, engine.ErrNotFound)
	if err := c.del("d"); err != nil {
		t.Fatalf("deleting a missing key must succeed: %v", err)
	}
}

func testList(t *testing.T, c *client) {
	var want []string
	for i := range 7 {
		k := fmt.Sprintf("p/x/%02d.seg", 6-i)
		c.mustPut(k, []byte{byte(i)})
		want = append(want, k)
	}
	c.mustPut("p/y", []byte("other"))
	c.mustPut("q/x/00.seg", []byte("outside"))
	slices.Sort(want)
	got, _ := c.listAll("p/x/")
	if !slices.Equal(got, want) {
		t.Fatalf("list p/x/: got %q, want %q", got, want)
	}
	if all, _ := c.listAll(""); len(all) != 9 {
		t.Fatalf("list everything: %d keys, want 9", len(all))
	}
	_ = c.del("p/x/03.seg")
	got, _ = c.listAll("p/x/")
	if slices.Contains(got, "p/x/03.seg") || len(got) != 6 {
		t.Fatalf("after delete: %q", got)
	}
}

func testMultipart(t *testing.T, c *client) {
	id := c.create("mp/obj.seg")
	p2 := c.part("mp/obj.seg", id, 2, []byte("-second"))
	c.part("mp/obj.seg", id, 1, []byte("stale"))
	p1 := c.part("mp/obj.seg", id, 1, []byte("first")) // replaces the stale part 1
	if _, err := c.head("mp/obj.seg"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("object visible before complete: %v", err)
	}
	err := c.complete("mp/obj.seg", id, []engine.CompletedPart{{Number: 1, ETag: p1}, {Number: 2, ETag: p2}})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	got, _, err := c.get("mp/obj.seg", nil, 100)
	if err != nil || string(got) != "first-second" {
		t.Fatalf("completed object: %q %v", got, err)
	}
	if ups := c.uploads("mp/"); len(ups) != 0 {
		t.Fatalf("completed upload still listed: %+v", ups)
	}
}

func testMultipartErrors(t *testing.T, c *client) {
	err := c.complete("mp/none", "no-such-upload-id", []engine.CompletedPart{{Number: 1, ETag: `"x"`}})
	wantErr(t, "complete an unknown upload", err, engine.ErrNoSuchUpload)
	id := c.create("mp/aborted")
	etag := c.part("mp/aborted", id, 1, []byte("x"))
	if err := c.abort("mp/aborted", id); err != nil {
		t.Fatalf("abort: %v", err)
	}
	err = c.complete("mp/aborted", id, []engine.CompletedPart{{Number: 1, ETag: etag}})
	wantErr(t, "complete an aborted upload", err, engine.ErrNoSuchUpload)
	if _, err := c.head("mp/aborted"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("aborted upload produced an object: %v", err)
	}
}

func testListUploads(t *testing.T, c *client) {
	var ids []string
	for _, k := range []string{"u/b", "u/a", "u/c", "v/z"} {
		ids = append(ids, c.create(k))
	}
	ups := c.uploads("u/")
	var keys []string
	for _, u := range ups {
		keys = append(keys, u.Key)
		if u.UploadID == "" || u.InitiatedUnixMs <= 0 {
			t.Fatalf("upload without id or initiation time: %+v", u)
		}
	}
	if !slices.Equal(keys, []string{"u/a", "u/b", "u/c"}) {
		t.Fatalf("uploads under u/: %q", keys)
	}
	if err := c.abort("u/a", ids[1]); err != nil {
		t.Fatalf("abort: %v", err)
	}
	if ups := c.uploads("u/"); len(ups) != 2 {
		t.Fatalf("aborted upload still listed: %+v", ups)
	}
}
