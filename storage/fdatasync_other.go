//go:build !linux

package storage

import "os"

// fdatasync falls back to File.Sync where fdatasync is not available (on
// macOS Go's Sync issues F_FULLFSYNC, which is what durability needs
// there; plain fsync does not reach the platter).
func fdatasync(f *os.File) error { return f.Sync() }
