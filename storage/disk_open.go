package storage

import (
	"errors"
	"os"
	"syscall"

	"github.com/skipprd/skipprd/engine"
)

// openFile opens name for the port path, runs on a worker goroutine.
//
// Create is O_CREATE|O_EXCL: the WAL must never mistake an old file for a
// new one.
//
// Direct asks for O_DIRECT. Where the filesystem refuses it — open fails
// with EINVAL, as on tmpfs before Linux 6.6 — the file is opened buffered
// instead, File.Direct reports false, and the refusal is logged once per
// disk. Durability does not change: Sync is fdatasync either way (O_DIRECT
// bypasses the page cache, not the device cache).
func (d *OSDisk) openFile(path, name string, mode engine.OpenMode) (*osFile, error) {
	flag := os.O_RDONLY
	if mode.Write {
		flag = os.O_RDWR
	}
	var f *os.File
	var direct bool
	var err error
	switch {
	case !mode.Direct:
		create := 0
		if mode.Create {
			create = os.O_CREATE | os.O_EXCL
		}
		f, err = os.OpenFile(name, flag|create, filePerm)
	case mode.Create:
		f, direct, err = d.createDirect(name, flag)
	default:
		f, direct, err = d.openDirectOrBuffered(name, flag)
	}
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return newOSFile(d.loop, path, f, direct, mode.Direct, st.Size()), nil
}

// openDirectOrBuffered opens an existing file with O_DIRECT, falling back
// to buffered I/O when the filesystem refuses it.
func (d *OSDisk) openDirectOrBuffered(name string, flag int) (*os.File, bool, error) {
	f, err := d.openDirect(name, flag, filePerm)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, syscall.EINVAL) {
		return nil, false, err
	}
	d.directRefused(name)
	f, err = os.OpenFile(name, flag, filePerm)
	return f, false, err
}

// createDirect creates a file exclusively, then reopens it with O_DIRECT.
// It does not pass O_CREATE and O_DIRECT together because Linux creates
// the file before it checks O_DIRECT support: open(O_CREAT|O_EXCL|O_DIRECT)
// on a refusing filesystem leaves a new file behind and fails with
// EINVAL, and the buffered retry would then fail with EEXIST on our own
// file. Creating first keeps "exists" meaning someone else's file.
func (d *OSDisk) createDirect(name string, flag int) (*os.File, bool, error) {
	buffered, err := os.OpenFile(name, flag|os.O_CREATE|os.O_EXCL, filePerm)
	if err != nil {
		return nil, false, err
	}
	f, err := d.openDirect(name, flag, filePerm)
	switch {
	case err == nil:
		buffered.Close()
		return f, true, nil
	case errors.Is(err, syscall.EINVAL):
		d.directRefused(name)
		return buffered, false, nil
	}
	// We made the file and cannot use it: take it back, so that the
	// caller's retry of Create does not find it and report ErrExists.
	buffered.Close()
	return nil, false, errors.Join(err, os.Remove(name))
}

// directRefused logs, once per disk, that O_DIRECT is not in effect.
func (d *OSDisk) directRefused(name string) {
	d.directRefusedOnce.Do(func() {
		d.log.Warn("storage: the filesystem refused O_DIRECT; using buffered I/O + fdatasync",
			"root", d.root, "file", name)
	})
}
