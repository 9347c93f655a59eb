package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Small objects through the objects source of the real daemon (in
// process, a local Parquet lake), on gofakes3 over HTTP: objects/s from
// the daemon's start to every row acked, on the local-disk WAL and the
// S3 WAL (same gofakes3), one object in flight and 32; beside a bare
// SDK loop that lists the same prefix and GETs every object from 32
// goroutines (the floor: reading them), in the same run. Each run is
// one op of its own size; objects/s is the figure.
func BenchmarkObjectsIngest(b *testing.B) {
	const bucket = "landing"
	backend := s3mem.New()
	if err := backend.CreateBucket(bucket); err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(gofakes3.New(backend).Server())
	b.Cleanup(srv.Close)
	for _, c := range []struct {
		name     string
		objects  int
		wal      string
		inFlight int
	}{
		{"bare", 5000, "", 32},
		{"disk-wal/in-flight-1", 2000, "disk", 1},
		{"disk-wal/in-flight-32", 5000, "disk", 32},
		{"s3-wal/in-flight-1", 100, "s3", 1},
		{"s3-wal/in-flight-32", 5000, "s3", 32},
	} {
		prefix := strings.ReplaceAll(c.name, "/", "-") + "/"
		for i := range c.objects {
			body := fmt.Appendf(nil, `{"id":"o%06d","n":%d,"note":"a small log line"}`+"\n", i, i)
			if _, err := backend.PutObject(bucket, fmt.Sprintf("%s%06d.jsonl", prefix, i), nil, bytes.NewReader(body), int64(len(body)), nil); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			start := time.Now()
			if c.wal == "" {
				bareReadAll(b, srv.URL, bucket, prefix, c.objects, c.inFlight)
			} else {
				benchObjectsDaemon(b, srv.URL, bucket, prefix, c.objects, c.wal, c.inFlight)
			}
			b.ReportMetric(float64(c.objects)/time.Since(start).Seconds(), "objects/s")
		})
	}
}

// bareReadAll lists prefix and GETs each of its n objects from workers
// goroutines with the SDK, as the objects source's store does.
func bareReadAll(b *testing.B, endpoint, bucket, prefix string, n, workers int) {
	client := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: aws.AnonymousCredentials{}})
	ctx := context.Background()
	keys := make(chan string, 1000)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for k := range keys {
				out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
				if err != nil {
					b.Error(err)
					continue
				}
				_, _ = io.Copy(io.Discard, out.Body)
				out.Body.Close()
			}
		})
	}
	got := 0
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range page.Contents {
			keys <- aws.ToString(o.Key)
			got++
		}
	}
	close(keys)
	wg.Wait()
	if got != n {
		b.Fatalf("listed %d objects, put %d", got, n)
	}
}

// benchObjectsDaemon runs the daemon over prefix until its n rows are
// acked.
func benchObjectsDaemon(b *testing.B, endpoint, bucket, prefix string, n int, wal string, inFlight int) {
	env := map[string]string{envWALStorage: wal}
	if wal == "s3" {
		env[envWALBucket] = bucket
	}
	for _, kv := range s3Env(b, endpoint) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	d := startBenchDaemonWith(b, func(lake string) string {
		return "sinks:\n  lake: {kind: parquet-dir, path: " + lake + "}\nsources:\n" +
			fmt.Sprintf("  - {name: logs, kind: objects, bucket: %s, prefix: %s, namespace: logs, sink: lake, poll: 100ms, "+
				"order: keys, in_flight: %d}\n", bucket, prefix, inFlight)
	}, env)
	d.waitAcked(b, "logs", n)
	d.stop(b)
}
