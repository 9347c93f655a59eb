package main

// What a pipeline left in DATA_DIR's WAL, found read-only: its committed
// segments (commit markers under its layout, LISTed — never a claim of
// its writer object, which would fence a writer of it running elsewhere)
// and, in disk-WAL mode, the log's units no flushed generation covers.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/diskstore"
	"github.com/skipprd/skipprd/engine/wal"
	"github.com/skipprd/skipprd/storage"
)

const (
	// inspectAttempts bounds the tries of one LIST page against a store
	// that fails (a bucket's 500s); the check then fails, naming it.
	inspectAttempts = 3
	inspectBackoff  = time.Second
	// inspectObjectsMax bounds a listing: a pipeline owns at most
	// LiveSegmentsMax segments of three objects each, and its key store
	// a few hundred objects.
	inspectObjectsMax = 1 << 20
)

// leftover is what a pipeline left unapplied in a WAL.
type leftover struct {
	Store    string            // where its segments were looked for
	Segments int               // committed segments not yet reclaimed
	Oldest   engine.SnapshotID // the oldest of them
	Log      string            // the log looked at; "" without a disk WAL
	Units    int               // log units no flushed generation covers
	Damaged  []string          // log partitions that could not be read whole
}

func (l leftover) empty() bool { return l.Segments == 0 && l.Units == 0 && len(l.Damaged) == 0 }

func (l leftover) String() string {
	var parts []string
	if l.Segments > 0 {
		parts = append(parts, fmt.Sprintf("%d committed segments not yet applied in %s (oldest snapshot %s)", l.Segments, l.Store, l.Oldest))
	}
	if l.Units > 0 {
		parts = append(parts, fmt.Sprintf("%d acked units in the log %s not yet in a flushed segment", l.Units, l.Log))
	}
	for _, d := range l.Damaged {
		parts = append(parts, "a damaged log partition: "+d)
	}
	if len(parts) == 0 {
		return "nothing"
	}
	return strings.Join(parts, "; ")
}

// storeView is a segment store opened for LISTs only, on a loop of its
// own (a host's loop must not run before the host does).
type storeView struct {
	store engine.ObjectStore
	loop  *storage.Loop
	where string
	close func()
}

// openStoreView opens the store segments names ("local", "embedded",
// "s3://bucket") read-only. ok is false when it does not exist at all (a
// local or embedded store never created): nothing to list.
func openStoreView(ctx context.Context, cfg config, segments string, log *slog.Logger) (v *storeView, ok bool, err error) {
	loop := storage.NewLoop()
	v = &storeView{loop: loop}
	var closers []func()
	switch {
	case segments == segmentsLocal:
		root := filepath.Join(cfg.DataDir, segmentsDir)
		v.where = "the local segment store " + root
		if _, err := os.Stat(root); errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		disk, err := storage.NewOSDisk(loop, cfg.DataDir, storage.DiskOptions{Logger: log})
		if err != nil {
			return nil, false, err
		}
		v.store = diskstore.New(readOnlyDisk{disk}, loop.Clock(), storage.NewRand(), segmentsDir)
	case segments == segmentsEmbed:
		file := filepath.Join(cfg.DataDir, embeddedFile)
		v.where = "the embedded store " + file
		if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
			return nil, false, nil
		}
		emb, err := storage.StartEmbeddedS3(file, embeddedBucket, log)
		if err != nil {
			return nil, false, err
		}
		closers = append(closers, func() { _ = emb.Close() })
		s3 := storage.NewS3Store(loop, emb.Client(), emb.Bucket(), storage.S3Options{RequestTimeout: embeddedRequestTimeout})
		v.store = s3
		closers = append(closers, s3.Close)
	default:
		bucket := strings.TrimPrefix(segments, segmentsBucket)
		v.where = "bucket " + segments
		client, err := storage.NewS3ClientFromEnv(ctx, storage.S3ClientOptions{PathStyle: cfg.PathStyle})
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", v.where, err)
		}
		s3 := storage.NewS3Store(loop, client, bucket, storage.S3Options{RequestTimeout: cfg.requestTimeout()})
		v.store = s3
		closers = append(closers, s3.Close)
	}
	go func() { _ = loop.Run(context.Background()) }()
	v.close = func() {
		loop.Stop()
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	return v, true, nil
}

