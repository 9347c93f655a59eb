//go:build linux

package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// fdatasync flushes f's data and the metadata needed to read it back
// (size), but not timestamps — the durability the File contract asks of
// Sync, for one disk write less than fsync when a file grows in place.
// EINTR is retried: it means the call was interrupted, not that it failed.
func fdatasync(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var syncErr error
	err = raw.Control(func(fd uintptr) {
		for {
			syncErr = unix.Fdatasync(int(fd))
			if syncErr != unix.EINTR {
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if syncErr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: syncErr}
	}
	return nil
}
