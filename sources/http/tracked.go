package httpsrc

import (
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// trackedAllocator is the allocator one Arrow IPC decode hands arrow-go:
// it passes every call on to mem and keeps two promises arrow-go cannot.
//
//   - Nothing leaks. arrow-go turns a panic on malformed data into an
//     error, but what it had loaded of that batch stays referenced by
//     nothing and is never released (about one damaged stream in five
//     leaks so: TestArrowMutations). The allocator remembers every
//     allocation not yet freed; on error, once everything known is
//     released, freeAll returns the rest to mem.
//   - Decoding stays within budget bytes held at once. Uncompressed, a
//     stream decodes to about its own size, but a dictionary delta makes
//     arrow-go concatenate the dictionary again for every batch, and each
//     batch keeps its own: memory quadratic in the stream. An allocation
//     that would pass the budget sets over and panics with overBudget,
//     which arrow-go's reader recovers from like any other.
//
// After a successful decode the batches' buffers still come back through
// Free, from whatever goroutine releases them: hence the mutex.
type trackedAllocator struct {
	mem    memory.Allocator
	budget int64

	mu   sync.Mutex
	held int64
	live map[*byte][]byte // by first byte; zero-capacity slices are not tracked
	over bool
}

// overBudget is the panic of an allocation past the budget.
type overBudget struct{}

func (overBudget) Error() string { return "decoding the stream needs more memory than its budget" }

func newTrackedAllocator(mem memory.Allocator, budget int64) *trackedAllocator {
	return &trackedAllocator{mem: mem, budget: budget, live: map[*byte][]byte{}}
}

func (a *trackedAllocator) Allocate(size int) []byte {
	a.check(int64(size))
	b := a.mem.Allocate(size)
	a.track(b)
	return b
}

func (a *trackedAllocator) Reallocate(size int, b []byte) []byte {
	a.check(int64(size - len(b)))
	a.untrack(b)
	nb := a.mem.Reallocate(size, b)
	a.track(nb)
	return nb
}

func (a *trackedAllocator) Free(b []byte) {
	a.untrack(b)
	a.mem.Free(b)
}

// check panics if n more bytes would take the allocator past its budget.
func (a *trackedAllocator) check(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > 0 && a.held+n > a.budget {
		a.over = true
		panic(overBudget{})
	}
}

// key identifies an allocation by its first byte; nil for one of no
// capacity, which holds nothing to free.
func key(b []byte) *byte {
	if cap(b) == 0 {
		return nil
	}
	return &b[:1][0]
}

func (a *trackedAllocator) track(b []byte) {
	if k := key(b); k != nil {
		a.mu.Lock()
		a.live[k] = b
		a.held += int64(len(b))
		a.mu.Unlock()
	}
}

func (a *trackedAllocator) untrack(b []byte) {
	if k := key(b); k != nil {
		a.mu.Lock()
		if old, ok := a.live[k]; ok {
			a.held -= int64(len(old))
			delete(a.live, k)
		}
		a.mu.Unlock()
	}
}

// wentOver reports whether an allocation was refused for the budget.
func (a *trackedAllocator) wentOver() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.over
}

// freeAll returns to mem everything still allocated. Only for a failed
// decode, once every batch, message and reader it made is released:
// what is left is referenced by nothing that will be used again.
func (a *trackedAllocator) freeAll() {
	a.mu.Lock()
	live := a.live
	a.live, a.held = map[*byte][]byte{}, 0
	a.mu.Unlock()
	for _, b := range live { // order does not matter: each is freed once
		a.mem.Free(b)
	}
}
