package objects

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	httpsrc "github.com/skipprd/skipprd/sources/http"
)

func TestDirNewObjectsBetweenPolls(t *testing.T) { testNewObjectsBetweenPolls(t, dirKit(t)) }
func TestS3NewObjectsBetweenPolls(t *testing.T)  { testNewObjectsBetweenPolls(t, s3Kit(t)) }

// testNewObjectsBetweenPolls: objects that appear between polls are
// ingested by the next; temporary names never are.
func testNewObjectsBetweenPolls(t *testing.T, k kit) {
	k.put(t, "1.jsonl", jsonlRows(0, 5))
	f := newFixture(t, Config{}, k.store)
	passes := 0
	f.src.poll = func(context.Context) error {
		passes++
		switch passes {
		case 1:
			if got := f.host.allIDs(); len(got) != 5 {
				t.Errorf("after the first pass %d ids; want 5", len(got))
			}
			k.put(t, "0-late.jsonl", jsonlRows(100, 5)) // sorts before what was done
			k.put(t, "sub/2.csv", csvRows(200, 5))
			for _, tmp := range []string{".3.jsonl", "4.jsonl.tmp", "5.jsonl.PARTIAL", ".staging/6.jsonl", "sub/.7.jsonl"} {
				k.put(t, tmp, []byte("{\"id\":\"not yet\"}\n"))
			}
			return nil
		case 2:
			return nil // nothing new: nothing ingested again
		}
		return errOnePass
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(0, 5), seq(100, 5), seq(200, 5)))
	if st := f.src.Stats(); st.ObjectsDone != 3 {
		t.Errorf("stats %+v: want 3 objects done", st)
	}
}

func TestIgnored(t *testing.T) {
	for key, want := range map[string]bool{
		"a.jsonl": false, "a/b.csv": false, "a.tmp.csv": false, "x.partially": false,
		".a.jsonl": true, "a/.b.csv": true, ".git/config": true, "a.csv.tmp": true, "a.csv.Partial": true, "": true,
	} {
		if got := ignored(key); got != want {
			t.Errorf("ignored(%q) = %v; want %v", key, got, want)
		}
	}
}

// flakyStore fails its first n reads of each kind, then reads its
// inner store: a network that comes back.
type flakyStore struct {
	Store
	mu           sync.Mutex // tasks read at once
	lists, opens int
}

// fail reports whether a read of the counter n fails.
func (s *flakyStore) fail(n *int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

var errFlaky = errors.New("test: connection reset")

func (s *flakyStore) List(ctx context.Context, after string) (Page, error) {
	if s.fail(&s.lists) {
		return Page{}, errFlaky
	}
	return s.Store.List(ctx, after)
}

func (s *flakyStore) Open(ctx context.Context, key string, off int64) (io.ReadCloser, error) {
	if s.fail(&s.opens) {
		return nil, errFlaky
	}
	return s.Store.Open(ctx, key, off)
}

func (s *flakyStore) ReaderAt(ctx context.Context, key string, size int64) (ReadAtCloser, error) {
	ra, err := s.Store.ReaderAt(ctx, key, size)
	if err != nil || !s.fail(&s.opens) {
		return ra, err
	}
	return failingReaderAt{ra}, nil
}

// failingReaderAt fails every read.
type failingReaderAt struct{ ReadAtCloser }

func (failingReaderAt) ReadAt([]byte, int64) (int, error) { return 0, errFlaky }

// TestStoreErrorsRetried: a listing or read error is logged and the
// object read at the next poll — a Parquet read error too, never taken
// for a corrupt file — with nothing skipped, even with OnError "skip".
func TestStoreErrorsRetried(t *testing.T) {
	k := dirKit(t)
	k.put(t, "a.jsonl", jsonlRows(0, 5))
	k.put(t, "b.parquet", parquetBytes(t, 10, 2, 5))
	store := &flakyStore{Store: k.store, lists: 1, opens: 2}
	f := newFixture(t, Config{OnError: OnErrorSkip}, store)
	passes := 0
	f.src.poll = func(context.Context) error {
		if passes++; passes == 4 {
			return errOnePass
		}
		return nil
	}
	if err := f.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	sameIDs(t, f.host.allIDs(), concat(seq(0, 5), seq(10, 10)))
	log := f.log.String()
	contains(t, log, "listing failed", "reading an object failed", "connection reset")
	if st := f.src.Stats(); st.ObjectsSkipped != 0 || strings.Contains(log, "level=ERROR") {
		t.Errorf("stats %+v, log %s: nothing may be skipped for a store error", st, log)
	}
}

func TestDirStoreKeys(t *testing.T) {
	k := dirKit(t)
	k.put(t, "z.csv", []byte("x"))
	k.put(t, "a/b/c.jsonl", []byte("yy"))
	got := listAll(t, k.store, "")
	if want := []Object{{"a/b/c.jsonl", 2}, {"z.csv", 1}}; !slices.Equal(got, want) {
		t.Errorf("List = %v; want %v", got, want)
	}
	if _, err := k.store.Open(context.Background(), "../outside", 0); err == nil {
		t.Error("Open of a key outside the directory succeeded")
	}
	if _, err := NewDirStore(t.TempDir()+"/missing").List(context.Background(), ""); err == nil {
		t.Error("List of a missing directory succeeded")
	}
}

func TestS3StoreRanges(t *testing.T) {
	k := s3Kit(t)
	k.put(t, "x/y.jsonl", []byte("0123456789"))
	k.put(t, "folder/", nil)
	ctx := context.Background()
	got := listAll(t, k.store, "")
	if want := []Object{{"x/y.jsonl", 10}}; !slices.Equal(got, want) {
		t.Errorf("List = %v; want %v (not the folder marker, not in2/)", got, want)
	}
	rc, err := k.store.Open(ctx, "x/y.jsonl", 4)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if string(b) != "456789" {
		t.Errorf("Open at 4 read %q", b)
	}
	ra, err := k.store.ReaderAt(ctx, "x/y.jsonl", 10)
	if err != nil {
		t.Fatal(err)
	}
	p := make([]byte, 4)
	if n, err := ra.ReadAt(p, 8); n != 2 || err != io.EOF || string(p[:2]) != "89" {
		t.Errorf("ReadAt(4 bytes at 8) = %d %v %q; want 2 EOF \"89\"", n, err, p[:n])
	}
	if n, err := ra.ReadAt(p, 2); n != 4 || err != nil || string(p) != "2345" {
		t.Errorf("ReadAt(4 bytes at 2) = %d %v %q", n, err, p)
	}
}

// listAll lists every page of store after after.
func listAll(t testing.TB, store Store, after string) []Object {
	t.Helper()
	var out []Object
	for {
		page, err := store.List(context.Background(), after)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Objects...)
		if page.Next == "" {
			return out
		}
		after = page.Next
	}
}

