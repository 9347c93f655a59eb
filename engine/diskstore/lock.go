package diskstore

import "fmt"

// lockMode says whether a holder may share its lock.
type lockMode uint8

const (
	shared    lockMode = iota // reads, and part uploads of one upload
	exclusive                 // anything that checks and then changes
)

// lockTable is a set of named FIFO reader/writer locks. A request waits
// for its lock in arrival order: the head of a queue is granted as soon
// as it is compatible with the holders, together with every shared
// request directly behind a shared head, and nothing ever overtakes a
// waiter (a shared request behind a waiting exclusive one waits too), so
// no request starves and the order is a pure function of the call order.
//
// Names are "o"+key for an object key and "u"+id for an upload. Both kinds
// are taken by Complete only, always upload first, and every other
// request takes one lock, so there is no cycle and no deadlock.
type lockTable struct {
	// locks holds a state per name while it is held or awaited.
	// INVARIANT: every state in it has holders > 0: acquire grants a new
	// state at once, and release deletes one whose holders fall to 0
	// (its queue is empty then: an empty lock admits its head). release
	// panics on a state without holders.
	locks map[string]*lockState
}

type lockState struct {
	// holders is the number of requests holding the lock; exclusive says
	// the (single) holder holds it exclusively.
	holders   int
	exclusive bool
	queue     []lockWaiter
}

type lockWaiter struct {
	mode  lockMode
	start func()
}

func (st *lockState) admits(mode lockMode) bool {
	return st.holders == 0 || (mode == shared && !st.exclusive)
}

func (st *lockState) grant(mode lockMode) {
	st.holders++
	st.exclusive = mode == exclusive
}

// acquire runs start once name is held in mode: at once (inside this
// call) when it is free, else from the release that frees it.
func (t *lockTable) acquire(name string, mode lockMode, start func()) {
	if t.locks == nil {
		t.locks = make(map[string]*lockState)
	}
	st := t.locks[name]
	if st == nil {
		st = &lockState{}
		t.locks[name] = st
	}
	if len(st.queue) == 0 && st.admits(mode) {
		st.grant(mode)
		start()
		return
	}
	st.queue = append(st.queue, lockWaiter{mode, start})
}

// release gives up one hold of name and starts the waiters that are now
// admitted, in queue order.
// REQUIRES: name is held by the caller.
func (t *lockTable) release(name string) {
	st := t.locks[name]
	if st == nil {
		panic("diskstore: release of a lock that is not held: " + name)
	}
	if st.holders <= 0 {
		panic(fmt.Sprintf("diskstore: a lock state has holders > 0: %s has %d holders, %d waiting", name, st.holders, len(st.queue)))
	}
	st.holders--
	if st.holders == 0 {
		st.exclusive = false
	}
	var run []func()
	for len(st.queue) > 0 && st.admits(st.queue[0].mode) {
		w := st.queue[0]
		st.queue[0] = lockWaiter{}
		st.queue = st.queue[1:]
		st.grant(w.mode)
		run = append(run, w.start)
	}
	if st.holders == 0 {
		delete(t.locks, name) // the queue is empty too: an empty lock admits its head
	}
	for _, start := range run {
		start()
	}
}

// held returns how many names are held or awaited (for tests).
func (t *lockTable) held() int { return len(t.locks) }
