// Package lintbad holds one violation of each engine rule; lint_test.go
// checks that every rule fires on it. It is never built.
package lintbad

import (
	"math/rand"
	"os"
	"sync"
	"time"
)

var mu sync.Mutex

func effects(m map[string]int) int {
	_ = os.Getpid()
	_ = rand.Int()
	_ = time.Now()
	time.Sleep(time.Millisecond)
	ch := make(chan int, 1)
	go func() { ch <- 1 }()
	select {
	case v := <-ch:
		_ = v
	}
	n := 0
	for k := range m {
		n += len(k)
	}
	//engine:orderless — summing is order-insensitive; this one is allowed.
	for _, v := range m {
		n += v
	}
	return n
}
