package main

// What a pipeline left in DATA_DIR's WAL, found read-only: its committed
// segments (commit markers under its layout, LISTed — never a claim of
// its writer object, which would fence a writer of it running elsewhere)
// and, in disk-WAL mode, the log's units no flushed generation covers
// (inspect_log.go). skipprd inspect reads through the same views.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
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
		emb, err := storage.StartEmbeddedS3ReadOnly(file, embeddedBucket, log)
		if errors.Is(err, storage.ErrEmbeddedNoBucket) {
			return nil, false, nil // a file created by a start that died before its bucket: nothing in it
		}
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
	token := ""
	return collectPages(ctx, v, fmt.Sprintf("%q", prefix), func() ([]engine.ObjectInfo, bool, error) {
		p, err := callStore(v, func(done func(engine.ListPage, error)) { v.store.ListObjects(prefix, token, done) })
		if err != nil {
			return nil, false, err
		}
		token = p.NextToken
		return p.Objects, token != "", nil
	})
}

// collectPages asks for page after page (each retried) while there is a
// next one, and returns their items: at most inspectObjectsMax.
func collectPages[T any](ctx context.Context, v *storeView, what string, page func() (items []T, more bool, err error)) ([]T, error) {
	var out []T
	for {
		var items []T
		more := false
		err := v.retry(ctx, func() error {
			var err error
			items, more, err = page()
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("listing %s in %s: %w", what, v.where, err)
		}
		out = append(out, items...)
		if len(out) > inspectObjectsMax {
			return nil, fmt.Errorf("listing %s in %s: more than %d", what, v.where, inspectObjectsMax)
		}
		if !more {
			return out, nil
		}
	}
}

// retry runs one request up to inspectAttempts times, inspectBackoff
// apart, until it succeeds; a missing object is an answer, not retried.
func (v *storeView) retry(ctx context.Context, try func() error) error {
	var err error
	for attempt := range inspectAttempts {
		if err = try(); err == nil || errors.Is(err, engine.ErrNotFound) || attempt+1 == inspectAttempts {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(inspectBackoff):
		}
	}
	return err
}

// callStore runs one request of v's store on its loop and waits for its
// answer.
func callStore[T any](v *storeView, start func(done func(T, error))) (T, error) {
	type answer struct {
		v   T
		err error
	}
	a, err := storage.Call(v.loop, func(done func(answer)) {
		start(func(x T, err error) { done(answer{x, err}) })
	})
	if err != nil {
		return a.v, err
	}
	return a.v, a.err
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
// temp files it meets, and the start-up check and skipprd inspect must
// change nothing.
type readOnlyDisk struct{ engine.Disk }

var errReadOnly = errors.New("a read-only view of the store changes nothing")

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
