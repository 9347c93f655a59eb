package storage

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// BenchmarkRecoveryLanesWaiting measures recovery of an S3 WAL whose
// segments — 256 units of 1 MiB, as many segments as the writer made of
// them (a hundred or more) — are all held by lanes waiting to fill their
// files (jobs spanning segments, file_bytes far away, an hour's flush
// interval): nothing was applied, so every segment is live and every
// namespace's open job spans all of them.
// Against gofakes3 in process, through the real SDK client.
//
//   - recover: a new Host on the same bucket, timed from Start to ready
//     (FenceWait 0: the wait for a dead writer's requests is a constant,
//     not a cost of the log); it must own every segment and find the
//     open jobs again.
//   - sequential-marker-reads: the baseline, a GET of every marker, one
//     after the other, through the same client.
//
// Both report segments/s; the ratio says what recovery costs beyond the
// reads it cannot avoid (a LIST, the writer claim, the offsets
// checkpoint, a GET of every segment's bitmap — none exists yet). Recovery stays
// bounded by live segments while lanes wait: cuts travel in markers.
func BenchmarkRecoveryLanesWaiting(b *testing.B) {
	const segs = 256
	client, _, _ := e2eStore(b)
	ctx := context.Background()
	cfg := recoveryBenchConfig()
	h := newWALHostWith(b, cfg, client, e2eRequestTimeout, nil) // no sink: nothing is applied, nothing reclaimed
	if err := h.Start(ctx); err != nil {
		b.Fatal(err)
	}
	pool := newE2EPool()
	for i := range segs {
		u := pool.unit(i)
		u.Offsets = segment.Offsets{{Key: "bench/rec", Value: uint64(i + 1)}}
		if _, err := ingestUntilTaken(ctx, h, u, time.Millisecond); err != nil {
			b.Fatal(err)
		}
	}
	st, err := h.Stats(ctx)
	// Most lanes wait; one may have been cut by memory (a job is at most a
	// quarter of the body cache): without a sink its job stays pending.
	if err != nil || st.LiveSegments < 32 || len(st.OpenJobs) < len(walNamespaces)/2 {
		b.Fatalf("before the crash: %d segments live, %d open jobs (%v)", st.LiveSegments, len(st.OpenJobs), err)
	}
	live, open := st.LiveSegments, len(st.OpenJobs)
	h.Kill() // a crash: nothing applied, every lane waiting
	b.Run(fmt.Sprintf("segments=%d/recover", live), func(b *testing.B) {
		for range b.N {
			r := newWALHostWith(b, cfg, client, e2eRequestTimeout, nil)
			start := time.Now()
			if err := r.Start(ctx); err != nil {
				b.Fatal(err)
			}
			elapsed := time.Since(start)
			st, err := r.Stats(ctx)
			r.Kill()
			if err != nil || st.LiveSegments != live || len(st.OpenJobs) != open {
				b.Fatalf("recovered %d segments (want %d), %d open jobs (want %d): %v", st.LiveSegments, live, len(st.OpenJobs), open, err)
			}
			b.ReportMetric(float64(live)/elapsed.Seconds(), "segments/s")
		}
	})
	b.Run(fmt.Sprintf("segments=%d/sequential-marker-reads", live), func(b *testing.B) {
		keys := markerKeys(b, ctx, client)
		if len(keys) != live {
			b.Fatalf("%d markers listed, %d segments live", len(keys), live)
		}
		for range b.N {
			start := time.Now()
			for _, k := range keys {
				readObject(b, ctx, client, k)
			}
			b.ReportMetric(float64(len(keys))/time.Since(start).Seconds(), "segments/s")
		}
	})
}

// recoveryBenchConfig: small segments (64 KiB, so a few hundred commit
// quickly), lanes that wait, and no fence wait.
func recoveryBenchConfig() engine.Config {
	cfg := engine.DeriveConfig("wal", "bench-recovery", e2eTargetBytes, e2eWriters, 0)
	cfg.TargetBytes = 64 << 10
	cfg.FenceWait = 0
	cfg.DefaultLanes = engine.LaneLimits{FileBytes: 1 << 30, FlushInterval: time.Hour}
	return cfg
}

// markerKeys lists the WAL's commit markers.
func markerKeys(b *testing.B, ctx context.Context, client *s3.Client) []string {
	var out []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(testBucket), Prefix: aws.String("wal/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			if strings.HasSuffix(*o.Key, ".seg.commit") {
				out = append(out, *o.Key)
			}
		}
	}
	return out
}
