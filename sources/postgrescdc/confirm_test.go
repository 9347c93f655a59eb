package postgrescdc

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// The slot is never confirmed past a transaction whose changes are not
// all acked: while the host holds every unit back, the slot stays below
// the first held unit's transaction however long the source keeps the
// connection alive; and no confirmed_flush_lsn read before a unit was
// handed to the host is above that unit's last transaction's commit.
// Once acks flow, the slot catches up.
func TestConfirmedNeverPassesAcked(t *testing.T) {
	t.Parallel()
	e := newPGEnv(t)
	e.exec(workloadSchema)
	l := newLake(t)
	h := l.start(t)
	cfg := e.config(workloadTables...)
	cfg.Logger = quietLogger(t)
	cfg.StatusInterval = time.Second
	g := newHoldGate()
	rec := &recorder{gate: g.gate}
	r := startOn(t, cfg, h, rec.wrap(h.Ingest))
	src := r.src
	t.Cleanup(g.release) // before the run's cleanup waits for a held unit
	waitFor(t, 15*time.Second, "the snapshot", func() bool { return src.Stats().SnapshotRows == 1100 })
	watch := watchSlot(t, e)

	w := newWorkload(t, e)
	w.fixed()
	w.check()
	waitFor(t, 20*time.Second, "the fixed workload acked", func() bool { return int64(src.Stats().Changes) == w.changes })
	g.holding.Store(true)
	w.random(30)
	var held engine.Unit
	select {
	case held = <-g.first:
	case <-time.After(10 * time.Second):
		t.Fatal("no unit reached the host after the workload")
	}
	time.Sleep(2500 * time.Millisecond) // two status intervals and keepalives
	heldCommit := lastCommit(held.Offsets, e.slot).Commit()
	if c, err := e.slotConfirmed(); err != nil || c > uint64(heldCommit) {
		t.Fatalf("the slot is confirmed at %x (%v) while the unit of the transaction committed at %s is held", c, err, heldCommit)
	}
	g.holding.Store(false)
	g.release()
	w.random(20)
	w.check()
	waitFor(t, 20*time.Second, "every change acked", func() bool { return int64(src.Stats().Changes) == w.changes })
	units := rec.ackedUnits()
	waitFor(t, 10*time.Second, "the slot to catch up", func() bool {
		c, _ := e.slotConfirmed()
		return c > uint64(lastCommit(units[len(units)-1].offsets, e.slot).Commit())
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkObservations(t, watch.stop(), units, e.slot)
}

// holdGate holds every unit back while holding is set, until release,
// and hands the first one it holds to first.
type holdGate struct {
	holding atomic.Bool
	first   chan engine.Unit
	hold    chan struct{}
	once    sync.Once
}

func newHoldGate() *holdGate {
	return &holdGate{first: make(chan engine.Unit, 1), hold: make(chan struct{})}
}

func (g *holdGate) gate(u engine.Unit) {
	if !g.holding.Load() {
		return
	}
	select {
	case g.first <- u:
	default:
	}
	<-g.hold
}

func (g *holdGate) release() { g.once.Do(func() { close(g.hold) }) }

// observation is the slot's confirmed_flush_lsn, read before at.
type observation struct {
	at  time.Time
	lsn uint64
}

// slotWatch reads the slot's confirmed_flush_lsn every 10 ms on a
// connection of its own.
type slotWatch struct {
	obs  []observation
	quit chan struct{}
	done chan struct{}
	once sync.Once
}

func watchSlot(t *testing.T, e *pgEnv) *slotWatch {
	conn := e.connect()
	w := &slotWatch{quit: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() { w.stop() }) // before the connection closes
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.quit:
				return
			case <-time.After(10 * time.Millisecond):
			}
			lsn, err := slotConfirmed(conn, e.slot)
			if err != nil {
				t.Errorf("read the slot: %v", err)
				return
			}
			w.obs = append(w.obs, observation{time.Now(), lsn})
		}
	}()
	return w
}

// stop ends the watch and returns what it saw.
func (w *slotWatch) stop() []observation {
	w.once.Do(func() { close(w.quit) })
	<-w.done
	return w.obs
}

// checkObservations fails if the slot was seen confirmed above the
// commit of a unit's last transaction before that unit was submitted.
func checkObservations(t *testing.T, obs []observation, units []ackedUnit, slot string) {
	t.Helper()
	checked := 0
	for _, u := range units {
		commit := lastCommit(u.offsets, slot).Commit()
		if commit == 0 {
			continue // a snapshot unit
		}
		for _, o := range obs {
			if !o.at.Before(u.submitted) {
				break
			}
			if o.lsn > uint64(commit) {
				t.Fatalf("slot confirmed at %x before the unit of the transaction committed at %s was submitted", o.lsn, commit)
			}
			checked++
		}
	}
	if checked < 100 || len(obs) < 50 {
		t.Fatalf("%d observations, %d checks: the test saw too little", len(obs), checked)
	}
}

// lastCommit returns the commit LSN of the last chunk of a stream unit
// (0 for a snapshot unit).
func lastCommit(offsets segment.Offsets, slot string) Position {
	for _, o := range offsets {
		rest := strings.TrimPrefix(o.Key, slotPrefix(slot))
		if strings.Contains(rest, ".") && !strings.HasPrefix(rest, "snapshot/") {
			return Position(o.Value)
		}
	}
	return 0
}
