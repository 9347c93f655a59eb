package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/storage"
)

// inspectWorld is a DATA_DIR and a pipeline file for the inspect tests:
// the generator (source offsets) and an HTTP source (idempotency keys)
// into a parquet-dir sink whose "orders" folder is a file, so the orders
// jobs fail and retry while the other namespaces' apply: segments stay
// live with part of their bitmaps set.
type inspectWorld struct {
	bin, dataDir string
	env          []string // the daemon's and inspect's environment, past cleanEnv
}

func newInspectWorld(t *testing.T, env ...string) inspectWorld {
	t.Helper()
	w := inspectWorld{bin: buildDaemon(t), dataDir: t.TempDir()}
	pipeline := filepath.Join(t.TempDir(), "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake}\n"+
		"sources:\n  - {name: gen, kind: generator, sink: lake}\n"+
		"  - {name: api, kind: http, sink: lake, listen: \"127.0.0.1:0\"}\n")
	if err := os.MkdirAll(filepath.Join(w.dataDir, lakeDir), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(w.dataDir, lakeDir, "orders"), "in the way")
	w.env = append(append([]string{envPipelineFile + "=" + pipeline}, quickLake...), env...)
	return w
}

// inspect runs skipprd inspect args on the world's DATA_DIR, as a user
// would, and returns its output and exit code.
func (w inspectWorld) inspect(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(w.bin, append([]string{"inspect"}, args...)...)
	cmd.Env = append(append(cleanEnv(), envDataDir+"="+w.dataDir), w.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

// report runs inspect --json and parses it back.
func (w inspectWorld) report(t *testing.T) inspectReport {
	t.Helper()
	out, errs, code := w.inspect(t, "--json")
	if code != exitOK {
		t.Fatalf("inspect --json: exit %d\n%s\n%s", code, errs, out)
	}
	var r inspectReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("inspect --json does not parse: %v\n%s", err, out)
	}
	return r
}

// halfApplied is the first segment some of whose parts are applied and
// some not, nil if none.
func halfApplied(r inspectReport) *inspectSegment {
	for i, s := range r.Segments {
		if s.Applied > 0 && s.Applied < len(s.Parts) {
			return &r.Segments[i]
		}
	}
	return nil
}

// End to end, the local-disk WAL: inspect while the daemon runs (it
// holds wal.lock) sees a segment half applied and leaves the daemon
// acking; after a kill -9 the text, --json and segment ID outputs name
// the segments, PARTs, bitmaps, offsets, keys and log files, and change
// nothing in DATA_DIR. Then damage: a body's PART header, and another
// body's payload, each reported naming the object, exit 1.
func TestInspectDaemonDiskWAL(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs it")
	w := newInspectWorld(t)
	p := startDaemon(t, w.bin, w.dataDir, w.env...)
	p.waitStderr(t, "the HTTP source listening", func(lines []string) bool { return listenAddr(lines) != "" })
	addr := listenAddr(p.stderrLines())
	for i := range 5 {
		postRows(t, addr, "api", i)
	}
	var running inspectReport
	p.waitFor(t, "inspect showing a half-applied segment and idempotency keys", func() bool {
		running = w.report(t)
		return halfApplied(running) != nil && running.Keys.Keys >= 5
	})
	checkHalfApplied(t, halfApplied(running))
	// The daemon, inspected, still acks.
	postRows(t, addr, "api", 5)
	acked := func(lines []string) uint64 { pr, _ := parseProgress(lastProgress(lines)); return pr["acked"] }
	before := acked(p.stdoutLines())
	p.waitStdout(t, "more rows acked after the inspect", func(lines []string) bool { return acked(lines) > before })
	p.kill(t)

	tree := settledSnapshot(t, w.dataDir)
	r := w.report(t)
	text, errs, code := w.inspect(t)
	if code != exitOK {
		t.Fatalf("inspect: exit %d\n%s", code, errs)
	}
	checkReport(t, r, text)
	seg := halfApplied(r)
	if seg == nil {
		t.Fatalf("after the kill no segment is half applied:\n%s", text)
	}
	checkHalfApplied(t, seg)
	checkSegmentDoc(t, w, *seg)
	if after := snapshotDir(t, w.dataDir); after != tree {
		t.Fatalf("inspect changed DATA_DIR: %s", lineDiff(tree, after))
	}
	checkDamage(t, w, r)
}

// checkHalfApplied: the parts of the blocked namespace are pending, the
// others applied, and the bitmap string says the same.
func checkHalfApplied(t *testing.T, s *inspectSegment) {
	t.Helper()
	if !s.BitmapObject || len(s.Bitmap) != len(s.Parts) {
		t.Fatalf("segment %s: bitmap %q of %d parts (object %v)", s.ID, s.Bitmap, len(s.Parts), s.BitmapObject)
	}
	for _, p := range s.Parts {
		if p.Applied != (p.Namespace != "orders") || (s.Bitmap[p.Ordinal] == '1') != p.Applied {
			t.Fatalf("segment %s part %d (%s): applied %v, bitmap %q: want orders pending, the rest applied", s.ID, p.Ordinal, p.Namespace, p.Applied, s.Bitmap)
		}
	}
}

// checkReport checks the JSON report of the killed daemon and that the
// text output names the same things.
func checkReport(t *testing.T, r inspectReport, text string) {
	t.Helper()
	if !r.ReadOnly || r.Pipeline != defaultPipeline || r.WALStorage != "disk" || len(r.Segments) == 0 || len(r.Problems) > 0 {
		t.Fatalf("report: read_only %v, pipeline %q, wal %q, %d segments, problems %q", r.ReadOnly, r.Pipeline, r.WALStorage, len(r.Segments), r.Problems)
	}
	if len(r.Offsets.Committed) == 0 || r.Log == nil || len(r.Log.Partitions) == 0 || len(r.Log.Partitions[0].Files) == 0 {
		t.Fatalf("report: committed offsets %v, log %+v", r.Offsets.Committed, r.Log)
	}
	if r.Keys.Keys < 5 || r.Keys.Buckets == 0 || r.Keys.WindowSeconds != 24*3600 {
		t.Fatalf("report: idempotency keys %+v, want at least the 5 requests' the running inspect saw, in the 24 h window", r.Keys)
	}
	says := []string{"read-only", "orphans: 0", "multipart uploads in progress: 0", r.Log.Partitions[0].Files[0].Name, "idempotency keys: "}
	for _, s := range r.Segments {
		says = append(says, "segment "+s.ID, s.Marker, fmt.Sprintf("[%s]", s.Bitmap))
		for _, p := range s.Parts {
			says = append(says, fmt.Sprintf("PART %d  sink %s  namespace %s  partition %q  rows %d  bytes %d", p.Ordinal, p.Sink, p.Namespace, p.Partition, p.Rows, p.Bytes))
		}
	}
	for _, o := range r.Offsets.Committed {
		says = append(says, fmt.Sprintf("  %s = %d\n", o.Key, o.Value))
		if !strings.HasPrefix(o.Key, "gen/") && !strings.HasPrefix(o.Key, "generator/") {
			t.Fatalf("committed offset %s=%d: not the generator's", o.Key, o.Value)
		}
	}
	for _, s := range says {
		if !strings.Contains(text, s) {
			t.Fatalf("the text output does not say %q:\n%s", s, text)
		}
	}
}

// checkSegmentDoc decodes s with inspect segment ID, text and JSON.
func checkSegmentDoc(t *testing.T, w inspectWorld, s inspectSegment) {
	t.Helper()
	out, errs, code := w.inspect(t, "segment", s.ID, "--json")
	if code != exitOK {
		t.Fatalf("inspect segment %s --json: exit %d\n%s", s.ID, code, errs)
	}
	var doc inspectSegmentDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("inspect segment --json does not parse: %v\n%s", err, out)
	}
	if !doc.ReadOnly || doc.ID != s.ID || len(doc.Index) != len(s.Parts) || len(doc.BodySHA256) != 64 || doc.Bitmap != s.Bitmap || len(doc.Offsets) == 0 {
		t.Fatalf("inspect segment %s: %+v", s.ID, doc)
	}
	for i, e := range doc.Index {
		if e.Rows != s.Parts[i].Rows || e.ArrowLen+e.SidecarLen != s.Parts[i].Bytes || !strings.Contains(e.Key, "/"+s.Parts[i].Namespace+"/") {
			t.Fatalf("index entry %d %+v, part %+v", i, e, s.Parts[i])
		}
	}
	text, errs, code := w.inspect(t, "segment", s.ID)
	if code != exitOK || !strings.Contains(text, "verified against its commit marker") || !strings.Contains(text, "index: "+fmt.Sprint(len(s.Parts))+" entries") {
		t.Fatalf("inspect segment %s: exit %d\n%s\n%s", s.ID, code, text, errs)
	}
}

