//go:build !linux

package storage

import "os"

// allocate writes zeros from the current end to size where fallocate is
// not available: written blocks are allocated blocks.
func allocate(f *os.File, from, size int64, direct bool) error {
	return zeroFill(f, from, size, direct)
}
