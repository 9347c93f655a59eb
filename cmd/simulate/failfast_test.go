package main

import (
	"strings"
	"testing"
)

func TestFailFastFlag(t *testing.T) {
	o, err := parseFlags([]string{"-seeds", "3", "-failfast"})
	if err != nil || !o.failfast {
		t.Fatalf("%+v %v", o, err)
	}
	if (&failFast{}).stopped() {
		t.Fatal("a sweep without -failfast stopped")
	}
}

// A panic becomes the seed's failure, naming the code that panicked.
func TestPanicSite(t *testing.T) {
	var site string
	func() {
		defer func() {
			if recover() != nil {
				site = panicSite()
			}
		}()
		panicHere()
	}()
	if !strings.Contains(site, "panicHere") || !strings.Contains(site, "failfast_test.go:") {
		t.Fatalf("panic site %q, want panicHere in failfast_test.go", site)
	}
	r := panicResult(job{seed: 9}, "boom", site)
	if r.Err() == nil || r.Seed != 9 || !strings.HasPrefix(r.Violations[0], "panic: boom at ") {
		t.Fatalf("%+v", r)
	}
}

//go:noinline
func panicHere() {
	panic("engine: set bit 9 of 8") // like an engine assertion
}
