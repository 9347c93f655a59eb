package diskstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/skipprd/skipprd/engine"
)

// Limits on keys. KeyMax is S3's; ElemMax keeps every file name the store
// makes (an element plus a two-byte suffix) within the 255 bytes common
// filesystems allow, so the real and the simulated disk accept the same
// keys.
const (
	KeyMax  = 1024
	ElemMax = 250
	// PageSize is the most objects (or uploads) one listing page holds.
	PageSize = 1000
)

// Errors of the store besides the engine's sentinels. Each is definite:
// the request did not take effect.
var (
	// ErrInvalidKey: a key that cannot name an object here (see checkKey).
	ErrInvalidKey = errors.New("diskstore: invalid key")
	// ErrInvalidPart: CompleteMultipartUpload named no part, a part out of
	// order or out of [1, 10000], a part that was not uploaded, one with
	// another ETag, or one that fails its checks (damaged: see doc.go); or
	// UploadPart got a number out of [1, 10000].
	ErrInvalidPart = errors.New("diskstore: invalid part")
	// ErrInvalidRange: a GetObject range that is empty, negative, or
	// starts at or past the end of the object; or a Limit ≤ 0.
	ErrInvalidRange = errors.New("diskstore: invalid range")
)

// Names in the directory tree (doc.go has the layout).
const (
	objectsDir = "objects"
	uploadsDir = "uploads"
	dirSuffix  = ".d"   // a directory for a key prefix element
	fileSuffix = ".o"   // an object file
	tempSuffix = ".tmp" // a file being written; never listed
	metaName   = "meta"
	partPrefix = "part-"
	// copyChunk is how much of a part Complete holds in memory at once.
	copyChunk = 4 << 20
	// readsInFlight bounds the header reads of one listing.
	readsInFlight = 16
)

// Store is an engine.ObjectStore kept in a directory of an engine.Disk.
// Every method must be called on the loop that runs the disk's
// callbacks; every callback runs there, later. See doc.go.
type Store struct {
	disk  engine.Disk
	clock engine.Clock
	rnd   engine.Rand

	root, objects, uploads string
	// pageSize is PageSize; tests shrink it to reach page boundaries.
	pageSize int

	locks lockTable
	// temps holds the temp files of this store's writes in flight, which
	// listings must not remove as leftovers.
	temps map[string]struct{}
	// durableDirs holds directories known to exist durably: made by this
	// store and synced into their parents, up to the disk root. Object
	// directories are never removed, so the set stays true.
	durableDirs map[string]struct{}
	// dirty holds directories in which an entry change (a rename or a
	// remove) took effect, or may have, without a successful SyncDir
	// after it; the value is the sequence number at which it was marked.
	// Reads of a key sync its directory first when it is dirty, so that
	// no answer is based on an entry a crash could undo.
	dirty map[string]uint64
	// seq orders dirty marks against SyncDir issues.
	seq uint64
}

var _ engine.ObjectStore = (*Store)(nil)

// New returns a store kept under root, a slash-separated directory path
// relative to the disk's root ("" is the disk's root itself). Nothing is
// read or written until the first request; directories are made as they
// are needed.
//
// One Store per root at a time: the per-key serialization that makes
// conditional writes atomic, and the cleanup of leftover temp files,
// assume that no other Store (in this process or another) writes under
// root meanwhile.
func New(disk engine.Disk, clock engine.Clock, rnd engine.Rand, root string) *Store {
	if root != "" {
		for _, e := range strings.Split(root, "/") {
			if e == "" || e == "." || e == ".." || strings.IndexByte(e, 0) >= 0 {
				panic(fmt.Sprintf("diskstore: root %q is not a clean relative path", root))
			}
		}
	}
	return &Store{
		disk: disk, clock: clock, rnd: rnd,
		root: root, objects: join(root, objectsDir), uploads: join(root, uploadsDir),
		pageSize:    PageSize,
		temps:       make(map[string]struct{}),
		durableDirs: make(map[string]struct{}),
		dirty:       make(map[string]uint64),
	}
}

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func parentOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}

