// Package mqtt is the MQTT source (github.com/eclipse/paho.golang's
// autopaho, MQTT 5): it subscribes to topic filters at QoS 1 in a
// persistent session (client id "skipprd-{Name}", Clean Start off, a
// Session Expiry Interval of Config.SessionExpiry) and hands each
// message to the host as a unit; acknowledgement is manual: the
// message's PUBACK is sent only after the host acked it, PUBACKs go in
// arrival order, and each on the connection its message came on.
//
// Delivery: MQTT cannot re-read, so a message the host committed whose
// PUBACK a crash (or a lost connection) lost is sent again by the
// broker. With Config.IDField (a field of the JSON value) or
// Config.IDProperty (an MQTT 5 user property) a message's id is the
// unit's idempotency key "mqtt/{Name}/{id}", and the host stores it
// once: exactly once, within the host's idempotency window — also for a
// publisher that sends the same message twice under one id. Without
// either, at least once. A message without the id, or that cannot be a
// row, is a *MessageError: the source stops, the message unacknowledged
// (the broker keeps it).
//
// The session and the broker's limits decide what a stopped daemon
// loses: the broker keeps the session, and queues its messages, for
// Config.SessionExpiry after the source disconnects (a broker may cap
// it: Mosquitto's max_session_expiry_interval) and then forgets both.
// Mosquitto also keeps at most max_queued_messages (1000 by default) for
// an offline session and drops the rest — raise it, or keep the daemon's
// downtime shorter than that many messages.
//
// Backpressure: at most Config.InFlight messages await the host; that
// is the source's Receive Maximum, so the broker sends no more until
// some are acknowledged, and past it the receive handler waits.
//
// Not built yet: TLS settings in the pipeline file, batching several
// messages into one unit.
package mqtt