// Both stores list in key order, a page at a time, from any key: the
// dir store's walk too, though a folder "a" sorts before a file "a-b"
// while its keys "a/…" sort after it.
func TestStoresListInKeyOrderFromAnyKey(t *testing.T) {
	names := []string{"a-b.jsonl", "a/c.jsonl", "a/d/e.jsonl", "a.jsonl", "a0.jsonl", "b/.hidden", "b/x.csv", "c"}
	for _, kind := range []string{"dir", "s3"} {
		t.Run(kind, func(t *testing.T) {
			var k kit
			if kind == "dir" {
				k = dirKit(t)
				k.store = dirStore{dir: k.store.(dirStore).dir, pageSize: 2}
			} else {
				k = s3Kit(t)
				k.store.(*s3Store).pageSize = 2
			}
			for _, n := range names {
				k.put(t, n, []byte(n))
			}
			want := slices.Sorted(slices.Values(names))
			for i := -1; i < len(want); i++ {
				after := ""
				if i >= 0 {
					after = want[i]
				}
				var keys []string
				for _, o := range listAll(t, k.store, after) {
					keys = append(keys, o.Key)
				}
				if !slices.Equal(keys, want[i+1:]) {
					t.Errorf("after %q: %q, want %q", after, keys, want[i+1:])
				}
			}
		})
	}
}

func TestConfigChecked(t *testing.T) {
	good := Config{Name: "drop", Namespace: "events", SinkRef: "lake"}
	if _, err := New(good, NewDirStore(t.TempDir())); err != nil {
		t.Fatal(err)
	}
	lim := httpsrc.DefaultLimits()
	lim.BodyBytes = 100
	for name, mutate := range map[string]func(*Config){
		"name with slash":   func(c *Config) { c.Name = "a/b" },
		"name with hash":    func(c *Config) { c.Name = "a#b" },
		"long name":         func(c *Config) { c.Name = strings.Repeat("n", NameMax+1) },
		"bad namespace":     func(c *Config) { c.Namespace = "Events" },
		"no sink":           func(c *Config) { c.SinkRef = "" },
		"format":            func(c *Config) { c.Format = "xml" },
		"on error":          func(c *Config) { c.OnError = "ignore" },
		"negative poll":     func(c *Config) { c.Poll = -time.Second },
		"huge chunk":        func(c *Config) { c.ChunkBytes = ChunkBytesMax + 1 },
		"chunk over a body": func(c *Config) { c.ChunkBytes = 1000; c.Limits = lim },
		"order":             func(c *Config) { c.Order = "time" },
		"negative settle":   func(c *Config) { c.Settle = -time.Second },
		"in flight":         func(c *Config) { c.InFlight = InFlightMax + 1 },
	} {
		c := good
		mutate(&c)
		if _, err := New(c, NewDirStore(t.TempDir())); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		}
	}
}
