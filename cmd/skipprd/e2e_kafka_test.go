package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/skipprd/skipprd/internal/brokertest"
	"github.com/skipprd/skipprd/storage"
)

// The Kafka source end to end: a three-broker kfake cluster (the real
// protocol, in this process) whose fetches fail now and then, a topic
// of four partitions, the daemon SIGKILLed while it ingests, more
// records produced, and a restart that resumes from the offsets the WAL
// recovered — on the local-disk WAL, or on an S3 WAL with the restart on
// a new host (an empty DATA_DIR), or (stopped, not killed) with the
// topic found by topic_regex and its partitions assigned by a consumer
// group. After a graceful stop
// every record is in the lake once (lakeIDs reads the first column:
// "aid" sorts first); in the group, its committed offsets are the ends.
func TestDaemonKafkaKill(t *testing.T) { testKafkaKill(t, false, false) }

func TestDaemonKafkaNewHost(t *testing.T) { testKafkaKill(t, true, false) }

func TestDaemonKafkaGroup(t *testing.T) { testKafkaKill(t, false, true) }

func testKafkaKill(t *testing.T, newHost, group bool) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-ingest")
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(3), kfake.SeedTopics(4, "shop.orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Fetches fail now and then, from the second on: the records are all
	// produced before the daemon starts, so a run may need only a few
	// fetches (each brings many records), and the fault must meet one.
	var fetches, injected atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if n := fetches.Add(1); n%50 == 2 && n < 400 {
			injected.Add(1)
			return nil, errors.New("injected: the broker drops the connection"), true
		}
		return nil, nil, false
	})
	var want []string
	produceOrders := func(from, to int) {
		t.Helper()
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			id := fmt.Sprintf("o%06d", i)
			want = append(want, id)
			recs = append(recs, &kgo.Record{Topic: "shop.orders", Key: []byte(id),
				Value: fmt.Appendf(nil, `{"aid": %q, "amount": %d, "note": "order %d"}`, id, i%997, i)})
		}
		produceSync(t, c, recs)
	}
	produceOrders(0, 20_000)
	bin := buildDaemon(t)
	dataDir, conf, lake := t.TempDir(), t.TempDir(), t.TempDir()
	pipeline := filepath.Join(conf, "skipprd.yaml")
	topics := "topics: [shop.orders]"
	if group {
		topics = `topic_regex: 'shop\.ord.*', group: lake-loaders`
	}
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: "+lake+", flush_interval: 1s}\nsources:\n"+
		"  - {name: orders, kind: kafka, brokers: ["+strings.Join(c.ListenAddrs(), ", ")+"], "+topics+", sink: lake}\n")
	env := []string{envPipelineFile + "=" + pipeline}
	if newHost {
		env = append(env, embeddedWALEnv(t)...)
	}
	p := startDaemon(t, bin, dataDir, env...)
	p.waitStdout(t, "rows acked", progressLines("acked", 1))
	if group {
		// Stopped, not killed: a killed member keeps its partitions until
		// its session times out (45 s), which only makes the test slow.
		p.stop(t)
	} else {
		p.kill(t)
	}
	produceOrders(20_000, 30_000)
	if newHost {
		dataDir = t.TempDir() // nothing of the first host's disk
	}
	p = startDaemon(t, bin, dataDir, env...)
	slices.Sort(want)
	p.waitFor(t, "every record in the lake", func() bool { return len(lakeIDs(t, lake)["shop_orders"]) >= len(want) })
	// Caught up: every partition's lag is 0 in the metrics.
	admin := "http://" + adminAddr(t, p) + "/metrics"
	p.waitFor(t, "no lag", func() bool {
		code, body := get(t, admin)
		m := parseMetrics(t, body)
		for part := range 4 {
			v, ok := m[fmt.Sprintf(`skipprd_kafka_lag_records{partition="%d",source="orders",topic="shop.orders"}`, part)]
			if code != http.StatusOK || !ok || v != 0 {
				return false
			}
		}
		return m[`skipprd_kafka_gaps_total{source="orders"}`] == 0 &&
			(!group || m[`skipprd_kafka_group_commits_total{outcome="ok",source="orders"}`] > 0)
	})
	p.stop(t)
	if group {
		wantGroupAtEnds(t, c, "lake-loaders", "shop.orders")
	}
	if got := lakeIDs(t, lake)["shop_orders"]; !slices.Equal(got, want) {
		t.Fatalf("lake holds %d rows, the topic %d records: %s", len(got), len(want), firstDiff(got, want))
	}
	if injected.Load() == 0 {
		t.Errorf("only %d fetches reached the cluster: no fault was injected", fetches.Load())
	}
}

// wantGroupAtEnds checks that group g's committed offsets of topic are
// its partitions' ends.
func wantGroupAtEnds(t *testing.T, c *kfake.Cluster, g, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := adm.FetchOffsets(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := committed.Lookup(topic, e.Partition); !ok || o.Err != nil || o.At != e.Offset {
			t.Errorf("group %s, partition %d: committed %+v, want the end %d", g, e.Partition, o, e.Offset)
		}
	})
}

// embeddedWALEnv starts an embedded S3 server for the test and returns
// the daemon's environment for a WAL in it (s3WALEnv): what a new host
// with an empty disk recovers from.
func embeddedWALEnv(t *testing.T) []string {
	t.Helper()
	emb, err := storage.StartEmbeddedS3(filepath.Join(t.TempDir(), "s3.bolt"), loudBucket, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = emb.Close() })
	return s3WALEnv(t, emb.Endpoint())
}

// produceSync writes recs to c, round-robin over their topics'
// partitions, and waits for every one to be acknowledged.
func produceSync(t *testing.T, c *kfake.Cluster, recs []*kgo.Record) {
	brokertest.KafkaProduce(t, c, kgo.RoundRobinPartitioner(), recs...)
}
