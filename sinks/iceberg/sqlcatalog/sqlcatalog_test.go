package sqlcatalog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	icego "github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"

	"github.com/skipprd/skipprd/sinks/iceberg"
)

// Create then Load: the field ids as given, the day spec, the
// properties with retries off; a second Create and Loads of missing
// tables fail definitely.
func TestCreateLoad(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		created := create(t, c, "events", map[string]string{"skipprd.owner": "test", table.CommitNumRetriesKey: "4"})
		got := load(t, c, created.Ident)

		for _, tbl := range []*iceberg.Table{created, got} {
			for _, want := range testSchema().Fields() {
				f, ok := tbl.Schema.FindFieldByName(want.Name)
				if !ok || f.ID != want.ID || !f.Type.Equals(want.Type) || f.Required != want.Required {
					t.Errorf("column %s: got %+v, want %+v", want.Name, f, want)
				}
			}
			if tbl.Spec != testSpec || tbl.Current != 0 || len(tbl.Snapshots) != 0 || tbl.Manifests != 0 || tbl.MetadataLog != 0 {
				t.Errorf("new table: %+v", tbl)
			}
			for k, v := range map[string]string{
				"skipprd.owner": "test", table.CommitNumRetriesKey: "0",
				table.MetadataDeleteAfterCommitEnabledKey: "true", table.MetadataPreviousVersionsMaxKey: "10",
				table.ManifestMergeEnabledKey: "true",
			} {
				if tbl.Props[k] != v {
					t.Errorf("property %s = %q, want %q", k, tbl.Props[k], v)
				}
			}
		}
		if got.MetadataLocation != created.MetadataLocation || got.Location != created.Location {
			t.Errorf("loaded %s at %s, created %s at %s", got.MetadataLocation, got.Location, created.MetadataLocation, created.Location)
		}
		if want := c.warehouse + "/lake/events"; got.Location != want {
			t.Errorf("location %s, want %s", got.Location, want)
		}

		_, err := c.Create(ctx, created.Ident, testSchema(), testSpec, nil)
		if !errors.Is(err, iceberg.ErrTableExists) {
			t.Errorf("second create: %v, want ErrTableExists", err)
		}
		for _, id := range []iceberg.Ident{{Namespace: "lake", Name: "nope"}, {Namespace: "nope", Name: "events"}} {
			if _, err := c.Load(ctx, id); !errors.Is(err, iceberg.ErrNoTable) {
				t.Errorf("load %s: %v, want ErrNoTable", id, err)
			}
		}
	})
}