// list returns every object under prefix, page by page.
func (v *storeView) list(ctx context.Context, prefix string) ([]engine.ObjectInfo, error) {
	type answer struct {
		page engine.ListPage
		err  error
	}
	var out []engine.ObjectInfo
	token := ""
	for {
		var a answer
		for try := range inspectAttempts {
			var err error
			a, err = storage.Call(v.loop, func(done func(answer)) {
				v.store.ListObjects(prefix, token, func(p engine.ListPage, err error) { done(answer{p, err}) })
			})
			if err != nil {
				a.err = err
			}
			if a.err == nil || try+1 == inspectAttempts {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(inspectBackoff):
			}
		}
		if a.err != nil {
			return nil, fmt.Errorf("listing %q in %s: %w", prefix, v.where, a.err)
		}
		out = append(out, a.page.Objects...)
		if len(out) > inspectObjectsMax {
			return nil, fmt.Errorf("listing %q in %s: more than %d objects", prefix, v.where, inspectObjectsMax)
		}
		if a.page.NextToken == "" {
			return out, nil
		}
		token = a.page.NextToken
	}
}

// committed counts the commit markers under layout's segments in v.
func (v *storeView) committed(ctx context.Context, layout engine.Layout) (n int, oldest engine.SnapshotID, err error) {
	objs, err := v.list(ctx, layout.SegmentsPrefix())
	if err != nil {
		return 0, oldest, err
	}
	for _, o := range objs {
		if _, id, kind, ok := layout.ParseKey(o.Key); ok && kind == engine.KindMarker {
			if n == 0 || id.Less(oldest) {
				oldest = id
			}
			n++
		}
	}
	return n, oldest, nil
}

// writers returns the pipelines that have a writer object under prefix,
// each with when it was last written (every start rewrites it).
func (v *storeView) writers(ctx context.Context, prefix string) (map[string]int64, error) {
	root := strings.Trim(prefix, "/") + "/"
	objs, err := v.list(ctx, root)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, o := range objs {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, root), "/_writer")
		if ok && validName(name) && engine.NewLayout(prefix, name).WriterKey() == o.Key {
			out[name] = o.LastModifiedUnixMs
		}
	}
	return out, nil
}

// readOnlyDisk refuses every change: the store's listing removes leftover
// temp files it meets, and the check must change nothing.
type readOnlyDisk struct{ engine.Disk }

var errReadOnly = errors.New("the start-up check reads only")

func (d readOnlyDisk) Open(path string, mode engine.OpenMode, done func(engine.File, error)) {
	if mode.Write || mode.Create {
		done(nil, errReadOnly)
		return
	}
	d.Disk.Open(path, mode, done)
}
func (readOnlyDisk) Rename(_, _ string, done func(error)) { done(errReadOnly) }
func (readOnlyDisk) Remove(_ string, done func(error))    { done(errReadOnly) }
func (readOnlyDisk) SyncDir(_ string, done func(error))   { done(errReadOnly) }
func (readOnlyDisk) MkdirAll(_ string, done func(error))  { done(errReadOnly) }

// logReport is what the log under DATA_DIR/wal holds, read without
// changing a byte (no fsync, no cut tail, nothing deleted).
type logReport struct {
	// Units: unit records whose sequence no seal covers, or covered only
	// by seals without a flushed record: acked, not yet in a segment.
	Units   int
	Damaged []string // partitions that could not be read whole, and why
	// Newest is the directory of the most recently sealed generation
	// ("{prefix}/{pipeline}/p_year=…/"), "" if none: who wrote the log.
	Newest string
}

// logFileMax bounds the read of one log file: a file of the largest
// segment size holding one entry of the largest size, with alignment.
const logFileMax = wal.SegmentBytesMax + wal.EntryPayloadMax + 4*engine.DirectAlign

