package sinks

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/skipprd/skipprd/engine"
)

// ParquetDir applies each job as one Parquet file under a root folder of a
// Disk, at the path ObjectKey gives with an empty prefix:
//
//	{root}/{namespace}/p_year=YYYY/p_month=MM/p_day=DD/{job.ID}.parquet
//
// One Apply, in order (every step a Disk or Executor call whose callback
// runs on the loop):
//
//	MkdirAll(folder)
//	SyncDir(every ancestor of folder, up to the disk root)  once per folder per sink
//	ReadDir(folder), Remove(every other writer's temp file)  once per folder per sink
//	Open(final)               exists ⇒ its footer decides (existing.go): Size,
//	                          ReadAt(the last 64 KiB), [ReadAt(a longer footer)],
//	                          judged on the Executor, Close; this job's content
//	                          ⇒ SyncDir(folder), applied: success; another job's
//	                          ⇒ ErrCannotApply wrapping ErrIDCollision
//	encode                    (Executor)
//	Open(temp, Create)        exists ⇒ Remove(temp) and create again
//	WriteAt(body, 0), Sync, Close
//	Rename(temp, final)
//	SyncDir(folder)           the rename is durable: success
//
// Why a crash anywhere leaves either no final file or a complete one: the
// final name only ever appears by renaming a temp file whose bytes a Sync
// made durable first, and rename is atomic. A crash before the rename
// leaves at most a temp file (hidden from Hive-style readers by its
// leading dot, named after the job so the next attempt replaces it); a
// crash after it leaves the complete file, or — if the rename was not yet
// durable — no final file and the temp file. Success is reported only
// once the final entry is durable: after SyncDir(folder), and after the
// folder's own entry and its parents' are durable (MkdirAll's new
// directories are entries of their parents, lost in a crash until those
// are synced). The existence check syncs the folder too, because the file
// it finds may come from an attempt that crashed between the rename and
// its SyncDir.
//
// Temp files are named after the job and the writer (a token drawn when
// the sink is made), so two writers applying one job at once — a zombie
// that has not noticed it was superseded, and its successor, sharing the
// folder — never share one: a shared name would let one writer rename the
// other's half-written file into place. A writer removes the other
// writers' temp files when it first uses a folder (leftovers of crashed
// processes; a live writer that loses its temp file fails its rename and
// retries). An Apply of a job whose earlier Apply on this sink is still in
// flight joins it: both callbacks get its result — if it is the same job
// (Content); another job under the id is answered with an error to retry
// once the first is done, when the final file's footer will tell.
type ParquetDir struct {
	disk  engine.Disk
	exec  engine.Executor
	root  string // clean, relative; "" is the disk root
	token string // names this writer's temp files (tempName)

	// inflight holds, per final file being written, the attempt: its
	// job's Content and every callback waiting for it.
	// INVARIANT: every waiting list is non-empty.
	inflight map[string]*dirInflight
	// durableDirs holds folders whose own entry and ancestors' entries
	// this sink has synced, and whose other writers' temp files it has
	// removed. Entries stay durable (nothing here removes directories),
	// so each folder is prepared once per sink, not once per job.
	// INVARIANT: len(durableDirs) <= durableDirsMax.
	durableDirs map[string]bool
	stats       parquetStats
}

// durableDirsMax bounds durableDirs. A folder is one namespace's day, so a
// sink sees few; past the bound the set is simply cleared, which costs a
// few directory syncs, never correctness.
const durableDirsMax = 1024

var _ engine.Sink = (*ParquetDir)(nil)

// NewParquetDir returns a sink writing under root ("" or "." for the
// disk's root) of disk; encoding runs in exec.
// REQUIRES: root is relative and does not climb out of the disk ("..").
func NewParquetDir(disk engine.Disk, exec engine.Executor, rnd engine.Rand, root string) *ParquetDir {
	if disk == nil || exec == nil || rnd == nil {
		panic("sinks: NewParquetDir with a nil disk, executor or rand")
	}
	clean := path.Clean(root)
	if clean == "." {
		clean = ""
	}
	if strings.HasPrefix(clean, "/") || clean == ".." || strings.HasPrefix(clean, "../") {
		panic(fmt.Sprintf("sinks: NewParquetDir root %q is not inside the disk", root))
	}
	return &ParquetDir{disk: disk, exec: exec, root: clean, token: fmt.Sprintf("%016x", rnd.Uint64()),
		inflight: make(map[string]*dirInflight), durableDirs: make(map[string]bool)}
}

// Path returns the path of job's final file on the disk.
func (p *ParquetDir) Path(job *engine.Job) string {
	return path.Join(p.root, jobDir(job), fileName(job))
}

// Stats returns the sink's counts of replays, trusted legacy files and
// collisions.
func (p *ParquetDir) Stats() ParquetStats { return p.stats.get() }

