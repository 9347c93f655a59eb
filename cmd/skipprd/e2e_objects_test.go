package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/storage"
)

// The files and objects sources end to end: CSV and JSON-lines files
// dropped into a folder (or put under an S3 prefix of an embedded
// gofakes3 store, through the standard AWS variables), the daemon
// SIGKILLed while it ingests them, more files added, and a restart that
// resumes from the recovered offsets. After a graceful stop every row of
// every file is in the lake exactly once.
func TestDaemonFilesKill(t *testing.T) {
	testObjectsKill(t, false)
}

func TestDaemonObjectsKill(t *testing.T) {
	testObjectsKill(t, true)
}

func testObjectsKill(t *testing.T, onS3 bool) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-ingest")
	t.Parallel()
	bin := buildDaemon(t)
	dataDir := t.TempDir()
	conf := t.TempDir()
	source := "  - {name: drops, kind: files, path: incoming, namespace: drops, sink: lake, poll: 100ms}\n"
	put := func(name string, body []byte) {
		t.Helper()
		dir := filepath.Join(conf, "incoming")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		// Written under a temporary name, then renamed into view.
		tmp := filepath.Join(dir, "."+name)
		if err := os.WriteFile(tmp, body, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	var env []string
	if onS3 {
		const bucket = "landing"
		emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), bucket, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = emb.Close() })
		source = "  - {name: drops, kind: objects, bucket: " + bucket + ", prefix: in/, namespace: drops, sink: lake, poll: 100ms}\n"
		put = func(name string, body []byte) {
			t.Helper()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := emb.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket),
				Key: aws.String("in/" + name), Body: bytes.NewReader(body)}); err != nil {
				t.Fatal(err)
			}
		}
		env = append(env, s3Env(t, emb.Endpoint())...)
	}
	pipeline := filepath.Join(conf, "skipprd.yaml")
	// The lake's files come within a second: the test waits for them
	// before it stops the daemon.
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake, flush_interval: 1s}\nsources:\n"+source)
	env = append(env, envPipelineFile+"="+pipeline)

	var want []string
	addFiles := func(from, to int) {
		for f := from; f < to; f++ {
			body, ids := dropFile(f)
			want = append(want, ids...)
			put(fmt.Sprintf("f%03d.%s", f, []string{"csv", "jsonl"}[f%2]), body)
		}
	}
	addFiles(0, 20)
	p := startDaemon(t, bin, dataDir, env...)
	p.waitStdout(t, "rows acked", progressLines("acked", 1))
	p.kill(t)
	addFiles(20, 30)
	p = startDaemon(t, bin, dataDir, env...)
	lake := filepath.Join(dataDir, "lake")
	slices.Sort(want)
	p.waitFor(t, "every row in the lake", func() bool { return len(lakeIDs(t, lake)["drops"]) >= len(want) })
	p.stop(t)
	if got := lakeIDs(t, lake)["drops"]; !slices.Equal(got, want) {
		t.Fatalf("lake holds %d rows, the files %d: %s", len(got), len(want), firstDiff(got, want))
	}
}

// dropFile is file f's body — CSV for even f, JSON lines for odd — and
// its ids; its first column (alphabetically first for JSON) is the id.
func dropFile(f int) ([]byte, []string) {
	var b bytes.Buffer
	rows := 200 + f*37%300
	ids := make([]string, rows)
	if f%2 == 0 {
		b.WriteString("id,n,note\n")
	}
	for r := range rows {
		ids[r] = fmt.Sprintf("f%03d-r%04d", f, r)
		if f%2 == 0 {
			fmt.Fprintf(&b, "%s,%d,\"row, %d\"\n", ids[r], r, r)
		} else {
			fmt.Fprintf(&b, `{"id":%q,"n":%d,"note":"row %d"}`+"\n", ids[r], r, r)
		}
	}
	return b.Bytes(), ids
}

// A corrupt file stops the files source by default: the daemon shuts
// down gracefully with exit 1 and a message naming the file and line,
// after committing the good files before it; with on_error: skip it
// logs the file and goes on.
func TestDaemonFilesCorrupt(t *testing.T) {
	skipShortOrWindows(t, "builds and runs the daemon")
	t.Parallel()
	bin := buildDaemon(t)
	for _, mode := range []string{"stop", "skip"} {
		conf, dataDir := t.TempDir(), t.TempDir()
		in := filepath.Join(conf, "incoming")
		if err := os.MkdirAll(in, 0o755); err != nil {
			t.Fatal(err)
		}
		good, ids := dropFile(0)
		writeFile(t, filepath.Join(in, "a-good.csv"), string(good))
		writeFile(t, filepath.Join(in, "b-bad.csv"), "id,n\nx,1\ny,2,3\n")
		pipeline := filepath.Join(conf, "skipprd.yaml")
		writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: lake}\nsources:\n"+
			"  - {name: drops, kind: files, path: incoming, namespace: drops, sink: lake, poll: 100ms, on_error: "+mode+"}\n")
		p := startDaemon(t, bin, dataDir, envPipelineFile+"="+pipeline)
		reported := func(lines []string) bool {
			l := findLine(lines, "b-bad.csv")
			return strings.Contains(l, "line 3") && strings.Contains(l, "3 fields where the header has 2")
		}
		if mode == "stop" {
			err := <-p.exited
			p.exited <- err
			if err == nil || !strings.Contains(err.Error(), "exit status 1") || !reported(p.stderrLines()) {
				t.Fatalf("on_error stop: daemon exit %v, want 1 with the file and line named", err)
			}
		} else {
			p.waitStderr(t, "the bad file reported", reported)
			p.stop(t)
		}
		got := lakeIDs(t, filepath.Join(dataDir, "lake"))["drops"]
		slices.Sort(ids)
		if !slices.Equal(got, ids) {
			t.Fatalf("on_error %s: lake holds %d rows, the good file %d: %s", mode, len(got), len(ids), firstDiff(got, ids))
		}
	}
}