// Two writers creating the same table: one makes it, the other is told
// ErrTableExists; the namespace is made once.
func TestCreateRace(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		// Opened at once on the fresh database: both make its tables.
		cats := make([]*Catalog, 2)
		var wg sync.WaitGroup
		for i := range cats {
			wg.Go(func() {
				var err error
				if cats[i], err = Open(context.Background(), e.cfg); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		for _, c := range cats {
			if c == nil {
				t.FailNow()
			}
			t.Cleanup(func() { _ = c.Close() })
		}
		errs := make([]error, len(cats))
		for i, c := range cats {
			wg.Go(func() {
				_, errs[i] = c.Create(context.Background(), iceberg.Ident{Namespace: "race", Name: "t"}, testSchema(), testSpec, nil)
			})
		}
		wg.Wait()
		made := 0
		for _, err := range errs {
			switch {
			case err == nil:
				made++
			case !errors.Is(err, iceberg.ErrTableExists):
				t.Errorf("create: %v", err)
			}
		}
		if made != 1 {
			t.Errorf("%d creates succeeded (%v), want 1", made, errs)
		}
	})
}

// Open refuses what it cannot use, before touching anything.
func TestOpenRejects(t *testing.T) {
	dir := t.TempDir()
	for _, cfg := range []Config{
		{URI: "mysql://x/y", Warehouse: dir},
		{URI: "sqlite://relative/catalog.db", Warehouse: dir},
		{URI: filepath.Join(dir, "c.db"), Warehouse: "relative/warehouse"},
		{URI: filepath.Join(dir, "c.db"), Warehouse: "s3:///no-bucket"},
		{URI: filepath.Join(dir, "c.db"), Warehouse: "gs://bucket/x"},
	} {
		if c, err := Open(context.Background(), cfg); err == nil {
			c.Close()
			t.Errorf("Open(%+v) succeeded", cfg)
		} else if !strings.HasPrefix(err.Error(), "sqlcatalog: ") {
			t.Errorf("Open(%+v): %v", cfg, err)
		}
	}
}

// Evolve adds optional columns and widens, pinned to the schema it was
// built on.
func TestEvolve(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		before := create(t, c, "evolving", nil)
		err := c.Evolve(ctx, before, iceberg.Change{
			Add:   []iceberg.Column{{Name: "extra", Type: icego.PrimitiveTypes.String}},
			Widen: []iceberg.Column{{Name: "n", Type: icego.PrimitiveTypes.Int64}, {Name: "ratio", Type: icego.PrimitiveTypes.Float64}},
		})
		if err != nil {
			t.Fatal(err)
		}
		after := load(t, c, before.Ident)
		if after.Schema.ID == before.Schema.ID {
			t.Errorf("schema id stayed %d", after.Schema.ID)
		}
		extra, ok := after.Schema.FindFieldByName("extra")
		if !ok || extra.Required || extra.ID <= idName || !extra.Type.Equals(icego.PrimitiveTypes.String) {
			t.Errorf("added column: %+v", extra)
		}
		for name, typ := range map[string]icego.Type{"n": icego.PrimitiveTypes.Int64, "ratio": icego.PrimitiveTypes.Float64, "id": icego.PrimitiveTypes.Int64} {
			if f, _ := after.Schema.FindFieldByName(name); !f.Type.Equals(typ) {
				t.Errorf("column %s is %s, want %s", name, f.Type, typ)
			}
		}

		err = c.Evolve(ctx, before, iceberg.Change{Add: []iceberg.Column{{Name: "late", Type: icego.PrimitiveTypes.Int32}}})
		if !errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("stale evolve: %v, want ErrConflict", err)
		}
		if again := load(t, c, before.Ident); again.MetadataLocation != after.MetadataLocation || again.Schema.ID != after.Schema.ID {
			t.Errorf("a stale evolve changed the table: %s → %s", after.MetadataLocation, again.MetadataLocation)
		}
	})
}

