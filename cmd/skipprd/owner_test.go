package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
	"github.com/skipprd/skipprd/storage"
)

// The record round-trips, through bytes and through the file, and the
// write leaves no temp file behind.
func TestOwnerRecordRoundTrip(t *testing.T) {
	recs := []ownerRecord{
		{Pipeline: "default", Prefix: "wal", WALStorage: walDisk, Segments: segmentsLocal},
		{Pipeline: "orders-prod.v2", Prefix: "tenant/ws", WALStorage: walDisk, Segments: "s3://seg-bucket"},
		{Pipeline: "a", Prefix: "wal", WALStorage: walEmbedded, Segments: segmentsEmbed},
		{Pipeline: "b_1", Prefix: "x", WALStorage: walS3, Segments: "s3://my.bucket-1"},
	}
	dir := t.TempDir()
	path := filepath.Join(dir, ownerFile)
	for _, r := range recs {
		got, err := parseOwner(r.encode())
		if err != nil || got != r {
			t.Fatalf("parse(encode(%+v)) = %+v, %v", r, got, err)
		}
		if err := writeOwner(path, r); err != nil {
			t.Fatal(err)
		}
		got, found, err := readOwner(path)
		if err != nil || !found || got != r {
			t.Fatalf("read back %+v, found %v, %v; want %+v", got, found, err, r)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("DATA_DIR holds %v, want only %s", entries, ownerFile)
	}
	// What the operator sees.
	want := "skipprd-data-dir 1\npipeline b_1\nprefix x\nwal_storage s3\nsegments s3://my.bucket-1\nsha256 "
	if b, _ := os.ReadFile(path); !strings.HasPrefix(string(b), want) {
		t.Fatalf("record:\n%s\nwant it to start\n%s", b, want)
	}
	_, found, err := readOwner(filepath.Join(dir, "none"))
	if found || err != nil {
		t.Fatalf("missing record: found %v, %v", found, err)
	}
	// recordOf follows the modes.
	for _, tc := range []struct {
		env  map[string]string
		want ownerRecord
	}{
		{nil, ownerRecord{"default", "wal", walDisk, segmentsLocal}},
		{map[string]string{envBucket: "b", envPipeline: "p", envWALPrefix: "q/r"}, ownerRecord{"p", "q/r", walDisk, "s3://b"}},
		{map[string]string{envWALStorage: "embedded", envBucket: "ignored"}, ownerRecord{"default", "wal", walEmbedded, segmentsEmbed}},
		{map[string]string{envWALStorage: "s3", envWALBucket: "w"}, ownerRecord{"default", "wal", walS3, "s3://w"}},
	} {
		c, err := parseConfig(envOf(tc.env))
		if err != nil {
			t.Fatal(err)
		}
		if got := recordOf(c); got != tc.want {
			t.Fatalf("%v: record %+v, want %+v", tc.env, got, tc.want)
		}
	}
}

// sealed returns body with a valid sha256 line, so a test can damage
// what the checksum does not catch.
func sealed(body string) []byte {
	sum := sha256.Sum256([]byte(body))
	return []byte(body + "sha256 " + hex.EncodeToString(sum[:]) + "\n")
}

// A damaged or oversized record is refused with an error naming the file
// and what is wrong; it is never read as "no record".
func TestOwnerRecordDamaged(t *testing.T) {
	good := ownerRecord{Pipeline: "a", Prefix: "wal", WALStorage: walDisk, Segments: segmentsLocal}.encode()
	flipped := bytes.Clone(good)
	flipped[bytes.Index(flipped, []byte("pipeline a"))+9] = 'b'
	cases := []struct {
		name string
		data []byte
		says string
	}{
		{"empty", nil, "empty"},
		{"cut short", good[:len(good)-5], "cut short"},
		{"a line lost", good[:bytes.Index(good, []byte("prefix"))], "lines"},
		{"not a record", []byte("hello\n"), `want "skipprd-data-dir 1"`},
		{"newer version", bytes.Replace(good, []byte("skipprd-data-dir 1"), []byte("skipprd-data-dir 2"), 1), "newer skipprd"},
		{"a flipped byte", flipped, "sha256 line does not match"},
		{"lines out of order", sealed("skipprd-data-dir 1\nprefix wal\npipeline a\nwal_storage disk\nsegments local\n"), `line 2 is "prefix wal"`},
		{"bad pipeline", sealed("skipprd-data-dir 1\npipeline ../x\nprefix wal\nwal_storage disk\nsegments local\n"), "not a pipeline name"},
		{"bad storage", sealed("skipprd-data-dir 1\npipeline a\nprefix wal\nwal_storage tape\nsegments local\n"), "wal_storage"},
		{"segments of another mode", sealed("skipprd-data-dir 1\npipeline a\nprefix wal\nwal_storage s3\nsegments local\n"), "does not go with"},
		{"oversized", bytes.Repeat([]byte("x"), ownerFileMax+1), "larger than 4096 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), ownerFile)
			writeFile(t, path, string(c.data))
			_, found, err := readOwner(path)
			if err == nil || found || !errors.Is(err, errOwnerDamaged) {
				t.Fatalf("found %v, err %v; want a damaged record", found, err)
			}
			for _, says := range []string{path, c.says, "restore it, or remove it"} {
				if !strings.Contains(err.Error(), says) {
					t.Fatalf("message %q should say %q", err, says)
				}
			}
		})
	}
	// A daemon on a DATA_DIR with a damaged record exits 1 before it
	// touches the log.
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, ownerFile), string(flipped))
	var logs strings.Builder
	code := run(context.Background(), envOf(map[string]string{envDataDir: dir, envAdminAddr: "off"}), io.Discard,
		slog.New(slog.NewTextHandler(&logs, nil)))
	if code != 1 || !strings.Contains(logs.String(), "sha256 line does not match") {
		t.Fatalf("exit %d, logs:\n%s", code, logs.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "wal")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused daemon touched the log: %v", err)
	}
}

