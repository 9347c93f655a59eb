//go:build linux

package storage

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// allocate reserves f's blocks up to size with fallocate (mode 0: the
// size grows to size, the new range reads as zeros). A filesystem that
// cannot (EOPNOTSUPP: some network and FUSE filesystems) gets the bytes
// written as zeros instead, which allocates them just as well.
func allocate(f *os.File, from, size int64, direct bool) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var allocErr error
	err = raw.Control(func(fd uintptr) {
		for {
			allocErr = unix.Fallocate(int(fd), 0, 0, size)
			if allocErr != unix.EINTR {
				return
			}
		}
	})
	switch {
	case err != nil:
		return err
	case errors.Is(allocErr, unix.EOPNOTSUPP), errors.Is(allocErr, unix.ENOSYS):
		return zeroFill(f, from, size, direct)
	case allocErr != nil:
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: allocErr}
	}
	return nil
}