// inspectLog reads every partition of the log under dataDir under the
// rules recovery applies (wal.PartitionScan: a torn tail is cut, a later
// header's first_seq supersedes units at or past it, damage stops that
// partition — its units so far still count) and counts the units no
// flushed generation covers.
func inspectLog(dataDir string) (logReport, error) {
	var r logReport
	root := filepath.Join(dataDir, wal.Root)
	names, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	if err != nil {
		return r, fmt.Errorf("reading the log: %w", err)
	}
	type seal struct {
		part   uint32
		id     wal.SnapshotRef
		ranges []wal.SeqRange
	}
	var seals []seal
	flushed := map[wal.SnapshotRef]bool{}
	units := map[uint32]map[uint64]bool{}
	var newest int64
	for _, n := range names {
		part, ok := wal.ParsePartitionDir(n.Name())
		if !ok || !n.IsDir() {
			continue
		}
		have := map[uint64]bool{}
		units[part] = have
		scan := wal.NewPartitionScan(part)
		hooks := wal.PartitionHooks{
			Unit: func(_ uint64, rec *wal.UnitRecord) { have[rec.Seq] = true },
			Seal: func(_ uint64, rec *wal.SealRecord) {
				seals = append(seals, seal{part, rec.Snapshot, rec.Ranges})
				if r.Newest == "" || rec.CreatedUnixMs >= newest {
					r.Newest, newest = rec.Dir, rec.CreatedUnixMs
				}
			},
			Flushed: func(_ uint64, rec *wal.FlushedRecord) { flushed[rec.Snapshot] = true },
			Drop:    func(seq uint64) { delete(have, seq) }, // a poisoned batch, never acked
		}
		if err := scanPartition(dataDir, part, scan, hooks); err != nil {
			return r, err
		}
		if scan.Halted != nil {
			r.Damaged = append(r.Damaged, fmt.Sprintf("partition %d: %v", part, scan.Halted))
		}
	}
	// A generation flushed anywhere is committed: its units are done.
	for _, s := range seals {
		have := units[s.part]
		if !flushed[s.id] {
			continue
		}
		for _, rg := range s.ranges {
			for seq := rg.Lo; seq <= rg.Hi && seq >= rg.Lo && len(have) > 0; seq++ {
				delete(have, seq)
			}
		}
	}
	for _, have := range units {
		r.Units += len(have)
	}
	return r, nil
}

// scanPartition feeds partition part's segment files, in number order,
// to scan.
func scanPartition(dataDir string, part uint32, scan *wal.PartitionScan, hooks wal.PartitionHooks) error {
	dir := filepath.Join(dataDir, filepath.FromSlash(wal.PartitionDir(part)))
	files, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reading the log: %w", err)
	}
	var nums []uint64
	for _, f := range files {
		if num, ok := wal.ParseSegmentName(f.Name()); ok {
			nums = append(nums, num)
		}
	}
	slices.Sort(nums)
	for _, num := range nums {
		path := filepath.Join(dataDir, filepath.FromSlash(wal.SegmentPath(part, num)))
		b, err := readLogFile(path)
		if err != nil {
			return err
		}
		scan.Add(num, path, b, hooks)
	}
	return nil
}

// readLogFile reads one log file whole, refusing one larger than any log
// file the engine writes.
func readLogFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	if st.Size() > logFileMax {
		return nil, fmt.Errorf("reading the log: %s has %d bytes, more than any log file holds", path, st.Size())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the log: %w", err)
	}
	return b, nil
}

// pipelineOfDir is the pipeline a seal's directory names under prefix
// ("{prefix}/{pipeline}/p_year=…/"), "" if it names none.
func pipelineOfDir(prefix, dir string) string {
	rest, ok := strings.CutPrefix(dir, strings.Trim(prefix, "/")+"/")
	if !ok {
		return ""
	}
	name, _, ok := strings.Cut(rest, "/")
	if !ok || !validName(name) {
		return ""
	}
	return name
}

// leftBy finds what rec's owner left: its committed segments in the store
// it used, and in disk-WAL mode the log's uncovered units.
func leftBy(ctx context.Context, cfg config, rec ownerRecord, log *slog.Logger) (leftover, error) {
	var left leftover
	v, ok, err := openStoreView(ctx, cfg, rec.Segments, log)
	if err != nil {
		return left, err
	}
	if ok {
		left.Store = v.where
		left.Segments, left.Oldest, err = v.committed(ctx, engine.NewLayout(rec.Prefix, rec.Pipeline))
		v.close()
		if err != nil {
			return left, err
		}
	}
	if rec.WALStorage == walDisk {
		left.Log = filepath.Join(cfg.DataDir, wal.Root)
		lr, err := inspectLog(cfg.DataDir)
		if err != nil {
			return left, err
		}
		left.Units, left.Damaged = lr.Units, lr.Damaged
	}
	return left, nil
}