// checkKey reports why key cannot name an object, or nil. A key is 1 to
// KeyMax bytes of valid UTF-8 (as S3 requires) without NUL, split by "/"
// into elements that are non-empty (no leading, trailing or doubled "/"),
// not "." or "..", and at most ElemMax bytes.
func checkKey(key string) error {
	switch {
	case key == "":
		return errors.New("empty")
	case len(key) > KeyMax:
		return fmt.Errorf("%d bytes, more than %d", len(key), KeyMax)
	case !utf8.ValidString(key):
		return errors.New("not valid UTF-8")
	case strings.IndexByte(key, 0) >= 0:
		return errors.New("contains NUL")
	}
	for e := range strings.SplitSeq(key, "/") {
		if err := checkElem(e); err != nil {
			return err
		}
	}
	return nil
}

func checkElem(e string) error {
	switch {
	case e == "":
		return errors.New(`empty path element (a leading, trailing or doubled "/")`)
	case e == "." || e == "..":
		return fmt.Errorf("path element %q", e)
	case len(e) > ElemMax:
		return fmt.Errorf("path element of %d bytes, more than %d", len(e), ElemMax)
	}
	return nil
}

func invalidKey(op, key string, why error) error {
	return fmt.Errorf("%w %q (%s): %v", ErrInvalidKey, key, op, why)
}

// objectPath maps a valid key to its directory and object file:
// "a/b/c" → objects/a.d/b.d/c.o under the root.
func (s *Store) objectPath(key string) (dir, path string) {
	var b strings.Builder
	b.Grow(len(s.objects) + len(key) + 16)
	b.WriteString(s.objects)
	elems := strings.Split(key, "/")
	for _, e := range elems[:len(elems)-1] {
		b.WriteByte('/')
		b.WriteString(e)
		b.WriteString(dirSuffix)
	}
	dir = b.String()
	return dir, dir + "/" + elems[len(elems)-1] + fileSuffix
}

// uploadDir is an upload's directory.
func (s *Store) uploadDir(id string) string { return s.uploads + "/" + id }

func partName(n int32) string { return partPrefix + fmt.Sprintf("%05d", n) }

// newID returns 16 lowercase hex digits from the store's Rand: upload ids
// and temp file names.
func (s *Store) newID() string {
	return fmt.Sprintf("%016x", s.rnd.Uint64())
}

// validID reports whether id is shaped like the ids newID makes. Any
// other id names no upload (and never reaches a path).
func validID(id string) bool {
	if len(id) != 16 {
		return false
	}
	_, err := strconv.ParseUint(id, 16, 64)
	return err == nil && strings.ToLower(id) == id
}

// later runs fn from a disk callback: a request answered without I/O
// (an invalid argument) still completes later, as the loop contract
// requires. The ReadDir is a cheap probe whose answer is ignored.
func (s *Store) later(fn func()) {
	s.disk.ReadDir(s.root, func([]string, error) { fn() })
}

// diskErr describes a failed disk operation. It does not wrap the disk's
// error: a disk's ErrNotFound or ErrExists must not be mistaken for the
// store's answer of the same name; the sentinels the store means are
// added where it means them.
func diskErr(op, path string, err error) error {
	return fmt.Errorf("diskstore: %s %s: %v", op, path, err)
}

// ambiguous marks an error of an operation that may have taken effect.
func ambiguous(op, path string, err error) error {
	return fmt.Errorf("diskstore: %s %s: %w: %v", op, path, engine.ErrAmbiguous, err)
}

