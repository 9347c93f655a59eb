package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/skipprd/skipprd/internal/brokertest"
)

// The MQTT source end to end against this machine's Mosquitto: a
// persistent session with ids in the messages, the daemon SIGKILLed
// while it ingests (messages committed whose acknowledgements the kill
// lost, and messages never acknowledged), more published while it is
// down, and a restart — on the same disk, or (NewHost) on an empty one,
// the WAL on S3 and the session on the broker: the broker sends again
// what was not acknowledged, and the ids make every message land in the
// lake once.
func TestDaemonMQTTKill(t *testing.T) { testMQTTKill(t, false) }

func TestDaemonMQTTNewHost(t *testing.T) { testMQTTKill(t, true) }

func testMQTTKill(t *testing.T, newHost bool) {
	skipShortOrWindows(t, "builds the daemon and kills it mid-ingest")
	t.Parallel()
	url := brokertest.MQTT(t)
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprint("e2e-pub-", time.Now().UnixNano())))
	if tok := pub.Connect(); !tok.WaitTimeout(3*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	topic := fmt.Sprintf("skipprd-e2e/%d/readings", time.Now().UnixNano())
	var want []string
	publishReadings := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			id := fmt.Sprintf("r%05d", i)
			want = append(want, id)
			tok := pub.Publish(topic, 1, false, fmt.Sprintf(`{"aid": %q, "celsius": %d.5}`, id, i%40))
			if !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
				t.Fatalf("publish: %v", tok.Error())
			}
		}
	}
	bin := buildDaemon(t)
	dataDir, conf, lake := t.TempDir(), t.TempDir(), t.TempDir()
	pipeline := filepath.Join(conf, "skipprd.yaml")
	name := fmt.Sprintf("sensors-%d", time.Now().UnixNano()%1_000_000) // a session of its own
	writeFile(t, pipeline, "sinks:\n  lake: {kind: parquet-dir, path: "+lake+", flush_interval: 1s}\nsources:\n"+
		"  - {name: "+name+", kind: mqtt, broker: '"+url+"', topics: ['"+topic+"'], namespace: readings, id_field: aid, sink: lake}\n")
	env := []string{envPipelineFile + "=" + pipeline}
	if newHost {
		env = append(env, embeddedWALEnv(t)...)
	}
	t.Cleanup(func() { endSession(url, "skipprd-"+name) })
	p := startDaemon(t, bin, dataDir, env...)
	p.waitStderr(t, "the source started", func(lines []string) bool { return findLine(lines, "mqtt source: starting") != "" })
	time.Sleep(300 * time.Millisecond) // the subscription lands
	publishReadings(0, 600)
	p.waitStdout(t, "rows acked", progressLines("acked", 1))
	p.kill(t)
	publishReadings(600, 900) // queued by the broker for the session (under its 1000-message limit)
	if newHost {
		dataDir = t.TempDir() // nothing of the first host's disk
	}
	p = startDaemon(t, bin, dataDir, env...)
	slices.Sort(want)
	p.waitFor(t, "every reading in the lake", func() bool { return len(lakeIDs(t, lake)["readings"]) >= len(want) })
	p.stop(t)
	if got := lakeIDs(t, lake)["readings"]; !slices.Equal(got, want) {
		t.Fatalf("lake holds %d rows, the topic %d messages: %s", len(got), len(want), firstDiff(got, want))
	}
}

// endSession ends a persistent session on the broker: a connect with a
// clean session discards it.
func endSession(url, clientID string) {
	cl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(clientID).SetCleanSession(true))
	if tok := cl.Connect(); tok.WaitTimeout(3*time.Second) && tok.Error() == nil {
		cl.Disconnect(100)
	}
}
