//go:build recordpath

package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime/coverage"
	"syscall"

	"github.com/skipprd/skipprd/internal/recordpath"
)

// Built only by scripts/record-path (-tags recordpath, -cover): SIGUSR1
// clears the coverage counters, SIGUSR2 writes what ran since to
// $SKIPPR_RECORD_PATH/<n>, so that one record's path through the running
// daemon can be measured in files and functions; with them, the spine
// package recordpath recorded since (what was on the stack at each port
// call until the first answer).
func init() {
	dir := os.Getenv("SKIPPR_RECORD_PATH")
	if dir == "" {
		return
	}
	sig := make(chan os.Signal, 4)
	signal.Notify(sig, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		n := 0
		for s := range sig {
			if s == syscall.SIGUSR1 {
				report(coverage.ClearCounters())
				recordpath.Clear()
				continue
			}
			n++
			out := fmt.Sprintf("%s/%d", dir, n)
			report(os.MkdirAll(out, 0o755))
			report(coverage.WriteMetaDir(out))
			report(coverage.WriteCountersDir(out))
			report(recordpath.Write(out + "/spine"))
			fmt.Fprintf(os.Stderr, "recordpath: wrote %s\n", out)
		}
	}()
}

func report(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "recordpath: %v\n", err)
	}
}