// Append adds a real Parquet file with a summary and properties;
// iceberg-go reads the rows back; an Append built on the old state is a
// conflict and adds nothing.
func TestAppend(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		empty := create(t, c, "appended", nil)
		rows := []row{{1, "one"}, {2, ""}, {3, "three"}}
		f := writeFile(t, e, empty, rows)
		summary := map[string]string{"skipprd.batch": "7", "skipprd.pipeline": "p1"}
		props := map[string]string{"skipprd.committed.p1": "7"}
		if err := c.Append(ctx, empty, iceberg.Append{Files: []iceberg.DataFile{f}, Summary: summary, Props: props}); err != nil {
			t.Fatal(err)
		}
		one := load(t, c, empty.Ident)
		if len(one.Snapshots) != 1 || one.Current != one.Snapshots[0].ID || one.Snapshots[0].Parent != 0 || one.Manifests != 1 {
			t.Fatalf("after one append: %+v", one)
		}
		s := one.Snapshots[0]
		for k, v := range summary {
			if s.Summary[k] != v {
				t.Errorf("summary %s = %q, want %q (%v)", k, s.Summary[k], v, s.Summary)
			}
		}
		if s.Summary["operation"] != "append" || s.Summary["added-records"] != "3" || s.TimestampMs <= 0 {
			t.Errorf("summary %v at %d", s.Summary, s.TimestampMs)
		}
		if one.Props["skipprd.committed.p1"] != "7" {
			t.Errorf("properties %v", one.Props)
		}
		if got := scan(t, c, empty.Ident); !slices.Equal(got, rows) {
			t.Errorf("scanned %v, want %v", got, rows)
		}

		g := writeFile(t, e, empty, []row{{4, "four"}})
		err := c.Append(ctx, empty, iceberg.Append{Files: []iceberg.DataFile{g}, Props: map[string]string{"skipprd.committed.p1": "8"}})
		if !errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("append on the old state: %v, want ErrConflict", err)
		}
		if again := load(t, c, empty.Ident); again.MetadataLocation != one.MetadataLocation || again.Props["skipprd.committed.p1"] != "7" {
			t.Errorf("a conflicting append changed the table: %+v", again)
		}
		if got := scan(t, c, empty.Ident); !slices.Equal(got, rows) {
			t.Errorf("after the conflict scanned %v, want %v", got, rows)
		}

		if err := c.Append(ctx, one, iceberg.Append{Files: []iceberg.DataFile{g}}); err != nil {
			t.Fatal(err)
		}
		two := load(t, c, empty.Ident)
		if len(two.Snapshots) != 2 || two.Snapshots[1].Parent != one.Current || two.Current != two.Snapshots[1].ID {
			t.Errorf("after the second append: %+v", two.Snapshots)
		}
		if got := scan(t, c, empty.Ident); !slices.Equal(got, append(rows, row{4, "four"})) {
			t.Errorf("scanned %v", got)
		}
	})
}

// An Append with no files still commits a snapshot with its summary.
func TestAppendEmpty(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		c := open(t, e)
		tbl := create(t, c, "quiet", nil)
		err := c.Append(context.Background(), tbl, iceberg.Append{Summary: map[string]string{"skipprd.batch": "1"}, Props: map[string]string{"k": "v"}})
		if err != nil {
			t.Fatal(err)
		}
		got := load(t, c, tbl.Ident)
		if len(got.Snapshots) != 1 || got.Snapshots[0].Summary["skipprd.batch"] != "1" || got.Props["k"] != "v" {
			t.Errorf("after an empty append: %+v", got)
		}
	})
}

// Two catalogs on one database, as two processes, append from several
// goroutines: each append lands or is a conflict; after retrying the
// conflicts every file is in the table exactly once.
func TestConcurrentAppends(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		cats := []*Catalog{open(t, e), open(t, e)}
		contend(t, e, cats, create(t, cats[0], "contended", nil), 4, 4)
	})
}

// contend has writers goroutines, on cats in turn, append perWriter
// one-row files each to tbl, retrying conflicts, and checks that every
// file landed once.
func contend(t *testing.T, e env, cats []*Catalog, tbl *iceberg.Table, writers, perWriter int) {
	var (
		files []iceberg.DataFile
		want  []row
	)
	for i := range writers * perWriter {
		r := row{int64(i + 1), fmt.Sprint("row ", i+1)}
		files = append(files, writeFile(t, e, tbl, []row{r}))
		want = append(want, r)
	}
	var wg sync.WaitGroup
	conflicts := make([]int, writers)
	for w := range writers {
		c := cats[w%len(cats)]
		wg.Go(func() {
			for _, f := range files[w*perWriter : (w+1)*perWriter] {
				conflicts[w] += appendRetrying(t, c, tbl.Ident, f)
			}
		})
	}
	wg.Wait()
	t.Logf("conflicts per writer: %v", conflicts)

	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	slices.Sort(paths)
	if got := dataFiles(t, cats[len(cats)-1], tbl.Ident); !slices.Equal(got, paths) {
		t.Errorf("data files:\n%v\nwant each once:\n%v", got, paths)
	}
	if got := scan(t, cats[0], tbl.Ident); !slices.Equal(got, want) {
		t.Errorf("scanned %v, want %v", got, want)
	}
	before := len(tbl.Snapshots)
	if got := load(t, cats[len(cats)-1], tbl.Ident); len(got.Snapshots)-before != writers*perWriter {
		t.Errorf("%d new snapshots, want %d", len(got.Snapshots)-before, writers*perWriter)
	}
}

