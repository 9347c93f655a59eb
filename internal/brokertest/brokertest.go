package brokertest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/nats-io/nats.go"
)

// NATS returns the NATS server's URL once it answers.
func NATS(t testing.TB) string {
	return serverOrSkip(t, "NATS server", "SKIPPR_NATS_URL", "nats://127.0.0.1:4222", "start nats-server -js (scripts/nats-setup)",
		func(url string) error {
			nc, err := nats.Connect(url, nats.Timeout(2*time.Second))
			if err == nil {
				nc.Close()
			}
			return err
		})
}

// MQTT returns the MQTT broker's URL once it answers.
func MQTT(t testing.TB) string {
	return serverOrSkip(t, "MQTT broker", "SKIPPR_MQTT_URL", "tcp://127.0.0.1:1883", "start mosquitto (scripts/mqtt-setup)",
		func(url string) error {
			cl := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprint("probe-", time.Now().UnixNano())))
			tok := cl.Connect()
			if !tok.WaitTimeout(3 * time.Second) {
				return fmt.Errorf("no answer within 3 s")
			}
			if tok.Error() == nil {
				cl.Disconnect(0)
			}
			return tok.Error()
		})
}

func serverOrSkip(t testing.TB, what, envVar, def, hint string, probe func(string) error) string {
	t.Helper()
	url := os.Getenv(envVar)
	if url == "" {
		url = def
	}
	err := probe(url)
	switch {
	case err == nil:
		return url
	case os.Getenv("CI") == "true":
		t.Fatalf("no %s at %s (CI=true: these tests must run): %v", what, url, err)
	default:
		t.Skipf("SKIPPED LOUDLY: no %s at %s (%v); set %s or %s", what, url, err, envVar, hint)
	}
	return ""
}

// RunUntil runs run until cond holds (asked every 10 ms), then cancels
// its context and returns what it returned; a run that ends first
// returns at once. After 30 s it fails the test, saying what progress
// reports.
func RunUntil(t testing.TB, run func(ctx context.Context) error, cond func() bool, progress func() string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-done:
			return err
		case <-deadline:
			cancel()
			<-done
			t.Fatalf("not done within 30 s: %s", progress())
		case <-time.After(10 * time.Millisecond):
			if cond() {
				cancel()
				return <-done
			}
		}
	}
}

// NATSServer starts a NATS server of the test's own (the nats-server
// binary, on a free port of 127.0.0.1, stopped at the test's end) with
// args — e.g. "--user", "u", "--pass", "p" — and returns its URL once it
// answers probe. No binary: skipped loudly, or under CI=true a failure.
func NATSServer(t testing.TB, probe func(url string) error, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("nats-server")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no nats-server binary (CI=true: these tests must run): %v", err)
		}
		t.Skipf("SKIPPED LOUDLY: no nats-server binary (%v); install it (scripts/nats-setup)", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(bin, append([]string{"-a", "127.0.0.1", "-p", fmt.Sprint(port)}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := probe(url)
		if err == nil {
			return url
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nats-server at %s did not answer within 10 s: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
