//go:build linux

package storage

import (
	"os"

	"golang.org/x/sys/unix"
)

// dropPageCache drops f's clean pages from the page cache
// (POSIX_FADV_DONTNEED; dirty pages stay: fdatasync first).
func dropPageCache(f *os.File) error {
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return &os.PathError{Op: "fadvise", Path: f.Name(), Err: err}
	}
	return nil
}
