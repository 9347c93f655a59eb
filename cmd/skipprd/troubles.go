package main

import (
	"context"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Failures the engine rides out — a store that refuses writes or is
// down, a sink that fails, a checkpoint that does not land, a recovery
// that cannot make progress — are the engine's troubles
// (engine/trouble.go). The daemon says each one out loud: a WARN when it
// starts (and for every failed recovery attempt, with its reason), a
// reminder every troubleRemindEvery while it lasts with how long and how
// often, and an INFO when it clears. Nothing is retried or decided here.

const (
	troublePoll        = time.Second      // how often the engine is asked
	troubleRemindEvery = 10 * time.Second // per operation, while it fails
)

// troubleWatch is the logger's state; one goroutine owns it.
type troubleWatch struct {
	d        *daemon
	seq      uint64               // the last event logged
	reminded map[string]time.Time // operation → when it was last logged
}

// watchTroubles logs troubles until stop is closed, then once more (the
// host has stopped by then: its last events are read from its frozen
// state), and closes the returned channel.
func (d *daemon) watchTroubles(stop <-chan struct{}) <-chan struct{} {
	w := &troubleWatch{d: d, reminded: map[string]time.Time{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(troublePoll)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				w.poll(time.Now(), true)
				return
			case <-tick.C:
				w.poll(time.Now(), false)
			}
		}
	}()
	return done
}

// poll logs the events since the last poll, then reminds of what still
// fails. stopped: the host has stopped, so nothing is retried any more
// and the messages say the next start retries instead.
func (w *troubleWatch) poll(now time.Time, stopped bool) {
	ctx, cancel := context.WithTimeout(context.Background(), statsWait)
	defer cancel()
	events, dropped, err := w.d.host.TroubleEventsSince(ctx, w.seq)
	if err != nil {
		return // the loop is busy, or the host is gone; the next poll will do
	}
	if dropped > 0 {
		w.d.log.Warn("trouble events were dropped before they could be logged", "dropped", dropped)
	}
	for _, ev := range events {
		w.logEvent(ev, now, stopped)
		w.seq = ev.Seq
	}
	current, err := w.d.host.Troubles(ctx)
	if err != nil {
		return
	}
	for _, t := range current {
		if now.Sub(w.reminded[t.Op]) >= troubleRemindEvery {
			w.d.log.Warn(retrying("still failing", stopped), "op", t.Op, "for", t.Lasted.Round(time.Second), "attempts", t.Attempts, "err", t.Err)
			w.reminded[t.Op] = now
		}
	}
}

// retrying is what, failing, is followed by: "; retrying" while the host
// runs, or that the next start retries once it has stopped.
func retrying(what string, stopped bool) string {
	if stopped {
		return what + " when the host stopped; the next start retries"
	}
	return what + "; retrying"
}

func (w *troubleWatch) logEvent(ev engine.TroubleEvent, now time.Time, stopped bool) {
	log := w.d.log
	switch {
	case ev.Cleared:
		log.Info("recovered", "op", ev.Op, "after", ev.Lasted.Round(time.Millisecond), "attempts", ev.Attempts, "last_err", ev.Err)
		delete(w.reminded, ev.Op)
	case ev.Op == "recovery":
		log.Warn("recovery failed; retrying", "attempt", ev.Attempts, "for", ev.Lasted.Round(time.Millisecond),
			"give_up_after", w.d.ecfg.RecoveryGiveUp, "err", ev.Err)
		w.reminded[ev.Op] = now
	default:
		log.Warn(retrying("failing", stopped), "op", ev.Op, "err", ev.Err)
		w.reminded[ev.Op] = now
	}
}

// troubleText is the current troubles as probe text.
func troubleText(ts []engine.Trouble) string {
	s := ""
	for i, t := range ts {
		if i > 0 {
			s += "; "
		}
		s += t.Op + ": " + t.Err.Error()
	}
	return s
}
