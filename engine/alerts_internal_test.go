package engine

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// stepClock is a Clock that moves one second per reading.
type stepClock struct{ t time.Duration }

func (c *stepClock) Monotonic() time.Duration { c.t += time.Second; return c.t }
func (c *stepClock) WallUnixMs() int64        { return c.t.Milliseconds() }

func alerting() *Engine { return bare() }

// The queue keeps AlertsMax alerts in order; a reader that fell behind is
// told how many it missed, and a reader that kept up misses none.
func TestAlertQueueBoundedInOrder(t *testing.T) {
	e := alerting()
	if got, dropped := e.AlertsSince(0); got != nil || dropped != 0 || e.LastAlert() != nil {
		t.Fatalf("empty queue: %v, %d dropped, last %v", got, dropped, e.LastAlert())
	}
	const raised = AlertsMax + 10
	for i := 1; i <= raised; i++ {
		e.alert(AlertCannotApply, fmt.Errorf("refusal %d", i))
		if i == 3 { // a reader that keeps up sees each alert once
			got, dropped := e.AlertsSince(2)
			if len(got) != 1 || got[0].Seq != 3 || dropped != 0 {
				t.Fatalf("after 3 alerts, since 2: %v, %d dropped", got, dropped)
			}
		}
	}
	got, dropped := e.AlertsSince(0)
	if len(got) != AlertsMax || dropped != raised-AlertsMax {
		t.Fatalf("since 0: %d alerts, %d dropped; want %d and %d", len(got), dropped, AlertsMax, raised-AlertsMax)
	}
	for i, a := range got {
		want := uint64(raised - AlertsMax + 1 + i)
		if a.Seq != want || a.Kind != AlertCannotApply || a.Err.Error() != fmt.Sprintf("refusal %d", want) {
			t.Fatalf("alert %d: seq %d kind %s err %v; want seq %d", i, a.Seq, a.Kind, a.Err, want)
		}
		if i > 0 && a.AtMonotonic <= got[i-1].AtMonotonic {
			t.Fatalf("alert %d raised at %v, not after %v", i, a.AtMonotonic, got[i-1].AtMonotonic)
		}
	}
	if tail, dropped := e.AlertsSince(raised - 2); len(tail) != 2 || dropped != 0 || tail[1].Seq != raised {
		t.Fatalf("since %d: %v, %d dropped", raised-2, tail, dropped)
	}
	if none, _ := e.AlertsSince(raised); none != nil {
		t.Fatalf("since the last: %v", none)
	}
	st := e.Stats()
	if st.Alerts != raised || st.AlertsByKind[AlertCannotApply] != raised || !strings.Contains(fmt.Sprint(e.LastAlert()), fmt.Sprint(raised)) {
		t.Fatalf("alerts %d, cannot-apply %d, last %v", st.Alerts, st.AlertsByKind[AlertCannotApply], e.LastAlert())
	}
}

// Failing closed raises one alert, classified by the error, that carries
// the reason (a fenced writer once logged "last=<nil>").
func TestAlertFailClosedCarriesReason(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		want AlertKind
	}{
		{"fenced", fmt.Errorf("%w: epoch 3 was superseded (writer object: epoch 4)", ErrFenced), AlertFenced},
		{"corrupt", fmt.Errorf("%w: marker holds another writer's commit", ErrCorrupt), AlertCorruption},
		{"invariant", invariantError("held ≥ 0: %d", -1), AlertInvariant},
		{"other", errors.New("encode snapshot: boom"), AlertFailedClosed},
		{"id collision", fmt.Errorf("%w: %w: lake", ErrCannotApply, ErrIDCollision), AlertIDCollision},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := alerting()
			e.failClosed(c.err)
			e.failClosed(errors.New("a second reason is not a second alert"))
			got, _ := e.AlertsSince(0)
			if len(got) != 1 || got[0].Kind != c.want || !errors.Is(got[0].Err, c.err) || e.LastAlert() != got[0].Err {
				t.Fatalf("alerts %v; want one %s alert carrying %v", got, c.want, c.err)
			}
			if e.Stats().AlertsByKind[c.want] != 1 {
				t.Fatalf("by kind %v", e.Stats().AlertsByKind)
			}
		})
	}
}

// Every kind has a name, and an alert without a reason is a bug.
func TestAlertKindsNamed(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range AlertKinds() {
		n := k.String()
		if n == "" || strings.HasPrefix(n, "alert-kind-") || seen[n] {
			t.Fatalf("kind %d named %q", k, n)
		}
		seen[n] = true
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an alert without a reason did not panic")
		}
	}()
	alerting().alert(AlertFenced, nil)
}

// The histogram puts a duration in the first bucket whose bound holds it.
func TestHistogramBuckets(t *testing.T) {
	var h Histogram
	h.observe(time.Millisecond)     // ≤ 1ms
	h.observe(3 * time.Millisecond) // ≤ 5ms
	h.observe(2 * time.Hour)        // above the last bound
	if h.Buckets[0] != 1 || h.Buckets[2] != 1 || h.Buckets[len(LatencyBounds)] != 1 || h.Count != 3 {
		t.Fatalf("buckets %v count %d", h.Buckets, h.Count)
	}
}

// heldTimers is a Timers that keeps the functions it is given, unrun.
type heldTimers struct{ fns []func() }

func (h *heldTimers) AfterFunc(_ time.Duration, fn func()) func() {
	h.fns = append(h.fns, fn)
	return func() {}
}
