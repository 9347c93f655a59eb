//go:build !linux

package storage

import "os"

// dropPageCache is a no-op where POSIX_FADV_DONTNEED is not available:
// the recovery benchmark then reads from a warm cache.
func dropPageCache(*os.File) error { return nil }