// Over many appends with Expire after each, the snapshots are what
// Retention keeps, the metadata log and the manifest count stay bounded,
// expired manifest lists are deleted and no data file is.
func TestExpireKeepsMetadataBounded(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		tbl := create(t, c, "long", nil)
		const appends, keep = 48, 3
		var (
			files, lists []string
			want         []row
			maxManifests int
		)
		for i := range appends {
			r := row{int64(i + 1), "r"}
			f := writeFile(t, e, tbl, []row{r})
			files, want = append(files, f.Path), append(want, r)
			if err := c.Append(ctx, tbl, iceberg.Append{Files: []iceberg.DataFile{f}}); err != nil {
				t.Fatalf("append %d: %v", i, err)
			}
			tbl = load(t, c, tbl.Ident)
			lists = append(lists, manifestList(t, c, tbl))
			maxManifests = max(maxManifests, tbl.Manifests)
			if tbl.MetadataLog > 10 || tbl.Manifests >= 16 {
				t.Fatalf("append %d: metadata log %d, manifests %d", i, tbl.MetadataLog, tbl.Manifests)
			}
			if i%4 != 3 {
				continue
			}
			err := c.Expire(ctx, tbl, iceberg.Retention{KeepLast: keep, NowMs: tbl.Snapshots[len(tbl.Snapshots)-1].TimestampMs + 60_000})
			if err != nil {
				t.Fatalf("expire after append %d: %v", i, err)
			}
			expired := tbl
			tbl = load(t, c, tbl.Ident)
			if !slices.Equal(ids(tbl.Snapshots), ids(expired.Snapshots[max(len(expired.Snapshots)-keep, 0):])) || tbl.Current != expired.Current {
				t.Fatalf("expire kept %v of %v", ids(tbl.Snapshots), ids(expired.Snapshots))
			}
		}
		t.Logf("at most %d manifests, now %d; metadata log %d", maxManifests, tbl.Manifests, tbl.MetadataLog)
		if maxManifests < 8 {
			t.Errorf("at most %d manifests: the merge test proves nothing", maxManifests)
		}
		for _, f := range files {
			if !e.exists(t, f) {
				t.Errorf("data file %s deleted", f)
			}
		}
		for i, l := range lists[:appends-keep-1] { // the newest are still retained
			if e.exists(t, l) {
				t.Errorf("manifest list %d of an expired snapshot is still there: %s", i, l)
			}
		}
		if got := scan(t, c, tbl.Ident); !slices.Equal(got, want) {
			t.Errorf("scanned %d rows, want %d", len(got), len(want))
		}
	})
}

// Expire keeps the snapshots younger than MaxAgeMs though there are more
// than KeepLast, and a stale Expire is a conflict.
func TestExpireByAgeAndPin(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		tbl := create(t, c, "aged", nil)
		for i := range 4 {
			f := writeFile(t, e, tbl, []row{{int64(i), "x"}})
			if err := c.Append(ctx, tbl, iceberg.Append{Files: []iceberg.DataFile{f}}); err != nil {
				t.Fatal(err)
			}
			tbl = load(t, c, tbl.Ident)
		}
		snaps := tbl.Snapshots
		// Young: the newest three by the caller's clock.
		now := snaps[1].TimestampMs + 1000
		r := iceberg.Retention{KeepLast: 1, MaxAgeMs: now - snaps[1].TimestampMs, NowMs: now}

		stale := tbl
		f := writeFile(t, e, tbl, []row{{9, "x"}})
		if err := c.Append(ctx, tbl, iceberg.Append{Files: []iceberg.DataFile{f}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Expire(ctx, stale, r); !errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("stale expire: %v, want ErrConflict", err)
		}
		tbl = load(t, c, tbl.Ident)
		if len(tbl.Snapshots) != 5 {
			t.Fatalf("a stale expire expired: %v", ids(tbl.Snapshots))
		}
		if err := c.Expire(ctx, tbl, r); err != nil {
			t.Fatal(err)
		}
		got := load(t, c, tbl.Ident)
		if want := tbl.Snapshots[1:]; !slices.Equal(ids(got.Snapshots), ids(want)) {
			t.Errorf("kept %v, want %v", ids(got.Snapshots), ids(want))
		}
	})
}

