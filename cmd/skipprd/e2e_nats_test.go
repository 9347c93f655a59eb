package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/internal/brokertest"
)

// The NATS source end to end against this machine's NATS server with
// JetStream: a stream of its own, the daemon SIGKILLed while it ingests,
// more messages published, and a restart that resumes from the stream
// sequence the WAL recovered — on the same disk, or (NewHost) on an
// empty one, the WAL on S3. After a graceful stop every message of the
// filtered subject is in the lake once, and none of the other.
func TestDaemonNATSKill(t *testing.T) { testNATSKill(t, false) }

func TestDaemonNATSNewHost(t *testing.T) { testNATSKill(t, true) }

func testNATSKill(t *testing.T, newHost bool) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-ingest")
	t.Parallel()
	url := brokertest.NATS(t)
	js, stream := natsTestStream(t, url, "E2E")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var want []string
	published := func() {
		t.Helper()
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			t.Fatal("publishing did not complete")
		}
	}
	// Published in runs of 1,000, each acknowledged before the next: the
	// client's window of unacknowledged messages (4,000) is never full,
	// however slow a server shared with other tests is.
	publishClicks := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if i > from && i%1000 == 0 {
				published()
			}
			id := fmt.Sprintf("c%06d", i)
			want = append(want, id)
			if _, err := js.PublishAsync(stream+".clicks", fmt.Appendf(nil, `{"aid": %q, "page": "/p/%d"}`, id, i%97)); err != nil {
				t.Fatal(err)
			}
			if i%10 == 0 {
				if _, err := js.PublishAsync(stream+".other", []byte(`{"aid": "not this one"}`)); err != nil {
					t.Fatal(err)
				}
			}
		}
		published()
	}
	publishClicks(0, 20_000)
	bin := buildDaemon(t)
	dataDir, conf, lake := t.TempDir(), t.TempDir(), t.TempDir()
	pipeline := filepath.Join(conf, "skipprd.yaml")
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: "+lake+", flush_interval: 1s}\nsources:\n"+
		"  - {name: clicks, kind: nats, url: '"+url+"', stream: "+stream+", subjects: ['"+stream+".clicks'], namespace: clicks, sink: lake}\n")
	env := []string{envPipelineFile + "=" + pipeline}
	if newHost {
		env = append(env, embeddedWALEnv(t)...)
	}
	p := startDaemon(t, bin, dataDir, env...)
	p.waitStdout(t, "rows acked", progressLines("acked", 1))
	p.kill(t)
	publishClicks(20_000, 30_000)
	if newHost {
		dataDir = t.TempDir() // nothing of the first host's disk
	}
	p = startDaemon(t, bin, dataDir, env...)
	slices.Sort(want)
	// A window of its own: under CI's load the source ingested a few
	// hundred messages a second, and 30,000 of them outran e2eWait. Likely
	// why (read, not profiled): it asks the server for the stream's first
	// sequence at every jump in sequence numbers — here every eleventh
	// message, the subject filtered out. The test is about exactly-once,
	// not speed.
	p.waitForWithin(t, "every message in the lake", natsLakeWait, func() bool { return len(lakeIDs(t, lake)["clicks"]) >= len(want) })
	p.stop(t)
	if got := lakeIDs(t, lake)["clicks"]; !slices.Equal(got, want) {
		t.Fatalf("lake holds %d rows, the subject %d messages: %s", len(got), len(want), firstDiff(got, want))
	}
}

// natsLakeWait is how long the NATS tests wait for the whole subject in
// the lake after the restart.
const natsLakeWait = 4 * time.Minute

// natsTestStream creates a stream of the test's own on url, over the
// subjects "{name}.>" (brokertest.NATSStream).
func natsTestStream(t *testing.T, url, prefix string) (jetstream.JetStream, string) {
	return brokertest.NATSStream(t, url, prefix, jetstream.StreamConfig{})
}
