// Package mqtt is the MQTT source (github.com/eclipse/paho.mqtt.golang,
// MQTT 3.1.1): it subscribes to topic filters at QoS 1 in a persistent
// session (clean session off, client id "skipprd-{Name}") and hands each
// message to the host as a unit; the message's PUBACK is sent only after
// the host acked it, and PUBACKs go in arrival order.
//
// Delivery: MQTT cannot re-read, so a message the host committed whose
// PUBACK a crash lost is sent again by the broker. With Config.IDField a
// message's id (a field of its JSON value) is the unit's idempotency key
// "mqtt/{Name}/{id}", and the host stores it once: exactly once, within
// the host's idempotency window. Without it, at least once. A message
// without the id, or that cannot be a row, is a *MessageError: the
// source stops, the message unacknowledged (the broker keeps it).
//
// The broker's limits decide what a stopped daemon loses: Mosquitto
// keeps at most max_queued_messages (1000 by default) for an offline
// persistent session and drops the rest — raise it, or keep the daemon's
// downtime shorter than that many messages — and forgets the session
// after persistent_client_expiration, if set.
//
// Backpressure: at most Config.InFlight messages await the host; past
// that the receive handler waits, and paho hands on no more.
//
// Source.Unit, which makes a message's unit and key, is what Run uses
// and what the simulator drives on its loop (the client is not run
// there).
//
// Not built yet: MQTT 5 (user properties as the id, the broker's
// receive maximum), TLS settings in the pipeline file, batching several
// messages into one unit.
package mqtt
