package storage

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/skipprd/skipprd/sinks"
)

// benchE2EFloor is BenchmarkE2E's pipeline-floor: the least work the
// pipeline's path needs for the same rows, each step timed on its own
// and the times summed — the bytes uploaded as e2eTargetBytes objects
// (e2eRawUpload), every object read back once, the rows encoded to
// Parquet by the lake's encoder (sinks.EncodeBatches) as a job per
// segment and namespace, and every file PUT; e2eRawParts requests in
// flight for each step of I/O. Nothing is decoded, reclaimed or
// committed: the pipeline's target is half of this.
func benchE2EFloor(b *testing.B, pool *e2ePool, units int) {
	total := int64(units) * pool.unitBytes
	b.SetBytes(total)
	part := rawPart()
	var tot e2eTotals
	for range b.N {
		b.StopTimer()
		client, counter, closeStore := e2eStore(b)
		var steps [4]time.Duration
		timed := func(i int, step func()) {
			b.StartTimer()
			start := time.Now()
			step()
			steps[i] = time.Since(start)
			b.StopTimer()
		}
		timed(0, func() { e2eRawUpload(b, client, part, total) })
		timed(1, func() { e2eReadAll(b, client, int((total+e2eTargetBytes-1)/e2eTargetBytes)) })
		var files [][]byte
		timed(2, func() { files = e2eEncodeJobs(b, pool, units) })
		timed(3, func() { e2ePutAll(b, client, files) })
		var elapsed time.Duration
		for _, d := range steps {
			elapsed += d
		}
		b.Logf("floor: upload %v, read %v, encode %d files %v, put %v",
			steps[0].Round(time.Millisecond), steps[1].Round(time.Millisecond), len(files),
			steps[2].Round(time.Millisecond), steps[3].Round(time.Millisecond))
		tot.add(pool, units, counter, elapsed)
		closeStore()
	}
	b.StartTimer()
	tot.report(b, false)
}

// e2eReadAll GETs raw/000000 … raw/{objects-1}, e2eRawParts at a time.
func e2eReadAll(b *testing.B, client *s3.Client, objects int) {
	e2eEach(objects, func(o int) {
		readObject(b, context.Background(), client, fmt.Sprintf("raw/%06d", o))
	})
}

// e2eEncodeJobs encodes the units as the lake would with a job per
// segment: units of one e2eTargetBytes segment and one namespace make a
// file.
func e2eEncodeJobs(b *testing.B, pool *e2ePool, units int) [][]byte {
	perSegment := int(e2eTargetBytes / pool.unitBytes)
	var files [][]byte
	for first := 0; first < units; first += perSegment {
		for ns := range walNamespaces {
			out, err := sinks.EncodeBatches(walSchema, nil, func(write func(arrow.RecordBatch) error) error {
				for i := first; i < min(first+perSegment, units); i++ {
					if i%len(walNamespaces) == ns {
						if err := write(pool.unit(i).Batches[0]); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			files = append(files, out)
		}
	}
	return files
}

// e2ePutAll PUTs each file, e2eRawParts at a time.
func e2ePutAll(b *testing.B, client *s3.Client, files [][]byte) {
	e2eEach(len(files), func(i int) {
		in := &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: aws.String(fmt.Sprintf("floor/%06d.parquet", i)),
			Body: bytes.NewReader(files[i]), ContentLength: aws.Int64(int64(len(files[i])))}
		if _, err := client.PutObject(context.Background(), in, noRetries); err != nil {
			b.Error(err)
		}
	})
}

// e2eEach runs fn(0) … fn(n-1) on e2eRawParts goroutines.
func e2eEach(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range e2eRawParts {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				fn(i)
			}
		})
	}
	wg.Wait()
}