// manifestList is the manifest list of tbl's current snapshot.
func manifestList(t *testing.T, c *Catalog, tbl *iceberg.Table) string {
	t.Helper()
	meta, ok := c.recall(tbl.MetadataLocation)
	if !ok {
		t.Fatalf("%s not remembered", tbl.MetadataLocation)
	}
	return meta.SnapshotByID(tbl.Current).ManifestList
}

func ids(snaps []iceberg.Snapshot) []int64 {
	out := make([]int64, len(snaps))
	for i, s := range snaps {
		out[i] = s.ID
	}
	return out
}

// Append is pinned to the snapshot only and Evolve to the schema only,
// as the Model pins them: each lands on a table the other kind moved.
func TestPinsAreIndependent(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		t0 := create(t, c, "pins", nil)
		if err := c.Evolve(ctx, t0, iceberg.Change{Add: []iceberg.Column{{Name: "extra", Type: icego.PrimitiveTypes.String}}}); err != nil {
			t.Fatal(err)
		}
		f := writeFile(t, e, t0, []row{{1, "a"}})
		if err := c.Append(ctx, t0, iceberg.Append{Files: []iceberg.DataFile{f}}); err != nil {
			t.Fatalf("append on a table whose schema moved: %v", err)
		}
		t1 := load(t, c, t0.Ident)
		if err := c.Append(ctx, t1, iceberg.Append{Files: []iceberg.DataFile{writeFile(t, e, t1, []row{{2, "b"}})}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Evolve(ctx, t1, iceberg.Change{Add: []iceberg.Column{{Name: "more", Type: icego.PrimitiveTypes.Int64}}}); err != nil {
			t.Fatalf("evolve on a table whose snapshot moved: %v", err)
		}
		if got := scan(t, c, t0.Ident); !slices.Equal(got, []row{{1, "a"}, {2, "b"}}) {
			t.Errorf("scanned %v", got)
		}
		if got := load(t, c, t0.Ident); len(got.Snapshots) != 2 || got.Schema.NumFields() != 7 {
			t.Errorf("table %+v", got)
		}
	})
}

// A conflicting append leaves no file of its own behind, and every data
// file carries its day as the partition value.
func TestConflictLeavesNoFiles(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		t0 := create(t, c, "tidy", nil)
		f := writeFile(t, e, t0, []row{{1, "a"}})
		if err := c.Append(ctx, t0, iceberg.Append{Files: []iceberg.DataFile{f}}); err != nil {
			t.Fatal(err)
		}
		before := e.list(t, t0.Location+"/metadata")
		g := writeFile(t, e, t0, []row{{2, "b"}})
		if err := c.Append(ctx, t0, iceberg.Append{Files: []iceberg.DataFile{g}}); !errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("stale append: %v", err)
		}
		if after := e.list(t, t0.Location+"/metadata"); !slices.Equal(after, before) {
			t.Errorf("metadata files before the conflict:\n%v\nafter:\n%v", before, after)
		}

		ctxAWS := c.withAWS(ctx)
		tbl, err := c.cat.LoadTable(ctxAWS, ident(t0.Ident))
		if err != nil {
			t.Fatal(err)
		}
		tasks, err := tbl.Scan().PlanFiles(ctxAWS)
		if err != nil || len(tasks) != 1 {
			t.Fatalf("planned %d files: %v", len(tasks), err)
		}
		part := tasks[0].File.Partition()
		if len(part) != 1 || fmt.Sprint(part[partitionFieldID]) != fmt.Sprint(icego.Date(f.Day)) {
			t.Errorf("partition %v, want {%d: %d}", part, partitionFieldID, f.Day)
		}
		if vc := tasks[0].File.ValueCounts(); vc[idName] != 1 {
			t.Errorf("value counts %v", vc)
		}
		// A filter on the day prunes by the partition value.
		for days, want := range map[time.Duration]int{0: 1, 48: 0} {
			filter := icego.EqualTo(icego.Reference("_ingested_at"), day0.Add(days*time.Hour).Format(time.RFC3339))
			tasks, err = tbl.Scan(table.WithRowFilter(filter)).PlanFiles(ctxAWS)
			if err != nil || len(tasks) != want {
				t.Errorf("a filter on %s planned %d files (%v), want %d", day0.Add(days*time.Hour), len(tasks), err, want)
			}
		}
	})
}

