package sim

import (
	"errors"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// Zombie writers (docs/DESIGN.md §11). A zombie is a superseded incarnation
// that is still running: the process froze (a long GC pause, a stopped
// VM, a partition from the store), its supervisor gave up on it and
// started a new one, and then it woke up and carried on — with units it
// had accepted, snapshots in flight, jobs half applied and segments it
// believes it owns.
//
// The world models it with Incarnation.Pause: nothing of the zombie runs
// and no answer reaches it while paused, but the requests it had issued
// keep going and land. The new incarnation recovers meanwhile (claims the
// next epoch, waits FenceWait, lists, seals). When the zombie resumes,
// everything it had pending runs; it must fail closed at its next commit
// or reclaim instead of acking or deleting anything the new writer owns.
// A zombie that is still alive zombieLife after resuming is killed (its
// supervisor noticed), and every zombie dies when the fault phase ends.
//
// Oracles: a zombie's ACKs are recorded like any other (World.submit), so
// the final checks prove every unit it acked is in a segment the
// surviving log owns (a valid marker), and that nothing was committed
// twice; a zombie that fails closed for any reason but fencing is a
// violation.
type zombie struct {
	inc      *Incarnation
	eng      *engine.Engine
	resumeAt time.Duration
	dead     bool
}

// makeZombie freezes the current process for pause and starts another.
func (w *World) makeZombie(pause time.Duration) {
	z := &zombie{inc: w.inc, eng: w.eng, resumeAt: w.sched.Now() + pause}
	w.inc.Pause()
	w.res.Zombies++
	if w.tapping() {
		w.note(NoteZombie, w.inc.ID(), "", "frozen for "+pause.String())
	}
	w.trouble()
	w.zombies = append(w.zombies, z)
	w.sched.After(pause, func() { w.resumeZombie(z) })
	w.handOver()
}

func (w *World) resumeZombie(z *zombie) {
	if z.dead {
		return
	}
	z.inc.Resume()
	w.sched.After(zombieLife, func() { w.killZombie(z) })
}

// killZombie ends a zombie process (SIGKILL; the machine stays up).
func (w *World) killZombie(z *zombie) {
	if z.dead {
		return
	}
	z.dead = true
	w.endMarks(z.eng)
	z.inc.Kill()
	for i, o := range w.zombies {
		if o == z {
			w.zombies = append(w.zombies[:i], w.zombies[i+1:]...)
			break
		}
	}
}

// checkZombies: a zombie may only fail closed because it was fenced;
// once it has, its process is over.
func (w *World) checkZombies() {
	for i := 0; i < len(w.zombies); i++ {
		z := w.zombies[i]
		w.checkAlerts(z.eng, true)
		err := z.eng.Err()
		if err == nil {
			continue
		}
		switch {
		case errors.Is(err, engine.ErrInvariant):
			w.oracle.fail("zombie incarnation %d failed closed on a broken invariant (an engine bug): %v", z.inc.ID(), err)
		case !errors.Is(err, engine.ErrFenced):
			w.oracle.fail("zombie incarnation %d failed closed, not fenced: %v", z.inc.ID(), err)
		}
		w.killZombie(z)
		i--
	}
}