// checkDamage breaks two bodies of r's segments in the local segment
// store: the first's first PART header (the overview reads every body's
// index), the last's payload (only the checksum inspect segment ID
// verifies sees it). Each is reported naming the body, exit 1.
func checkDamage(t *testing.T, w inspectWorld, r inspectReport) {
	t.Helper()
	first, last := r.Segments[0], r.Segments[len(r.Segments)-1]
	if first.ID == last.ID {
		t.Fatalf("one live segment only (%s): no second body to damage", first.ID)
	}
	flipByte(t, w.bodyFile(t, last), func(b []byte) int { return len(b) / 2 })
	out, errs, code := w.inspect(t, "segment", last.ID)
	if code != exitFail || !strings.Contains(errs, strings.TrimSuffix(last.Marker, ".commit")) {
		t.Fatalf("inspect segment of a damaged body: exit %d, want 1 naming the body\n%s\n%s", code, errs, out)
	}
	flipByte(t, w.bodyFile(t, first), func(b []byte) int { return bytes.Index(b, []byte("PART")) + 4 })
	out, errs, code = w.inspect(t)
	body := strings.TrimSuffix(first.Marker, ".commit")
	if code != exitFail || !strings.Contains(out, "problems: 1") || !strings.Contains(out, body) || !strings.Contains(errs, "1 problem(s)") {
		t.Fatalf("inspect of a damaged PART header: exit %d, want 1 naming %s\n%s\n%s", code, body, errs, out)
	}
	if strings.Contains(out, "segment "+first.ID+" ") {
		t.Fatalf("the damaged segment %s is listed as live:\n%s", first.ID, out)
	}
}