// Apply implements engine.Sink (the steps are in the type's comment).
// Errors name the job, its namespace and the file.
func (p *ParquetDir) Apply(job *engine.Job, done func(err error)) {
	if job == nil || done == nil {
		panic("sinks: ParquetDir Apply with a nil job or callback")
	}
	rel := jobDir(job) + "/" + fileName(job)
	p.WriteFile(job, rel, func() ([]byte, error) { return encodeJob(job) }, func(_ int64, err error) { done(err) })
}

// WriteFile puts one file of job at rel, a path under the sink's root,
// exactly once, by the steps of Apply: a file already there is judged by
// its footer (the job's own ⇒ success); otherwise encode runs on the
// Executor and its bytes are written to a temp file, synced and renamed
// into place. done gets the final file's size. The Iceberg sink writes
// its data files through it. REQUIRES: rel is clean, relative, names a
// file inside a folder, and is not a temp name.
func (p *ParquetDir) WriteFile(job *engine.Job, rel string, encode func() ([]byte, error), done func(size int64, err error)) {
	if job == nil || encode == nil || done == nil {
		panic("sinks: ParquetDir WriteFile with a nil job, encoder or callback")
	}
	dir, name := parentDir(rel), rel[strings.LastIndexByte(rel, '/')+1:]
	if path.Clean(rel) != rel || strings.HasPrefix(rel, "/") || strings.HasPrefix(rel, "../") || dir == "" || isTempName(name) {
		panic(fmt.Sprintf("sinks: ParquetDir WriteFile path %q is not a clean file path inside a folder", rel))
	}
	dir = path.Join(p.root, dir)
	final := dir + "/" + name
	if in, ok := p.inflight[final]; ok {
		if in.content != job.Content {
			err := fmt.Errorf("sinks: apply job %s (namespace %q): another job under its id (content %s, this job's %s) is being applied to %s; retry",
				job.ID, job.Namespace, in.content, job.Content, final)
			p.exec.Go(func() {}, func() { done(0, err) }) // never inside Apply
			return
		}
		in.waiting = append(in.waiting, done)
		return
	}
	p.inflight[final] = &dirInflight{content: job.Content, waiting: []func(int64, error){done}}
	a := &dirApply{p: p, job: job, dir: dir, final: final, temp: dir + "/" + tempPrefix + name + "." + p.token + tempSuffix, encodeFn: encode}
	a.mkdir()
}

// dirInflight is an attempt in flight, as Apply sees it.
type dirInflight struct {
	content string
	waiting []func(size int64, err error)
}

// dirApply is one attempt to apply one job; its methods are the steps,
// each issued from the previous one's callback.
type dirApply struct {
	p                *ParquetDir
	job              *engine.Job
	dir, final, temp string
	encodeFn         func() ([]byte, error)
	body             []byte      // the encoded file, once encoded
	size             int64       // the final file's size, once known
	f                engine.File // the open temp file, nil when closed
}

func (a *dirApply) mkdir() {
	a.p.disk.MkdirAll(a.dir, func(err error) {
		if err != nil {
			a.finish(err)
			return
		}
		a.prepare(a.checkFinal)
	})
}

// prepare readies the folder once per sink, then runs next: its entry and
// its ancestors' made durable, deepest first, and the temp files of other
// writers removed.
func (a *dirApply) prepare(next func()) {
	if a.p.durableDirs[a.dir] {
		next()
		return
	}
	var dirs []string
	for d := a.dir; d != ""; {
		d = parentDir(d)
		dirs = append(dirs, d)
	}
	var step func(i int)
	step = func(i int) {
		if i == len(dirs) {
			a.removeOthersTemps(func() {
				a.p.markDurable(a.dir)
				next()
			})
			return
		}
		a.p.disk.SyncDir(dirs[i], func(err error) {
			if err != nil {
				a.finish(err)
				return
			}
			step(i + 1)
		})
	}
	step(0)
}

// removeOthersTemps removes the temp files in the folder that are not
// this writer's, then runs next. A name already gone is fine (its writer
// renamed or removed it meanwhile); any other error fails the attempt, so
// the folder is prepared again by the retry.
func (a *dirApply) removeOthersTemps(next func()) {
	a.p.disk.ReadDir(a.dir, func(names []string, err error) {
		if err != nil {
			a.finish(err)
			return
		}
		var stale []string
		for _, n := range names {
			if isTempName(n) && !isTempOf(n, a.p.token) {
				stale = append(stale, a.dir+"/"+n)
			}
		}
		var step func(i int)
		step = func(i int) {
			if i == len(stale) {
				next()
				return
			}
			a.p.disk.Remove(stale[i], func(err error) {
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					a.finish(err)
					return
				}
				step(i + 1)
			})
		}
		step(0)
	})
}

