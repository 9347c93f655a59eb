package main

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/skipprd/skipprd/internal/brokertest"
)

// The credentials a nats source names reach a server that requires
// them: a user and password, or a token, from the environment; wrong
// ones are refused by the server, and a variable that is not set is an
// error naming it before anything connects.
func TestNATSCredentials(t *testing.T) {
	env := map[string]string{"NATS_USER": "loader", "NATS_PASSWORD": "s3cret", "NATS_TOKEN": "t0ken", "WRONG": "nope"}
	getenv := func(k string) string { return env[k] }
	for _, c := range []struct {
		name    string
		server  []string
		spec    natsSourceSpec
		refused bool
	}{
		{"user", []string{"--user", "loader", "--pass", "s3cret"}, natsSourceSpec{UsernameEnv: "NATS_USER", PasswordEnv: "NATS_PASSWORD"}, false},
		{"user, wrong password", []string{"--user", "loader", "--pass", "s3cret"}, natsSourceSpec{UsernameEnv: "NATS_USER", PasswordEnv: "WRONG"}, true},
		{"no credentials", []string{"--user", "loader", "--pass", "s3cret"}, natsSourceSpec{}, true},
		{"token", []string{"--auth", "t0ken"}, natsSourceSpec{TokenEnv: "NATS_TOKEN"}, false},
		{"wrong token", []string{"--auth", "t0ken"}, natsSourceSpec{TokenEnv: "WRONG"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := brokertest.NATSServer(t, func(url string) error {
				nc, err := nats.Connect(url, nats.Timeout(time.Second))
				if err == nil || strings.Contains(err.Error(), "Authorization") {
					err = nil // up: it answers, refusing
					if nc != nil {
						nc.Close()
					}
				}
				return err
			}, c.server...)
			opts, err := natsCredentials(&c.spec, getenv)
			if err != nil {
				t.Fatal(err)
			}
			nc, err := nats.Connect(url, append(opts, nats.Timeout(2*time.Second))...)
			if err == nil {
				nc.Close()
			}
			if refused := err != nil; refused != c.refused || refused && !strings.Contains(err.Error(), "Authorization") {
				t.Fatalf("connect: %v; want refused %v (an authorization error)", err, c.refused)
			}
		})
	}
	_, err := natsCredentials(&natsSourceSpec{UsernameEnv: "NATS_USER", PasswordEnv: "UNSET"}, getenv)
	if err == nil || !strings.Contains(err.Error(), "UNSET") {
		t.Fatalf("an unset password variable: %v, want an error naming UNSET", err)
	}
	_, err = natsCredentials(&natsSourceSpec{CredsFile: "/no/such.creds"}, getenv)
	if err == nil || !strings.Contains(err.Error(), "/no/such.creds") {
		t.Fatalf("a creds file that is not there: %v, want an error naming it", err)
	}
}

// A credentials variable the pipeline file names but the environment
// lacks stops an MQTT or NATS source from being built, naming it —
// never an empty password sent to the broker.
func TestUnsetCredentialsStopTheStart(t *testing.T) {
	d := &daemon{log: slog.New(slog.DiscardHandler)}
	getenv := func(k string) string { return map[string]string{"MQTT_USER": "u"}[k] }
	_, err := d.mqttSource(sourceSpec{Name: "s", Sink: "lake", MQTT: &mqttSourceSpec{Broker: "tcp://x:1883", Topics: []string{"a"},
		Namespace: "n", UsernameEnv: "MQTT_USER", PasswordEnv: "MQTT_PASSWORD"}}, getenv)
	if err == nil || !strings.Contains(err.Error(), "MQTT_PASSWORD") {
		t.Fatalf("mqtt: %v, want an error naming MQTT_PASSWORD", err)
	}
	_, err = d.natsSource(sourceSpec{Name: "s", Sink: "lake", NATS: &natsSourceSpec{URL: "nats://x:4222", Stream: "S",
		TokenEnv: "NATS_TOKEN"}}, getenv)
	if err == nil || !strings.Contains(err.Error(), "NATS_TOKEN") {
		t.Fatalf("nats: %v, want an error naming NATS_TOKEN", err)
	}
}