// bodyFile is the local segment store's file of s's body.
func (w inspectWorld) bodyFile(t *testing.T, s inspectSegment) string {
	t.Helper()
	key := strings.TrimSuffix(s.Marker, ".commit")
	path := filepath.Join(w.dataDir, segmentsDir, "objects")
	elems := strings.Split(key, "/")
	for _, e := range elems[:len(elems)-1] {
		path = filepath.Join(path, e+".d")
	}
	path = filepath.Join(path, elems[len(elems)-1]+".o")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the body of %s: %v", s.ID, err)
	}
	return path
}

// flipByte inverts the byte of path at the offset at picks.
func flipByte(t *testing.T, path string, at func([]byte) int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := at(b)
	if i < 4 || i >= len(b) {
		t.Fatalf("%s: no byte %d to flip in %d", path, i, len(b))
	}
	b[i] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The embedded store: while the daemon holds its file inspect says so
// and exits 1, leaving it running; after a kill -9 it lists the live
// segments with their bitmaps, decodes one, and changes nothing.
func TestInspectDaemonEmbedded(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs it")
	w := newInspectWorld(t, envWALStorage+"=embedded")
	p := startDaemon(t, w.bin, w.dataDir, w.env...)
	p.waitStdout(t, "live segments", func(lines []string) bool {
		pr, ok := parseProgress(lastProgress(lines))
		return ok && pr["live_segments"] >= 2 && pr["applied"] > 0
	})
	_, errs, code := w.inspect(t)
	if code != exitFail || !strings.Contains(errs, "in use by another process") {
		t.Fatalf("inspect of a running embedded store: exit %d, want 1 saying it is in use\n%s", code, errs)
	}
	pr, _ := parseProgress(lastProgress(p.stdoutLines()))
	p.waitStdout(t, "more rows acked after the inspect", func(lines []string) bool {
		now, _ := parseProgress(lastProgress(lines))
		return now["acked"] > pr["acked"]
	})
	p.kill(t)
	tree := settledSnapshot(t, w.dataDir)
	r := w.report(t)
	if r.WALStorage != "embedded" || r.Log != nil || len(r.Segments) == 0 || len(r.Problems) > 0 || !strings.Contains(r.Store, embeddedFile) {
		t.Fatalf("report of the embedded store: %+v", r)
	}
	if halfApplied(r) != nil {
		checkHalfApplied(t, halfApplied(r))
	}
	checkSegmentDoc(t, w, r.Segments[0])
	if after := snapshotDir(t, w.dataDir); after != tree {
		t.Fatalf("inspect changed DATA_DIR: %s", lineDiff(tree, after))
	}
}

// The command line's errors, in process: nothing is opened or created.
func TestInspectUsage(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	for _, c := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no DATA_DIR", []string{"inspect", "--data-dir", missing}, exitFail, "DATA_DIR " + missing + " does not exist"},
		{"no DATA_DIR, segment", []string{"inspect", "segment", "000000000001-000000000001", "--data-dir", missing}, exitFail, "does not exist"},
		{"segment without ID", []string{"inspect", "segment", "--data-dir", missing}, exitUsage, "want one segment ID"},
		{"segment, two IDs", []string{"inspect", "segment", "a", "b"}, exitUsage, "got 2"},
		{"bad ID", []string{"inspect", "segment", "12-4", "--data-dir", missing}, exitUsage, `"12-4" is not a segment ID`},
		{"unknown argument", []string{"inspect", "segments"}, exitUsage, `unknown argument "segments"`},
		{"unknown flag", []string{"inspect", "--once"}, exitUsage, "flag provided but not defined"},
		{"bad setting", []string{"inspect", "--wal-storage", "tape", "--data-dir", missing}, exitUsage, "WAL_STORAGE"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var out, errs bytes.Buffer
			code := cli(context.Background(), c.args, func(string) string { return "" }, &out, &errs)
			if code != c.code || !strings.Contains(errs.String(), c.says) {
				t.Fatalf("exit %d, want %d; stderr should say %q:\n%s", code, c.code, c.says, errs.String())
			}
			if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s was created (%v)", missing, err)
			}
		})
	}
}

