package httpsrc

import (
	"testing"
)

func TestTrackedAllocatorBudget(t *testing.T) {
	mem := checkedMem(t)
	a := newTrackedAllocator(mem, 1000)
	b1 := a.Allocate(600)
	b1 = a.Reallocate(900, b1)
	func() {
		defer func() {
			if _, ok := recover().(overBudget); !ok {
				t.Error("an allocation past the budget did not panic with overBudget")
			}
		}()
		a.Allocate(101)
	}()
	if !a.wentOver() {
		t.Error("wentOver is false after a refused allocation")
	}
	a.Free(b1)
	b2 := a.Allocate(1000) // freed bytes count no more
	a.Free(b2)
	a.Free(a.Allocate(0))
	if a.held != 0 || len(a.live) != 0 {
		t.Errorf("held %d, %d live after freeing everything", a.held, len(a.live))
	}
}

func TestTrackedAllocatorFreeAll(t *testing.T) {
	mem := checkedMem(t) // fails the test if freeAll leaves anything
	a := newTrackedAllocator(mem, 1<<20)
	kept := a.Allocate(100)
	a.Allocate(200) // dropped, as arrow-go drops a half-loaded batch
	a.Reallocate(300, a.Allocate(10))
	a.Free(kept)
	a.freeAll()
	if a.held != 0 || len(a.live) != 0 {
		t.Errorf("held %d, %d live after freeAll", a.held, len(a.live))
	}
}
