package main

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// walLockFile, under DATA_DIR, is held by the daemon running the
// local-disk WAL: one log, one writer. Two daemons appending to the same
// partition files would interleave and cut each other's tails; the
// engine's epoch fencing guards the segment store, not the log, so the
// lock is what keeps a second daemon out.
const walLockFile = "wal.lock"

// errWALLocked: another process holds DATA_DIR/wal.lock.
var errWALLocked = errors.New("another skipprd holds it")

// lockWAL takes an exclusive, non-blocking lock on path (created if
// missing) and writes this process's id into it for the operator. The
// lock lasts until unlock is called or the process exits (the kernel
// releases it with the file, a SIGKILL included). If another process
// holds it, the error wraps errWALLocked and names the file and, if it
// wrote one, that process's id.
func lockWAL(path string) (unlock func() error, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("WAL lock %s: %w", path, err)
	}
	if err := tryLock(f); err != nil {
		holder := ""
		if b, rerr := os.ReadFile(path); rerr == nil {
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil && pid > 0 {
				holder = fmt.Sprintf(" (pid %d)", pid)
			}
		}
		_ = f.Close()
		if errors.Is(err, errWALLocked) {
			return nil, fmt.Errorf("WAL lock %s: %w%s: two daemons must not share one log; stop it, or give this one another %s",
				path, errWALLocked, holder, envDataDir)
		}
		return nil, fmt.Errorf("WAL lock %s: %w", path, err)
	}
	// The id is for people; a failure to write it changes nothing.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil // closing the file releases the lock
}
