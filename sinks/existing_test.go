package sinks

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/sim"
	"github.com/skipprd/skipprd/storage"
)

// legacyFile is job's file as builds before JobMetadata wrote it: the
// same columns and rows, no skipprd.* entries.
func legacyFile(t tb, job *engine.Job) []byte {
	t.Helper()
	schema, cdc, err := fileSchema(job)
	if err != nil {
		t.Fatalf("%v", err)
	}
	b, err := encode(job, schema, cdc, nil, defaultRowGroups)
	if err != nil {
		t.Fatalf("%v", err)
	}
	return b
}

// otherJob is job's id with another log's content: what two pipelines
// made before compaction ids carried the log's identity.
func otherJob(job *engine.Job) *engine.Job {
	o := *job
	o.Content = "0badc0de0badc0de0badc0de0badc0de"
	o.Origin = segment.Origin{WAL: segment.WALID{0x0b, 0xad}, Pipeline: "other"}
	return &o
}

// Variants of the standard fixtures: the same ids (same segment, same
// ordinals), other rows or other columns.
var (
	plainOneMoreRow = jobSpec{namespace: "events", seq: 1, slices: [][]int{{3, 4}, {6}}}
	cdcAsPlain      = jobSpec{namespace: "orders", seq: 2, slices: [][]int{{4}, {2, 3}}}
)

// wantCollision fails t unless err is a refusal for an id collision
// whose message names every one of words.
func wantCollision(t testing.TB, err error, words ...string) {
	t.Helper()
	if !errors.Is(err, engine.ErrCannotApply) || !errors.Is(err, engine.ErrIDCollision) {
		t.Fatalf("err = %v, want one wrapping ErrCannotApply and ErrIDCollision", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %q, want it to name %q", err, w)
		}
	}
}

// wantRetryable fails t unless err is an error the engine retries.
func wantRetryable(t testing.TB, err error, words ...string) {
	t.Helper()
	if err == nil || errors.Is(err, engine.ErrCannotApply) {
		t.Fatalf("err = %v, want an ordinary (retryable) error", err)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("err = %q, want it to name %q", err, w)
		}
	}
}