// syncDir syncs dir. A failure (other than a missing directory) marks it
// dirty; a success clears a mark made before it was issued.
func (s *Store) syncDir(dir string, done func(error)) {
	issued := s.seq
	s.seq++
	s.disk.SyncDir(dir, func(err error) {
		switch {
		case err == nil:
			if mark, ok := s.dirty[dir]; ok && mark < issued {
				delete(s.dirty, dir)
			}
		case !errors.Is(err, engine.ErrNotFound):
			s.markDirty(dir)
		}
		done(err)
	})
}

func (s *Store) markDirty(dir string) {
	s.dirty[dir] = s.seq
	s.seq++
}

// settle makes dir's entries durable before a read relies on them, if an
// earlier entry change there was left unsynced; else it continues at once
// (the caller issues a disk operation next). A missing directory is
// settled: it holds nothing.
func (s *Store) settle(dir string, done func(error)) {
	if _, ok := s.dirty[dir]; !ok {
		done(nil)
		return
	}
	s.syncDir(dir, func(err error) {
		if err != nil && !errors.Is(err, engine.ErrNotFound) {
			done(fmt.Errorf("diskstore: an earlier change in %s is not durable yet and its directory sync failed again: %v", dir, err))
			return
		}
		if errors.Is(err, engine.ErrNotFound) {
			delete(s.dirty, dir)
		}
		done(nil)
	})
}

// ensureDir makes dir and its missing ancestors and makes their entries
// durable, unless dir is known to be durable already (then it continues
// at once: the caller issues a disk operation next).
func (s *Store) ensureDir(dir string, done func(error)) {
	if _, ok := s.durableDirs[dir]; ok || dir == "" {
		done(nil)
		return
	}
	s.disk.MkdirAll(dir, func(err error) {
		if err != nil {
			done(diskErr("mkdir", dir, err))
			return
		}
		s.syncUp(dir, done)
	})
}

// syncUp makes the entry of existing directory x durable, and those of its
// ancestors, bottom-up, stopping at one known durable. MkdirAll does not
// say which levels it made, so every level not known is synced into its
// parent.
func (s *Store) syncUp(x string, done func(error)) {
	if _, ok := s.durableDirs[x]; ok || x == "" {
		done(nil)
		return
	}
	parent := parentOf(x)
	s.syncDir(parent, func(err error) {
		if err != nil {
			done(diskErr("syncdir", parent, err))
			return
		}
		s.syncUp(parent, func(err error) {
			if err == nil {
				s.durableDirs[x] = struct{}{}
			}
			done(err)
		})
	})
}

// writeAtomic makes target (a file in dir) hold what fill writes, all or
// nothing: fill writes a new temp file in dir; if durable, the temp is
// synced, renamed onto target and dir is synced, so the new file is
// durable when done(nil) runs; else the rename is not followed by any
// sync (part files: see doc.go).
//
// Errors before the rename are definite (the temp is removed); a failed
// Rename or SyncDir is ambiguous: the rename may have taken effect, or
// may not survive a crash.
func (s *Store) writeAtomic(dir, target string, durable bool, fill func(f engine.File, done func(error)), done func(error)) {
	w := &atomicWrite{s: s, dir: dir, target: target, durable: durable, fill: fill, done: done}
	s.createTemp(dir, 0, w.created)
}

// atomicWrite is one writeAtomic: a temp file created, filled, synced if
// durable, closed and renamed onto the target; on any failure, closed and
// removed. Its steps are the methods below, in that order.
type atomicWrite struct {
	s       *Store
	dir     string
	target  string
	durable bool
	fill    func(f engine.File, done func(error))
	done    func(error)
	tmp     string      // the temp file's path, once created
	f       engine.File // the temp file, open until closed
}

func (w *atomicWrite) created(tmp string, f engine.File, err error) {
	if err != nil {
		w.done(err)
		return
	}
	w.tmp, w.f = tmp, f
	w.fill(f, w.filled)
}

func (w *atomicWrite) filled(err error) {
	switch {
	case err != nil:
		w.abandon(err, false)
	case w.durable:
		w.f.Sync(w.synced)
	default:
		w.f.Close(w.closed)
	}
}

