package sim

import (
	"fmt"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// hostDir is one pipeline's DATA_DIR on the world's disk: the first
// pipeline's is the disk's root (as in every world before worlds had
// several pipelines), each further pipeline's is pipelinesDir/{n}/ —
// several daemons on one machine, each with a data directory of its own,
// sharing one disk (its faults, its power losses) and the folders of the
// destinations they share, which live outside every data directory.
type hostDir struct {
	disk *Disk
	dir  string // "" (the disk's root) or pipelinesDir + n + "/"
}

// pipelinesDir holds the data directories of a world's further pipelines.
const pipelinesDir = "pipelines/"

// peerDir is the data directory of the world's n-th pipeline (n ≥ 2:
// names may repeat, numbers do not).
func peerDir(n int) string { return fmt.Sprintf("%s%d/", pipelinesDir, n) }

// Client is the pipeline's Disk port: paths relative to its directory.
func (h hostDir) Client(inc *Incarnation) engine.Disk {
	c := h.disk.Client(inc)
	if h.dir == "" {
		return c
	}
	return prefixDisk{inner: c, dir: h.dir}
}

// own maps a path of the disk to the pipeline's: false if the path lies
// outside its directory (the first pipeline's holds everything but the
// other pipelines' directories).
func (h hostDir) own(p string) (string, bool) {
	if h.dir == "" {
		return p, !strings.HasPrefix(p, pipelinesDir)
	}
	return strings.CutPrefix(p, h.dir)
}

// Paths lists the pipeline's files, in its own paths, sorted.
func (h hostDir) Paths() []string {
	var out []string
	for _, p := range h.disk.Paths() {
		if q, ok := h.own(p); ok {
			out = append(out, q)
		}
	}
	return out
}

// File returns one of the pipeline's files (its own path) as Disk.File does.
func (h hostDir) File(p string) (written, durable []byte) { return h.disk.File(h.dir + p) }

// prefixDisk is an engine.Disk rooted at a directory of another: every
// path it is given is under dir.
type prefixDisk struct {
	inner engine.Disk
	dir   string // ends in "/"
}

func (d prefixDisk) path(p string) string {
	if p == "" || p == "." {
		return strings.TrimSuffix(d.dir, "/")
	}
	return d.dir + p
}

func (d prefixDisk) Open(p string, mode engine.OpenMode, done func(engine.File, error)) {
	d.inner.Open(d.path(p), mode, done)
}
func (d prefixDisk) Rename(from, to string, done func(error)) {
	d.inner.Rename(d.path(from), d.path(to), done)
}
func (d prefixDisk) Remove(p string, done func(error)) { d.inner.Remove(d.path(p), done) }
func (d prefixDisk) ReadDir(dir string, done func([]string, error)) {
	d.inner.ReadDir(d.path(dir), done)
}
func (d prefixDisk) SyncDir(dir string, done func(error)) { d.inner.SyncDir(d.path(dir), done) }
func (d prefixDisk) MkdirAll(dir string, done func(error)) {
	d.inner.MkdirAll(d.path(dir), done)
}

// Prepare creates dir and its parents durably: a machine's data
// directory exists before any process on it starts. World setup only; no
// fault decides it.
func (d *Disk) Prepare(dir string) {
	cd, err := cleanPath(dir)
	if err != nil || cd == "" {
		panic(fmt.Sprintf("sim: Prepare(%q): %v", dir, err))
	}
	if err := d.mkdirAll(cd, DiskOK); err != nil {
		panic(fmt.Sprintf("sim: Prepare(%q): %v", dir, err))
	}
	for p := cd; p != ""; p = parentDir(p) {
		d.syncDir(parentDir(p), d.opSeq)
	}
}