// A table state older than the metadata files the table still keeps is
// a conflict, even for a catalog that never loaded it.
func TestStaleBeyondMetadataLog(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		t0 := create(t, c, "old", nil)
		tbl := t0
		for i := range 12 {
			if err := c.Append(ctx, tbl, iceberg.Append{Props: map[string]string{"i": fmt.Sprint(i)}}); err != nil {
				t.Fatal(err)
			}
			tbl = load(t, c, tbl.Ident)
		}
		if e.exists(t, t0.MetadataLocation) {
			t.Fatalf("metadata %s was not deleted after commit", t0.MetadataLocation)
		}
		fresh := open(t, e)
		err := fresh.Append(ctx, t0, iceberg.Append{Files: []iceberg.DataFile{writeFile(t, e, t0, []row{{1, "a"}})}})
		if !errors.Is(err, iceberg.ErrConflict) {
			t.Errorf("append on a forgotten state: %v, want ErrConflict", err)
		}
		// A state still kept works from a catalog that never saw it.
		if err := fresh.Append(ctx, tbl, iceberg.Append{Files: []iceberg.DataFile{writeFile(t, e, tbl, []row{{1, "a"}})}}); err != nil {
			t.Errorf("append from another catalog: %v", err)
		}
	})
}

// Even on a table whose own property turns iceberg-go's retries on, a
// conflict comes back as one: iceberg-go is never let to retry.
func TestIcebergRetriesStayOff(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		t0 := create(t, c, "retrying", nil)
		err := c.Append(ctx, t0, iceberg.Append{Props: map[string]string{table.CommitNumRetriesKey: "3"}})
		if err == nil || errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("append turning retries on: %v", err)
		}
		// Another tool turns them on.
		ctxAWS := c.withAWS(ctx)
		raw, err := c.cat.LoadTable(ctxAWS, ident(t0.Ident))
		if err != nil {
			t.Fatal(err)
		}
		txn := raw.NewTransaction()
		if err := txn.SetProperties(icego.Properties{table.CommitNumRetriesKey: "3", table.CommitMinRetryWaitMsKey: "1"}); err != nil {
			t.Fatal(err)
		}
		if _, err := txn.Commit(ctxAWS); err != nil {
			t.Fatal(err)
		}
		t1 := load(t, c, t0.Ident)
		if t1.Props[table.CommitNumRetriesKey] != "3" {
			t.Fatalf("properties %v", t1.Props)
		}
		// Lost compare-and-swaps are what iceberg-go would retry.
		contend(t, e, []*Catalog{c, open(t, e)}, t1, 2, 4)

		cm := &committer{}
		if _, err := cm.LoadTable(ctx, nil); !errors.Is(err, iceberg.ErrConflict) {
			t.Errorf("a refresh for a retry: %v, want ErrConflict", err)
		}
		cm.asked = true
		if _, _, err := cm.CommitTable(ctx, nil, nil, nil); !errors.Is(err, iceberg.ErrConflict) {
			t.Errorf("a second commit attempt: %v, want ErrConflict", err)
		}
	})
}

