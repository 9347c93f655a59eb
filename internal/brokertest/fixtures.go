package brokertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NATSStream creates a JetStream stream of the test's own on url, named
// prefix and the time, over the subjects "{name}.>", with cfg's limits
// (its Name and Subjects are set here); it is deleted, and the
// connection closed, at the test's end.
func NATSStream(t testing.TB, url, prefix string, cfg jetstream.StreamConfig) (jetstream.JetStream, string) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano())
	cfg.Name, cfg.Subjects = name, []string{name + ".>"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := js.CreateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	return js, name
}

// KafkaProduce writes recs to the in-process cluster c through a client
// with partitioner p, and waits for every one to be acknowledged.
func KafkaProduce(t testing.TB, c *kfake.Cluster, p kgo.Partitioner, recs ...*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(p))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
