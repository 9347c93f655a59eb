package natsjs

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/internal/brokertest"
)

const benchMessages = 20_000 // of each of two subjects

// BenchmarkNATSSource reads one of a stream's two subjects, whose
// messages alternate — so every message the consumer delivers is past
// one it filters out (a jump, jump.go) — beside the same source reading
// the whole stream in the same run, where nothing jumps. The ratio of
// their messages per second is what checking the jumps costs.
func BenchmarkNATSSource(b *testing.B) {
	url := brokertest.NATS(b)
	js, stream := brokertest.NATSStream(b, url, "B", jetstream.StreamConfig{})
	publishAlternating(b, js, stream)
	for _, c := range []struct {
		name     string
		subjects []string
		messages int
	}{{"whole-stream", nil, 2 * benchMessages}, {"one-subject-of-two", []string{stream + ".a"}, benchMessages}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				benchRead(b, url, stream, c.subjects, c.messages)
			}
			b.ReportMetric(float64(c.messages)*float64(b.N)/b.Elapsed().Seconds(), "messages/s")
		})
	}
}

// publishAlternating publishes benchMessages JSON messages on each of
// subjects .a and .b, alternating, and waits for every ack.
func publishAlternating(b *testing.B, js jetstream.JetStream, stream string) {
	for i := range benchMessages {
		for _, s := range []string{".a", ".b"} {
			if _, err := js.PublishAsync(stream+s, fmt.Appendf(nil, `{"id": %d, "note": "message %d of %s"}`, i, i, s)); err != nil {
				b.Fatal(err)
			}
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		b.Fatal("publishes not acked within a minute")
	}
}

// benchRead runs a source over subjects (none: all) until n messages
// are acked, into a host that acks each unit at once.
func benchRead(b *testing.B, url, stream string, subjects []string, n int) {
	src, err := New(Config{Name: "bench", URL: url, Stream: stream, Subjects: subjects, SinkRef: "lake", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var rows atomic.Int64
	err = src.Run(ctx, func(_ context.Context, u engine.Unit) error {
		for _, rec := range u.Batches {
			if rows.Add(rec.NumRows()) >= int64(n) {
				cancel()
			}
		}
		return nil
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if got := rows.Load(); got != int64(n) {
		b.Fatalf("%d messages of %d before the minute ran out", got, n)
	}
	if st := src.Stats(); st.Gaps != 0 || st.Retries != 0 {
		b.Fatalf("stats %+v: want no gap and no retry", st)
	}
}