func (w *atomicWrite) synced(err error) {
	if err != nil {
		// Never retried: after a failed fsync the file's contents are
		// unknown.
		w.abandon(diskErr("sync", w.tmp, err), false)
		return
	}
	w.f.Close(w.closed)
}

func (w *atomicWrite) closed(err error) {
	if err != nil {
		w.abandon(diskErr("close", w.tmp, err), true)
		return
	}
	w.s.renameInto(w.dir, w.tmp, w.target, w.durable, w.done)
}

// abandon closes (unless closed) and removes the temp file, then answers
// err.
func (w *atomicWrite) abandon(err error, closed bool) {
	remove := func() {
		w.s.disk.Remove(w.tmp, func(error) {
			delete(w.s.temps, w.tmp)
			w.done(err)
		})
	}
	if closed {
		remove()
		return
	}
	w.f.Close(func(error) { remove() })
}

// createTemp creates a new temp file in dir, trying another name if one
// is taken (a leftover of an earlier life with the same Rand stream).
func (s *Store) createTemp(dir string, attempt int, done func(tmp string, f engine.File, err error)) {
	tmp := dir + "/." + s.newID() + tempSuffix
	s.temps[tmp] = struct{}{}
	s.disk.Open(tmp, engine.OpenMode{Create: true, Write: true}, func(f engine.File, err error) {
		switch {
		case err == nil:
			done(tmp, f, nil)
		case errors.Is(err, engine.ErrExists) && attempt < 3:
			delete(s.temps, tmp)
			s.createTemp(dir, attempt+1, done)
		default:
			delete(s.temps, tmp)
			if errors.Is(err, engine.ErrNotFound) {
				// The directory is gone (removed behind the store's
				// back): forget it was made, so a retry makes it again.
				for d := dir; d != ""; d = parentOf(d) {
					delete(s.durableDirs, d)
				}
			}
			done("", nil, diskErr("create", tmp, err))
		}
	})
}

func (s *Store) renameInto(dir, tmp, target string, durable bool, done func(error)) {
	s.disk.Rename(tmp, target, func(err error) {
		if err != nil {
			// It may have happened: the directory must be synced before
			// a read trusts target. The temp, if still there, goes.
			s.markDirty(dir)
			s.disk.Remove(tmp, func(error) {
				delete(s.temps, tmp)
				done(ambiguous("rename", tmp+" -> "+target, err))
			})
			return
		}
		delete(s.temps, tmp)
		if !durable {
			done(nil)
			return
		}
		s.syncDir(dir, func(err error) {
			if err != nil {
				done(ambiguous("syncdir", dir, err))
				return
			}
			done(nil)
		})
	})
}

// writeChunks writes chunks back to back from offset 0, all issued at
// once (calls on one File complete in call order), and reports the first
// error once the last has completed.
// REQUIRES: len(chunks) > 0.
func writeChunks(f engine.File, path string, chunks [][]byte, done func(error)) {
	var first error
	off := int64(0)
	for i, c := range chunks {
		last := i == len(chunks)-1
		f.WriteAt(c, off, func(err error) {
			if err != nil && first == nil {
				first = diskErr("write", path, err)
			}
			if last {
				done(first)
			}
		})
		off += int64(len(c))
	}
}

