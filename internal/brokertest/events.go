package brokertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceEvents produces n JSON records of about 200 bytes — click
// events, ids 0..n-1, keyed by id — round robin to topic's partitions of
// the Kafka cluster at seeds, and returns their values' bytes. The
// Kafka benchmarks read them.
func ProduceEvents(tb testing.TB, seeds []string, topic string, n int) int64 {
	tb.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		tb.Fatal(err)
	}
	defer cl.Close()
	var total int64
	for at := 0; at < n; at += 10_000 {
		recs := make([]*kgo.Record, min(10_000, n-at))
		for i := range recs {
			id := at + i
			v := fmt.Appendf(nil, `{"id":%d,"user":"user-%d","event":"page_view","path":"/products/%d","amount":%d.5,"ok":true,"note":"a row of about two hundred bytes, as a webhook or a click event is"}`,
				id, id%977, id%3301, id%101)
			total += int64(len(v))
			recs[i] = &kgo.Record{Topic: topic, Key: fmt.Append(nil, id), Value: v}
		}
		if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			tb.Fatal(err)
		}
	}
	return total
}