// The SQLite catalog runs in WAL mode with synchronous=FULL and a busy
// timeout on every connection.
func TestSQLitePragmas(t *testing.T) {
	c := open(t, sqliteFolder(t))
	ctx := context.Background()
	for range 3 { // three connections at once: three distinct ones
		conn, err := c.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var mode string
		var sync, busy int
		row := conn.QueryRowContext(ctx, "SELECT * FROM pragma_journal_mode, pragma_synchronous, pragma_busy_timeout")
		if err := row.Scan(&mode, &sync, &busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 || busy != sqliteBusyTimeoutMs {
			t.Errorf("journal_mode %s, synchronous %d, busy_timeout %d", mode, sync, busy)
		}
	}
}

// Files lists t.Current's files as the sink wrote them; a Rewrite
// replaces some with one holding their rows, as a "replace" snapshot
// iceberg-go's reader plans to the new file, pinned like an Append; one
// naming a file the table does not hold changes nothing.
func TestFilesAndRewrite(t *testing.T) {
	eachBackend(t, func(t *testing.T, e env) {
		ctx := context.Background()
		c := open(t, e)
		tbl := create(t, c, "rewritten", nil)
		var files []iceberg.DataFile
		var all []row
		for i := range int64(3) {
			rows := []row{{10*i + 1, "a"}, {10*i + 2, ""}}
			f := writeFile(t, e, tbl, rows)
			appendRetrying(t, c, tbl.Ident, f)
			files, all = append(files, f), append(all, rows...)
		}
		now := load(t, c, tbl.Ident)
		got, err := c.Files(ctx, now)
		if err != nil {
			t.Fatal(err)
		}
		slices.SortFunc(got, func(a, b iceberg.DataFile) int { return strings.Compare(a.Path, b.Path) })
		for i, f := range got {
			w := files[i]
			if f.Path != w.Path || f.Rows != w.Rows || f.Bytes != w.Bytes || f.Day != w.Day {
				t.Fatalf("file %d: %+v, want %+v", i, f, w)
			}
		}
		merged := writeFile(t, e, tbl, all[:4])
		rw := iceberg.Rewrite{Remove: files[:2], Add: merged, Summary: map[string]string{iceberg.SummaryRewriteID: "r1"}}
		if err := c.Rewrite(ctx, tbl, rw); !errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("a rewrite on an old state: %v", err)
		}
		stranger := rw
		stranger.Remove = []iceberg.DataFile{{Path: tbl.Location + "/data/nobody.parquet"}}
		if err := c.Rewrite(ctx, now, stranger); err == nil || errors.Is(err, iceberg.ErrConflict) {
			t.Fatalf("a rewrite of a file the table lacks: %v", err)
		}
		if again := load(t, c, tbl.Ident); again.MetadataLocation != now.MetadataLocation {
			t.Fatal("a failed rewrite changed the table")
		}
		if err := c.Rewrite(ctx, now, rw); err != nil {
			t.Fatal(err)
		}
		after := load(t, c, tbl.Ident)
		last := after.Snapshots[len(after.Snapshots)-1]
		if last.Summary["operation"] != "replace" || last.Summary[iceberg.SummaryRewriteID] != "r1" || last.Parent != now.Current {
			t.Fatalf("rewrite snapshot %+v", last)
		}
		if paths := dataFiles(t, c, tbl.Ident); !slices.Equal(paths, sorted(merged.Path, files[2].Path)) {
			t.Fatalf("files after the rewrite %v", paths)
		}
		if rows := scan(t, c, tbl.Ident); !slices.Equal(rows, all) {
			t.Fatalf("scanned %v, want %v", rows, all)
		}
	})
}

func sorted(s ...string) []string { slices.Sort(s); return s }