func (p *ParquetDir) markDurable(dir string) {
	if len(p.durableDirs) >= durableDirsMax {
		clear(p.durableDirs)
	}
	p.durableDirs[dir] = true
}

// checkFinal looks for the final file: present means an earlier attempt
// applied the job, if the file is the job's.
func (a *dirApply) checkFinal() {
	a.p.disk.Open(a.final, engine.OpenMode{}, func(f engine.File, err error) {
		switch {
		case err == nil:
			a.checkExisting(f)
		case errors.Is(err, engine.ErrNotFound):
			a.encode()
		default:
			a.finish(err)
		}
	})
}

// checkExisting judges the final file f found in place by its footer
// (existing.go), closes it, and answers: the job's ⇒ syncFolder, success.
func (a *dirApply) checkExisting(f engine.File) {
	// Read-only: a failed close loses nothing.
	closeAnd := func(next func()) { f.Close(func(error) { next() }) }
	f.Size(func(size int64, err error) {
		if err != nil {
			closeAnd(func() { a.finish(fmt.Errorf("the file exists, and reading its size: %w", err)) })
			return
		}
		read := func(off, n int64, done func([]byte, error)) {
			b := make([]byte, n)
			f.ReadAt(b, off, func(got int, err error) {
				switch {
				case err != nil:
					done(nil, err)
				case int64(got) != n:
					done(nil, fmt.Errorf("read %d bytes at %d of a file of %d bytes, asked %d: it changed", got, off, size, n))
				default:
					done(b, nil)
				}
			})
		}
		checkExisting(a.p.exec, "parquet-dir", "the existing file", a.job, size, read, func(legacy bool, err error) {
			a.p.stats.count(legacy, err)
			a.size = size
			closeAnd(func() {
				if err != nil {
					a.finish(err)
					return
				}
				a.syncFolder()
			})
		})
	})
}

func (a *dirApply) encode() {
	var encErr error
	a.p.exec.Go(func() { a.body, encErr = a.encodeFn() }, func() {
		if encErr != nil {
			a.finish(encErr)
			return
		}
		a.createTemp(true)
	})
}

// createTemp creates the temp file; a leftover of a crashed attempt is
// removed first (once: a second ErrExists is an error).
func (a *dirApply) createTemp(removeLeftover bool) {
	a.p.disk.Open(a.temp, engine.OpenMode{Create: true, Write: true}, func(f engine.File, err error) {
		switch {
		case err == nil:
			a.f = f
			a.write()
		case removeLeftover && errors.Is(err, engine.ErrExists):
			a.p.disk.Remove(a.temp, func(err error) {
				if err != nil && !errors.Is(err, engine.ErrNotFound) {
					a.finish(err)
					return
				}
				a.createTemp(false)
			})
		default:
			a.finish(err)
		}
	})
}

func (a *dirApply) write() {
	a.size = int64(len(a.body))
	a.f.WriteAt(a.body, 0, func(err error) {
		if err != nil {
			a.abandon(err)
			return
		}
		// After a failed Sync the file's contents are unknown: it is never
		// synced again, only abandoned (and replaced by the next attempt).
		a.f.Sync(func(err error) {
			if err != nil {
				a.abandon(err)
				return
			}
			a.closeAndRename()
		})
	})
}

func (a *dirApply) closeAndRename() {
	f := a.f
	a.f = nil
	f.Close(func(err error) {
		if err != nil {
			a.abandon(err)
			return
		}
		a.p.disk.Rename(a.temp, a.final, func(err error) {
			if err != nil {
				a.abandon(err)
				return
			}
			a.syncFolder()
		})
	})
}

// syncFolder makes the final entry durable and reports success.
func (a *dirApply) syncFolder() {
	a.p.disk.SyncDir(a.dir, func(err error) { a.finish(err) })
}

// abandon reports err after a best-effort cleanup: close the temp file if
// open, remove it. Neither outcome matters — a leftover is replaced by the
// next attempt, and a temp already renamed is simply not found.
func (a *dirApply) abandon(err error) {
	remove := func() { a.p.disk.Remove(a.temp, func(error) { a.finish(err) }) }
	if a.f == nil {
		remove()
		return
	}
	f := a.f
	a.f = nil
	f.Close(func(error) { remove() })
}

// finish answers every Apply waiting on this attempt.
func (a *dirApply) finish(err error) {
	if err != nil {
		err = fmt.Errorf("sinks: apply job %s (namespace %q) to file %s: %w", a.job.ID, a.job.Namespace, a.final, err)
	}
	in := a.p.inflight[a.final]
	delete(a.p.inflight, a.final)
	a.body = nil
	size := a.size
	if err != nil {
		size = 0
	}
	for _, done := range in.waiting {
		done(size, err)
	}
}

// parentDir returns the directory holding p ("" for the root's children).
func parentDir(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i]
	}
	return ""
}
