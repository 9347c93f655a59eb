//go:build !unix && !windows

package main

import (
	"errors"
	"os"
)

// tryLock: no file lock on this platform, so the local-disk WAL cannot
// keep a second daemon out; refuse rather than risk it.
func tryLock(*os.File) error {
	return errors.New("no file locking on this platform: use WAL_STORAGE=embedded or s3")
}