// An empty DATA_DIR: nothing to show, exit 0, nothing created in it.
func TestInspectEmptyDataDir(t *testing.T) {
	dir := t.TempDir()
	var out, errs bytes.Buffer
	code := cli(context.Background(), []string{"inspect", "--data-dir", dir}, func(string) string { return "" }, &out, &errs)
	if code != exitOK || !strings.Contains(out.String(), "live segments: 0") || !strings.Contains(out.String(), "does not exist: nothing committed there") {
		t.Fatalf("exit %d:\n%s\n%s", code, out.String(), errs.String())
	}
	out.Reset()
	errs.Reset()
	code = cli(context.Background(), []string{"inspect", "segment", "000000000001-000000000001", "--data-dir", dir}, func(string) string { return "" }, &out, &errs)
	if code != exitFail || !strings.Contains(errs.String(), "no such live segment: 000000000001-000000000001") {
		t.Fatalf("inspect segment in an empty DATA_DIR: exit %d, want 1:\n%s", code, errs.String())
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("inspect created %v in DATA_DIR", names)
	}
}

// The S3 WAL, on a bucket this test serves: inspect reads it while the
// daemon runs (no lock to meet) and after a kill -9, and reports an
// object no marker accounts for (a body put here without one) and a
// multipart upload left in progress, as a crashed writer leaves them.
func TestInspectDaemonS3(t *testing.T) {
	skipShortOrWindows(t, "builds the daemon and runs it")
	const bucket = "wal-bucket"
	emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), bucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	w := newInspectWorld(t, append(s3Env(t, emb.Endpoint()), envWALStorage+"=s3", envWALBucket+"="+bucket, envS3Timeout+"=2")...)
	p := startDaemon(t, w.bin, w.dataDir, w.env...)
	p.waitFor(t, "inspect showing two live segments while the daemon runs", func() bool { return len(w.report(t).Segments) >= 2 })
	p.kill(t)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := engine.NewLayout(defaultWALPrefix, defaultPipeline).SegmentDir(time.Now().UnixMilli())
	orphan, upload := dir+"000000000099-000000000001.seg", dir+"000000000099-000000000002.seg"
	client := emb.Client()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(orphan), Body: strings.NewReader("no marker")}); err != nil {
		t.Fatal(err)
	}
	up, err := client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(upload)})
	if err != nil {
		t.Fatal(err)
	}
	r := w.report(t)
	if r.WALStorage != "s3" || r.Log != nil || len(r.Segments) < 2 || len(r.Problems) > 0 || r.Store != "bucket s3://"+bucket {
		t.Fatalf("report of the bucket: %+v", r)
	}
	if len(r.Orphans) != 1 || r.Orphans[0].Key != orphan || len(r.Uploads) != 1 || r.Uploads[0].Key != upload || r.Uploads[0].UploadID != aws.ToString(up.UploadId) {
		t.Fatalf("orphans %+v, uploads %+v: want %s and an upload to %s", r.Orphans, r.Uploads, orphan, upload)
	}
	text, errs, code := w.inspect(t)
	if code != exitOK || !strings.Contains(text, "orphans: 1\n  "+orphan) || !strings.Contains(text, "multipart uploads in progress: 1\n  "+upload) {
		t.Fatalf("inspect: exit %d\n%s\n%s", code, text, errs)
	}
	checkSegmentDoc(t, w, r.Segments[len(r.Segments)-1])
}