// SKIPPR_DRAIN_PIPELINE is a pipeline name other than the one started.
func TestParseConfigDrainPipeline(t *testing.T) {
	c, err := parseConfig(envOf(map[string]string{envPipeline: "b", envDrainPipeline: "a"}))
	if err != nil || c.DrainPipeline != "a" {
		t.Fatalf("%+v, %v", c, err)
	}
}

// A host of pipeline on dataDir, as the daemon builds it, with a
// Parquet folder sink and no sources; started.
func testHost(t *testing.T, dataDir, pipeline string) *daemon {
	t.Helper()
	cfg, err := parseConfig(envOf(map[string]string{envDataDir: dataDir, envPipeline: pipeline, envAdminAddr: "off"}))
	if err != nil {
		t.Fatal(err)
	}
	pf := &pipelineFile{Sinks: []sinkSpec{{Name: lakeSinkRef, Kind: sinkParquetDir, Path: lakeDir}}}
	d := &daemon{cfg: cfg, ecfg: cfg.engineConfig(), log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	d, err = d.open(context.Background(), pf, envOf(nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.host.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return d
}

var testSchema = arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)

// ingest submits n one-row units with idempotency keys tag-0…, each
// acked (durable in the log) before the next.
func ingest(t *testing.T, d *daemon, tag string, n int) {
	t.Helper()
	for i := range n {
		b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
		b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s-%d", tag, i))
		rec := b.NewRecordBatch()
		b.Release()
		u := engine.Unit{
			Key:    segment.PartitionKey{SinkRef: lakeSinkRef, Namespace: "events", Partition: "0", Schema: segment.FingerprintOf(testSchema)},
			Schema: testSchema, Batches: []arrow.RecordBatch{rec}, IdempotencyKey: fmt.Sprintf("%s-%d", tag, i),
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := d.host.Ingest(ctx, u)
		cancel()
		rec.Release()
		if err != nil {
			t.Fatalf("unit %d: %v", i, err)
		}
	}
}

// waitStats polls the host until ok holds.
func waitStats(t *testing.T, d *daemon, what string, ok func(engine.Stats) bool) engine.Stats {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := d.host.Stats(context.Background())
		if err == nil && ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 30 s: %+v", what, st)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The read-only inspection against logs and segment stores the engine
// wrote: acked units the segment store never got are counted from the
// log; segments a sink never applied are counted from the store; after a
// run that applied everything, nothing is left — and the inspection
// changes no byte of DATA_DIR.
func TestInspectLeftovers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the engine on real files")
	}
	dataDir := t.TempDir()
	cfg, _ := parseConfig(envOf(map[string]string{envDataDir: dataDir, envPipeline: "a"}))
	recA := recordOf(cfg)
	left := func() leftover {
		t.Helper()
		before := settledSnapshot(t, dataDir)
		l, err := leftBy(context.Background(), cfg, recA, slog.New(slog.NewTextHandler(io.Discard, nil)))
		if err != nil {
			t.Fatal(err)
		}
		if after := snapshotDir(t, dataDir); after != before {
			t.Fatalf("the inspection changed DATA_DIR: %s", lineDiff(before, after))
		}
		return l
	}

	// 1. The segment store refuses every write: the units are acked from
	// the log and never flushed. A crash leaves them in the log only.
	d := testHost(t, dataDir, "a")
	segs := filepath.Join(dataDir, segmentsDir)
	if err := os.Rename(segs, segs+".aside"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, segs, "in the way")
	ingest(t, d, "log", 7)
	d.host.Kill()
	_ = d.unlockAll()
	if err := os.Remove(segs); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(segs+".aside", segs); err != nil {
		t.Fatal(err)
	}
	if l := left(); l.Units != 7 || l.Segments != 0 || len(l.Damaged) != 0 {
		t.Fatalf("after a crash with an unwritable store: %+v, want 7 log units", l)
	}

	// A damaged entry followed by good ones halts recovery's partition;
	// the inspection says so (on a copy: the next steps use the log).
	damaged := t.TempDir()
	file := filepath.Join(wal.Root, "partition-0", wal.SegmentName(1))
	b, err := os.ReadFile(filepath.Join(dataDir, file))
	if err != nil {
		t.Fatal(err)
	}
	ents := wal.Scan(file, b).Entries
	b[ents[3].Offset+10] ^= 0xff
	if err := os.MkdirAll(filepath.Join(damaged, filepath.Dir(file)), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(damaged, file), string(b))
	if lr, err := inspectLog(damaged); err != nil || len(lr.Damaged) != 1 || !strings.Contains(lr.Damaged[0], "partition 0") || lr.Units != 2 {
		t.Fatalf("a damaged log: %+v, %v; want partition 0 damaged after 2 units", lr, err)
	}

	// 2. The sink cannot apply: the replayed units and new ones are
	// committed as segments and wait there. A crash leaves segments.
	events := filepath.Join(dataDir, lakeDir, "events")
	writeFile(t, events, "in the way")
	d = testHost(t, dataDir, "a")
	ingest(t, d, "seg", 5)
	waitStats(t, d, "committed segments", func(st engine.Stats) bool {
		return st.LiveSegments > 0 && st.HeldBytes == 0 && st.WALLogBytes > 0
	})
	d.host.Kill()
	_ = d.unlockAll()
	l := left()
	if l.Segments == 0 || l.Oldest == (engine.SnapshotID{}) || len(l.Damaged) != 0 {
		t.Fatalf("after a crash with a failing sink: %+v, want committed segments", l)
	}
	for _, says := range []string{"committed segments not yet applied in the local segment store", "oldest snapshot"} {
		if !strings.Contains(l.String(), says) {
			t.Fatalf("%q should say %q", l, says)
		}
	}

	// This DATA_DIR has no record (the test's hosts write none, like an
	// older build): its owner is inferred from the writer object, and
	// pipeline b is refused, changing nothing (but the lock file, which
	// a daemon that ran would have left).
	writeFile(t, filepath.Join(dataDir, walLockFile), "")
	before := snapshotDir(t, dataDir)
	var logs strings.Builder
	code := run(context.Background(), envOf(map[string]string{envDataDir: dataDir, envPipeline: "b", envAdminAddr: "off"}),
		io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
	for _, says := range []string{"inferred its owner", `holds the unapplied WAL of pipeline \"a\"`, `starting pipeline \"b\"`} {
		if code != 1 || !strings.Contains(logs.String(), says) {
			t.Fatalf("exit %d, want 1 and a log saying %s:\n%s", code, says, logs.String())
		}
	}
	if after := snapshotDir(t, dataDir); after != before {
		t.Fatalf("the refused start changed DATA_DIR: %s", lineDiff(before, after))
	}

	// A drain into a pipeline file without a's sink stops on the alert,
	// naming it, and exits 1; a's segments stay.
	pfile := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pfile, "sinks:\n  other: {kind: parquet-dir, path: elsewhere}\n"+
		"sources:\n  - {name: api, kind: http, sink: other, listen: \"127.0.0.1:0\"}\n")
	logs.Reset()
	code = run(context.Background(), envOf(map[string]string{envDataDir: dataDir, envPipeline: "b", envAdminAddr: "off",
		envPipelineFile: pfile, envDrainPipeline: "a"}), io.Discard, slog.New(slog.NewTextHandler(&logs, nil)))
	if says := `no sink \"lake\" is configured`; code != 1 || !strings.Contains(findLine(strings.Split(logs.String(), "\n"), "start-up failed"), says) {
		t.Fatalf("exit %d, want 1 and a refusal saying %s:\n%s", code, says, logs.String())
	}
	if l := left(); l.Segments == 0 {
		t.Fatalf("after a refused drain: %+v, want a's segments still there", l)
	}

	// The log names its pipeline in its seals (what an older DATA_DIR's
	// owner is inferred from, with a bucket) — when a seal is still in
	// it: once every generation is flushed its log files go, seals and
	// all, and how far that got before the kill is the machine's timing
	// (a loaded CI box's run had none left).
	lr, err := inspectLog(dataDir)
	switch {
	case err != nil:
		t.Fatal(err)
	case lr.Newest == "":
		t.Logf("no seal left in the log to name its pipeline: every generation was flushed and its files dropped")
	case pipelineOfDir("wal", lr.Newest) != "a":
		t.Fatalf("newest seal dir %q, want pipeline a's", lr.Newest)
	}

	// 3. The sink works again: a run applies everything and stops
	// gracefully. Nothing is left.
	if err := os.Remove(events); err != nil {
		t.Fatal(err)
	}
	d = testHost(t, dataDir, "a")
	waitStats(t, d, "everything applied", func(st engine.Stats) bool { return st.LiveSegments == 0 && st.HeldBytes == 0 })
	if err := d.host.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = d.unlockAll()
	if l := left(); !l.empty() || l.String() != "nothing" {
		t.Fatalf("after a clean run: %+v", l)
	}
	if got := len(lakeIDs(t, filepath.Join(dataDir, lakeDir))["events"]); got != 12 {
		t.Fatalf("the lake holds %d rows, want 12", got)
	}
}

// unlockAll releases what open took (the test hosts take no lock).
func (d *daemon) unlockAll() error {
	for _, c := range d.closers {
		c()
	}
	return nil
}

// snapshotDir lists every file under dir with its size and modification
// time (wal.lock aside: it names the process holding it).
// settledSnapshot is snapshotDir once two snapshots 100 ms apart agree:
// a killed host's disk workers may still finish a best-effort clean-up
// (a leftover temp file removed) after Kill returns, and the check that
// follows must see only what the code under test changed.
func settledSnapshot(t *testing.T, dir string) string {
	t.Helper()
	prev := snapshotDir(t, dir)
	for range 50 {
		time.Sleep(100 * time.Millisecond)
		cur := snapshotDir(t, dir)
		if cur == prev {
			return cur
		}
		prev = cur
	}
	t.Fatalf("%s kept changing for 5 s with no process on it", dir)
	return ""
}

func snapshotDir(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if rel == walLockFile {
			return nil
		}
		sum := ""
		if !fi.IsDir() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			s := sha256.Sum256(data)
			sum = hex.EncodeToString(s[:8])
		}
		fmt.Fprintf(&b, "%s %v %d %s %s\n", rel, fi.Mode(), fi.Size(), fi.ModTime().Format(time.RFC3339Nano), sum)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// lineDiff says which lines only a and only b have.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if !mb[l] {
			out.WriteString("\n- " + l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ma[l] {
			out.WriteString("\n+ " + l)
		}
	}
	return out.String()
}

// The embedded store is listed through the S3 client like a bucket: a
// pipeline's commit markers count, its bodies and bitmaps do not, and
// its writer object names it (newest first) when DATA_DIR has no record.
func TestInspectEmbeddedStore(t *testing.T) {
	dataDir := t.TempDir()
	cfg, _ := parseConfig(envOf(map[string]string{envDataDir: dataDir, envWALStorage: "embedded", envPipeline: "b"}))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	emb, err := storage.StartEmbeddedS3(filepath.Join(dataDir, embeddedFile), embeddedBucket, quiet)
	if err != nil {
		t.Fatal(err)
	}
	loop := storage.NewLoop()
	go func() { _ = loop.Run(context.Background()) }()
	store := storage.NewS3Store(loop, emb.Client(), emb.Bucket(), storage.S3Options{})
	la, lc := engine.NewLayout("wal", "a"), engine.NewLayout("wal", "c")
	dir := la.SegmentDir(time.Now().UnixMilli())
	keys := []string{engine.NewLayout("wal", "b").WriterKey(), la.WriterKey(), // a's written last
		la.Key(dir, engine.SnapshotID{Epoch: 2, Seq: 9}, engine.KindBody), la.Key(dir, engine.SnapshotID{Epoch: 2, Seq: 9}, engine.KindMarker),
		la.Key(dir, engine.SnapshotID{Epoch: 1, Seq: 4}, engine.KindMarker), la.Key(dir, engine.SnapshotID{Epoch: 1, Seq: 4}, engine.KindBitmap),
		lc.Key(lc.SegmentDir(time.Now().UnixMilli()), engine.SnapshotID{Epoch: 1, Seq: 1}, engine.KindMarker)}
	for _, k := range keys {
		if _, err := storage.Call(loop, func(done func(error)) {
			store.PutObject(engine.PutObjectInput{Key: k, Body: []byte("x")}, func(_ string, err error) { done(err) })
		}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct modification times
	}
	store.Close()
	loop.Stop()
	if err := emb.Close(); err != nil {
		t.Fatal(err)
	}
	rec := ownerRecord{Pipeline: "a", Prefix: "wal", WALStorage: walEmbedded, Segments: segmentsEmbed}
	l, err := leftBy(context.Background(), cfg, rec, quiet)
	if err != nil || l.Segments != 2 || l.Oldest != (engine.SnapshotID{Epoch: 1, Seq: 4}) || l.Units != 0 || !strings.Contains(l.Store, "embedded store") {
		t.Fatalf("%+v, %v; want a's 2 markers, the oldest 1-4", l, err)
	}
	d := &daemon{cfg: cfg, log: quiet}
	got, found, err := d.inferOwner(context.Background())
	if err != nil || !found || got != rec {
		t.Fatalf("inferred %+v, %v, %v; want %+v", got, found, err, rec)
	}
}