// openChecked opens the object (or part) file at path and checks its
// header, which must name key, against the file's size. On success the
// caller owns f and must Close it. A missing file is an error wrapping
// engine.ErrNotFound; a bad header one wrapping engine.ErrCorrupt.
func (s *Store) openChecked(path, key string, done func(f engine.File, h header, first []byte, err error)) {
	s.disk.Open(path, engine.OpenMode{}, func(f engine.File, err error) {
		if err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				done(nil, header{}, nil, fmt.Errorf("diskstore: %s: %w", key, engine.ErrNotFound))
				return
			}
			done(nil, header{}, nil, diskErr("open", path, err))
			return
		}
		fail := func(err error) { f.Close(func(error) { done(nil, header{}, nil, err) }) }
		buf := make([]byte, headerMax)
		var n int
		var readErr error
		f.ReadAt(buf, 0, func(m int, err error) { n, readErr = m, err })
		f.Size(func(size int64, err error) { // completes after the ReadAt
			switch {
			case readErr != nil:
				fail(diskErr("read", path, readErr))
				return
			case err != nil:
				fail(diskErr("size", path, err))
				return
			}
			h, err := decodeHeader(buf[:n])
			switch {
			case err != nil:
				fail(corrupt(path, err))
			case h.key != key:
				fail(corrupt(path, fmt.Errorf("the header names key %q, not %q", h.key, key)))
			case size != h.size()+h.bodyLen:
				fail(corrupt(path, fmt.Errorf("file of %d bytes, its header says %d", size, h.size()+h.bodyLen)))
			default:
				done(f, h, buf[:n], nil)
			}
		})
	})
}

// readObject reads the header of the file at path and, if span is not
// nil, the body bytes [start, end) it picks (or the error it returns),
// then closes the file.
func (s *Store) readObject(path, key string, span func(h header) (start, end int64, err error),
	done func(h header, body []byte, err error)) {
	s.openChecked(path, key, func(f engine.File, h header, first []byte, err error) {
		if err != nil {
			done(header{}, nil, err)
			return
		}
		finish := func(body []byte, err error) {
			f.Close(func(error) {
				if err != nil {
					done(header{}, nil, err)
					return
				}
				done(h, body, nil)
			})
		}
		if span == nil {
			finish(nil, nil)
			return
		}
		start, end, err := span(h)
		if err != nil {
			finish(nil, err)
			return
		}
		off, n := h.size()+start, end-start
		if off+n <= int64(len(first)) { // the first read already holds it
			body := make([]byte, n)
			copy(body, first[off:])
			finish(body, nil)
			return
		}
		// n ≤ the caller's limit, and ≤ the file's size, checked above.
		body := make([]byte, n)
		f.ReadAt(body, off, func(m int, err error) {
			switch {
			case err != nil:
				finish(nil, diskErr("read", path, err))
			case int64(m) < n:
				finish(nil, corrupt(path, fmt.Errorf("read %d body bytes at %d, want %d", m, off, n)))
			default:
				finish(body, nil)
			}
		})
	})
}

// readMeta reads an upload's metadata file.
func (s *Store) readMeta(updir string, done func(m meta, err error)) {
	path := updir + "/" + metaName
	s.disk.Open(path, engine.OpenMode{}, func(f engine.File, err error) {
		if err != nil {
			if errors.Is(err, engine.ErrNotFound) {
				done(meta{}, fmt.Errorf("diskstore: %s: %w", path, engine.ErrNotFound))
				return
			}
			done(meta{}, diskErr("open", path, err))
			return
		}
		buf := make([]byte, metaMax+1) // one more: a longer file is corrupt
		f.ReadAt(buf, 0, func(n int, err error) {
			f.Close(func(error) {
				if err != nil {
					done(meta{}, diskErr("read", path, err))
					return
				}
				m, err := decodeMeta(buf[:n])
				if err != nil {
					done(meta{}, corrupt(path, err))
					return
				}
				done(m, nil)
			})
		})
	})
}

// each runs fn(i) for i in [0, n), at most par at a time, starting them
// in index order, and runs done once all have finished.
// REQUIRES: n > 0 or the caller is already inside a callback.
func each(n, par int, fn func(i int, next func()), done func()) {
	if n == 0 {
		done()
		return
	}
	started, finished := 0, 0
	var launch func()
	launch = func() {
		for started < n && started-finished < par {
			i := started
			started++
			fn(i, func() {
				finished++
				if finished == n {
					done()
					return
				}
				launch()
			})
		}
	}
	launch()
}