// Every file records the job: id, content, origin (none for a legacy
// job), segment, the segments it spans (its own for a job that lists
// none); after the schema's own entries, in a fixed order.
func TestEncodeParquetRecordsTheJob(t *testing.T) {
	f := newFixture(t, plainSpec)
	legacy := *f.job
	legacy.Origin = segment.Origin{}
	listed := *f.job
	listed.Segments = []engine.SnapshotID{f.job.Segment}
	span := spanFixture(t, spanSpecs...)
	const one = "1 000000000001-000000000001..000000000001-000000000001"
	for _, tc := range []struct {
		job  *engine.Job
		want [][2]string
	}{
		{f.job, [][2]string{{MetaCompactionID, f.job.ID}, {MetaContent, f.job.Content}, {MetaPipeline, "fixture"},
			{MetaWALID, "f1870000000000000000000000000000"}, {MetaSegment, "000000000001-000000000001"}, {MetaSegments, one}}},
		{&legacy, [][2]string{{MetaCompactionID, f.job.ID}, {MetaContent, f.job.Content}, {MetaSegment, "000000000001-000000000001"},
			{MetaSegments, one}}},
		{&listed, [][2]string{{MetaCompactionID, f.job.ID}, {MetaContent, f.job.Content}, {MetaPipeline, "fixture"},
			{MetaWALID, "f1870000000000000000000000000000"}, {MetaSegment, "000000000001-000000000001"}, {MetaSegments, one}}},
		{span.job, [][2]string{{MetaCompactionID, span.job.ID}, {MetaContent, span.job.Content}, {MetaPipeline, "fixture"},
			{MetaWALID, "f1870000000000000000000000000000"}, {MetaSegment, "000000000001-000000000007"},
			{MetaSegments, "3 000000000001-000000000003..000000000001-000000000007"}}},
	} {
		b, err := EncodeParquet(tc.job)
		if err != nil {
			t.Fatal(err)
		}
		rdr, err := file.NewParquetReader(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		kv := rdr.MetaData().KeyValueMetadata()
		var got [][2]string
		for _, e := range kv {
			if strings.HasPrefix(e.Key, "skipprd.") {
				got = append(got, [2]string{e.Key, e.GetValue()})
			}
		}
		rdr.Close()
		if fmt.Sprint(got) != fmt.Sprint(tc.want) || kv[len(kv)-1].Key != MetaSegments {
			t.Fatalf("origin %v: metadata %v, want %v last", tc.job.Origin, got, tc.want)
		}
	}
}

// footerOf reads b's footer as a sink would.
func footerOf(t tb, b []byte) footerRead {
	t.Helper()
	var got footerRead
	var gotErr error
	answered := false
	readFooter(int64(len(b)), func(off, n int64, done func([]byte, error)) {
		done(bytes.Clone(b[off:off+n]), nil)
	}, func(r footerRead, err error) { got, gotErr, answered = r, err, true })
	if !answered || gotErr != nil {
		t.Fatalf("readFooter: answered %t, %v", answered, gotErr)
	}
	return got
}

// judgeFile on every kind of file a name can hold.
func TestJudgeFile(t *testing.T) {
	plain := newFixture(t, plainSpec)
	cdc := newFixture(t, cdcSpec)
	moreRows := newFixture(t, plainOneMoreRow)
	asPlain := newFixture(t, cdcAsPlain)
	own, _ := EncodeParquet(plain.job)
	badFooter := append([]byte(parquetMagic), bytes.Repeat([]byte{0xff}, 40)...)
	badFooter = binary.LittleEndian.AppendUint32(badFooter, 40)
	badFooter = append(badFooter, parquetMagic...)
	for _, tc := range []struct {
		name   string
		job    *engine.Job
		file   []byte
		legacy bool
		words  []string // of the collision; nil: applied
	}{
		{"the job's file", plain.job, own, false, nil},
		{"a CDC job's file", cdc.job, mustEncode(t, cdc.job), false, nil},
		{"another content under the id", otherJob(plain.job), own, false,
			[]string{"the existing file holds job " + plain.job.ID, "content " + plain.job.Content, "this job's is 0badc0de",
				"pipeline fixture, WAL f187", "pipeline other, WAL 0bad", "segment 000000000001-000000000001",
				"segments 1 000000000001-000000000001..000000000001-000000000001"}},
		{"a legacy file of the job", plain.job, legacyFile(t, plain.job), true, nil},
		{"a legacy CDC file of the job", cdc.job, legacyFile(t, cdc.job), true, nil},
		{"a legacy file of other rows", moreRows.job, legacyFile(t, plain.job), false,
			[]string{"records no job content", "12 rows, this job has 13"}},
		{"a legacy file of other columns", asPlain.job, legacyFile(t, cdc.job), false,
			[]string{"records no job content", "columns (id int64", "_cdc_op utf8", "this job's are (id int64"}},
		{"text", plain.job, []byte("id,name\n1,a\n2,b\n"), false, []string{"(16 bytes) is not a Parquet file", `but in "2,b\n"`}},
		{"too short", plain.job, []byte("PAR1PAR1"), false, []string{"8 bytes are too few"}},
		{"a cut file", plain.job, own[:len(own)-1], false, []string{"does not end in the Parquet magic"}},
		{"a footer that does not parse", plain.job, badFooter, false, []string{"its footer does not parse"}},
		{"a footer longer than the file", plain.job, append(own[:len(own)-8:len(own)-8], 0xff, 0xff, 0, 0, 'P', 'A', 'R', '1'), false,
			[]string{"footer length 65535 does not fit"}},
		{"a footer longer than any", plain.job, append(own[:len(own)-8:len(own)-8], 0xff, 0xff, 0xff, 0xff, 'P', 'A', 'R', '1'), false,
			[]string{"footer length is 4294967295 bytes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := judgeFile(tc.job, "the existing file", footerOf(t, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if tc.words == nil {
				if v.collision != "" || v.legacy != tc.legacy {
					t.Fatalf("verdict %+v, want applied (legacy %t)", v, tc.legacy)
				}
				return
			}
			if v.collision == "" {
				t.Fatalf("verdict %+v, want a collision", v)
			}
			wantCollision(t, fmt.Errorf("%w: %w: %s", engine.ErrCannotApply, engine.ErrIDCollision, v.collision), tc.words...)
		})
	}
}

func mustEncode(t testing.TB, job *engine.Job) []byte {
	t.Helper()
	b, err := EncodeParquet(job)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wideJob is a job of one row and many int64 columns: its footer is
// longer than footerTailBytes.
func wideJob(t testing.TB, columns int) *engine.Job {
	t.Helper()
	fields := make([]arrow.Field, columns)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("column_with_a_long_name_%04d", i), Type: arrow.PrimitiveTypes.Int64}
	}
	schema := arrow.NewSchema(fields, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	for i := range fields {
		rb.Field(i).(*array.Int64Builder).Append(int64(i))
	}
	part := segment.Part{Key: segment.PartitionKey{SinkRef: "lake", Namespace: "wide", Schema: segment.FingerprintOf(schema)},
		Schema: schema, Batches: []arrow.RecordBatch{rb.NewRecordBatch()}}
	job, _ := jobFromParts(t, []segment.Part{part})
	for _, s := range job.Slices {
		t.Cleanup(s.Release)
	}
	job.Content = "00112233445566778899aabbccddeeff"
	job.Origin = segment.Origin{WAL: segment.WALID{1}, Pipeline: "wide"}
	return job
}

// A footer longer than the first read takes exactly one more ranged GET.
func TestJudgeFileLongFooter(t *testing.T) {
	job := wideJob(t, 1500)
	b := mustEncode(t, job)
	n := binary.LittleEndian.Uint32(b[len(b)-8:])
	if n <= footerTailBytes {
		t.Fatalf("footer of %d bytes, want one longer than %d", n, footerTailBytes)
	}
	w := newSimWorld(t, 31, sim.StoreConfig{}, sim.DiskConfig{})
	sink := NewParquetObjects(w.store.Client(w.inc), w.inc.Executor(), "lake")
	if err := w.apply(sink, job); err != nil {
		t.Fatal(err)
	}
	gets := w.store.Counts(sim.OpGet).Issued
	if err := w.apply(sink, job); err != nil {
		t.Fatalf("replay: %v", err)
	}
	if got := w.store.Counts(sim.OpGet).Issued - gets; got != 2 {
		t.Fatalf("the replay issued %d GETs, want 2 (the tail, then the footer)", got)
	}
	if err := w.apply(sink, otherJob(job)); !errors.Is(err, engine.ErrIDCollision) {
		t.Fatalf("another job under the id: %v, want a collision", err)
	}
	if st := sink.Stats(); st != (ParquetStats{Replays: 1, Collisions: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

// putS3 writes body at key, unconditionally (another writer's object).
func (w *s3World) put(key string, body []byte) {
	w.t.Helper()
	err, _ := storage.Call(w.loop, func(done func(error)) {
		w.store.PutObject(engine.PutObjectInput{Key: key, Body: body}, func(_ string, err error) { done(err) })
	})
	if err != nil {
		w.t.Fatalf("put %s: %v", key, err)
	}
}

// Over the real S3 client and gofakes3: a replay is a success; another
// job's object, a legacy object of other rows and an object that is not
// Parquet at the key are refused as collisions and left as they are; a
// legacy object of the same rows is trusted.
func TestParquetObjectsTellsWhoseObjectOverS3(t *testing.T) {
	w := newS3World(t)
	exec := w.loop.Ports(w.store, nil).Exec
	f := newFixture(t, cdcSpec)

	sink := NewParquetObjects(w.store, exec, "lake")
	if err := applyOnLoop(t, w.loop, sink, f.job); err != nil {
		t.Fatal(err)
	}
	key := ObjectKey("lake", f.job)
	if err := applyOnLoop(t, w.loop, sink, f.job); err != nil {
		t.Fatalf("replay: %v", err)
	}
	err := applyOnLoop(t, w.loop, sink, otherJob(f.job))
	wantCollision(t, err, "parquet-objects", key, f.job.ID, f.job.Content, "0badc0de", "pipeline fixture", "pipeline other")
	wantOneObject(t, w.keys("lake/"), w.get(key), "lake", f)
	if st := sink.Stats(); st != (ParquetStats{Replays: 1, Collisions: 1}) {
		t.Fatalf("stats %+v, want one replay and one collision", st)
	}

	for _, tc := range []struct {
		name   string
		job    *engine.Job
		object []byte
		words  []string // of the collision; nil: trusted
	}{
		{"legacy-same", f.job, legacyFile(t, f.job), nil},
		{"legacy-rows", newFixture(t, plainOneMoreRow).job, legacyFile(t, newFixture(t, plainSpec).job), []string{"12 rows, this job has 13"}},
		{"legacy-columns", newFixture(t, cdcAsPlain).job, legacyFile(t, f.job), []string{"columns (id int64"}},
		{"foreign", f.job, []byte("<html>not a Parquet file</html>"), []string{"is not a Parquet file"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink := NewParquetObjects(w.store, exec, tc.name)
			key := ObjectKey(tc.name, tc.job)
			w.put(key, tc.object)
			err := applyOnLoop(t, w.loop, sink, tc.job)
			if tc.words == nil {
				if err != nil || sink.Stats() != (ParquetStats{LegacyTrusted: 1}) {
					t.Fatalf("a legacy object of the job: %v, stats %+v; want success, trusted", err, sink.Stats())
				}
			} else {
				wantCollision(t, err, append(tc.words, "parquet-objects", key, tc.job.ID, tc.job.Content)...)
			}
			if keys := w.keys(tc.name + "/"); len(keys) != 1 || !bytes.Equal(w.get(key), tc.object) {
				t.Fatalf("objects %q: the existing object was replaced or joined", keys)
			}
		})
	}
}

// damagingStore flips a bit of the first occurrence of needle in the
// first GET answers it passes on.
type damagingStore struct {
	engine.ObjectStore
	needle string
	damage int // GETs still to damage
}

func (d *damagingStore) GetObject(in engine.GetObjectInput, done func([]byte, engine.ObjectInfo, error)) {
	d.ObjectStore.GetObject(in, func(b []byte, info engine.ObjectInfo, err error) {
		if i := bytes.Index(b, []byte(d.needle)); err == nil && d.damage > 0 && i >= 0 {
			d.damage--
			b = bytes.Clone(b)
			b[i] ^= 0x01
		}
		done(b, info, err)
	})
}

// A read damaged on the way makes the footer record another content; a
// second read disagrees, so the answer is an error to retry, never a
// collision, and the retry finds the job applied.
func TestParquetObjectsDamagedReadIsRetried(t *testing.T) {
	w := newSimWorld(t, 32, sim.StoreConfig{}, sim.DiskConfig{})
	f := newFixture(t, plainSpec)
	store := &damagingStore{ObjectStore: w.store.Client(w.inc), needle: f.job.Content}
	sink := NewParquetObjects(store, w.inc.Executor(), "lake")
	if err := w.apply(sink, f.job); err != nil {
		t.Fatal(err)
	}
	store.damage = 1
	wantRetryable(t, w.apply(sink, f.job), "disagree", f.job.ID)
	if err := w.apply(sink, f.job); err != nil {
		t.Fatalf("retry: %v", err)
	}
	// Damaged the same way twice, it is a collision: the bytes say so.
	store.damage = 2
	wantCollision(t, w.apply(sink, f.job), "the existing object holds job")
}

// The same on real files (storage.OSDisk).
func TestParquetDirTellsWhoseFileOverOSDisk(t *testing.T) {
	l, sink, _, dir := newOSDiskSink(t, "lake")
	f := newFixture(t, cdcSpec)
	if err := applyOnLoop(t, l, sink, f.job); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, filepath.FromSlash(sink.Path(f.job)))
	want := mustRead(t, name)
	if err := applyOnLoop(t, l, sink, f.job); err != nil {
		t.Fatalf("replay: %v", err)
	}
	err := applyOnLoop(t, l, sink, otherJob(f.job))
	wantCollision(t, err, "parquet-dir", sink.Path(f.job), f.job.ID, f.job.Content, "0badc0de", "pipeline fixture", "pipeline other")
	if !bytes.Equal(mustRead(t, name), want) {
		t.Fatal("the collision changed the existing file")
	}
	wantOnlyFile(t, filepath.Dir(name), f.job.ID+".parquet")
	if st := sink.Stats(); st != (ParquetStats{Replays: 1, Collisions: 1}) {
		t.Fatalf("stats %+v, want one replay and one collision", st)
	}

	for _, tc := range []struct {
		name  string
		job   *engine.Job
		file  []byte
		words []string // of the collision; nil: trusted
	}{
		{"legacy-same", f.job, legacyFile(t, f.job), nil},
		{"legacy-rows", newFixture(t, plainOneMoreRow).job, legacyFile(t, newFixture(t, plainSpec).job), []string{"12 rows, this job has 13"}},
		{"legacy-columns", newFixture(t, cdcAsPlain).job, legacyFile(t, f.job), []string{"columns (id int64"}},
		{"foreign", f.job, []byte("<html>not a Parquet file</html>"), []string{"is not a Parquet file"}},
		{"empty", f.job, nil, []string{"0 bytes are too few"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, sink, _, dir := newOSDiskSink(t, "")
			name := filepath.Join(dir, filepath.FromSlash(sink.Path(tc.job)))
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, tc.file, 0o644); err != nil {
				t.Fatal(err)
			}
			err := applyOnLoop(t, l, sink, tc.job)
			if tc.words == nil {
				if err != nil || sink.Stats() != (ParquetStats{LegacyTrusted: 1}) {
					t.Fatalf("a legacy file of the job: %v, stats %+v; want success, trusted", err, sink.Stats())
				}
			} else {
				wantCollision(t, err, append(tc.words, "parquet-dir", sink.Path(tc.job), tc.job.ID, tc.job.Content)...)
			}
			if !bytes.Equal(mustRead(t, name), tc.file) {
				t.Fatal("the existing file was changed")
			}
			wantOnlyFile(t, filepath.Dir(name), tc.job.ID+".parquet")
		})
	}
}

// On the simulated disk: a collision, then a read error while judging is
// an error to retry.
func TestParquetDirTellsWhoseFileSim(t *testing.T) {
	failReads := false
	faults := sim.DiskRules(sim.DiskFault(sim.DiskIOError, sim.DiskRead).While(&failReads))
	w := newSimWorld(t, 33, sim.StoreConfig{}, sim.DiskConfig{Faults: faults})
	f := newFixture(t, plainSpec)
	sink := NewParquetDir(w.disk.Client(w.inc), w.inc.Executor(), w.root.Split("sink"), "lake")
	if err := w.apply(sink, f.job); err != nil {
		t.Fatal(err)
	}
	wantCollision(t, w.apply(sink, otherJob(f.job)), "parquet-dir", "the existing file holds job")
	failReads = true
	wantRetryable(t, w.apply(sink, f.job), "reading the footer of the existing file")
	failReads = false
	if err := w.apply(sink, f.job); err != nil {
		t.Fatalf("replay: %v", err)
	}
	wantSimFile(t, w, sink, f.job)
	if st := sink.Stats(); st != (ParquetStats{Replays: 1, Collisions: 1}) {
		t.Fatalf("stats %+v", st)
	}
}

// Another job under the id of an Apply in flight does not join it (it
// would be answered with the first job's success): it is told to retry,
// and its retry finds the first job's file and refuses.
func TestParquetDirDoesNotJoinAnotherJob(t *testing.T) {
	w := newSimWorld(t, 34, sim.StoreConfig{}, sim.DiskConfig{})
	f := newFixture(t, plainSpec)
	sink := NewParquetDir(w.disk.Client(w.inc), w.inc.Executor(), w.root.Split("sink"), "lake")
	other := otherJob(f.job)
	var first, second error
	answered := 0
	applyChecked(t, sink, f.job, func(err error) { first = err; answered++ })
	applyChecked(t, sink, other, func(err error) { second = err; answered++ })
	w.drain()
	if answered != 2 || first != nil {
		t.Fatalf("answered %d, the first job: %v", answered, first)
	}
	wantRetryable(t, second, "another job under its id", "is being applied", other.Content)
	wantCollision(t, w.apply(sink, other), "the existing file holds job")
	wantSimFile(t, w, sink, f.job)
}
