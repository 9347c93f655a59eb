package main

// Gathering the report: one listing of the pipeline's root in its
// segment store, then each object the report needs, read and decoded by
// package segment with its format's bound. A listing on a running
// pipeline is a moment of it: an object reclaimed between the listing
// and its read is left out (it was no longer live), never reported as
// damage.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
	"github.com/skipprd/skipprd/engine/wal"
)

// gatherReport reads what inspect prints for cfg's pipeline.
func gatherReport(ctx context.Context, cfg config, log *slog.Logger) (*inspectReport, error) {
	layout := engine.NewLayout(cfg.WALPrefix, cfg.Pipeline)
	r := &inspectReport{ReadOnly: true, Pipeline: cfg.Pipeline, WALStorage: string(cfg.WALStorage), DataDir: cfg.DataDir,
		Root: layout.Root(), Segments: []inspectSegment{}, Orphans: []inspectOrphan{}, Uploads: []inspectUpload{},
		Problems: []string{}, Offsets: inspectOffsets{Checkpoint: []inspectOffset{}, Committed: []inspectOffset{}}}
	window := cfg.engineConfig().IdempotencyWindow
	r.Keys.WindowSeconds = int64(window.Seconds())
	r.Keys.BucketSeconds = int64(engine.IdemBucketWidth(window).Seconds())
	if cfg.WALStorage == walDisk {
		lv, err := readLog(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		r.Log = summarizeLog(cfg.DataDir, lv)
		for _, p := range r.Log.Partitions {
			if p.Halted != "" {
				r.Problems = append(r.Problems, fmt.Sprintf("log partition %d is damaged (recovery halts it): %s", p.Partition, p.Halted))
			}
		}
	}
	v, ok, err := openStoreView(ctx, cfg, recordOf(cfg).Segments, log)
	if err != nil {
		return nil, err
	}
	if !ok {
		r.Store, r.StoreMissing = missingStore(cfg), true
		return r, nil
	}
	defer v.close()
	r.Store = v.where
	return r, gatherStore(ctx, v, layout, r)
}

// missingStore names the store openStoreView found missing.
func missingStore(cfg config) string {
	if cfg.WALStorage == walEmbedded {
		return "the embedded store " + filepath.Join(cfg.DataDir, embeddedFile)
	}
	return "the local segment store " + filepath.Join(cfg.DataDir, segmentsDir)
}

// rootObjects is the listing of a pipeline's root, sorted out.
type rootObjects struct {
	markers []engine.ObjectInfo // commit markers, in commit order
	bodies  map[engine.SnapshotID]engine.ObjectInfo
	bitmaps map[engine.SnapshotID]engine.ObjectInfo
	idem    []engine.ObjectInfo // the key store's manifests and runs
	other   []engine.ObjectInfo // under the segments' folders, not a segment object
}

// gatherStore fills r from the store: segments, offsets, key store,
// orphans, uploads.
func gatherStore(ctx context.Context, v *storeView, layout engine.Layout, r *inspectReport) error {
	objs, err := v.list(ctx, layout.Root())
	if err != nil {
		return err
	}
	ro := sortRoot(layout, objs)
	committed := segment.Offsets(nil)
	for _, m := range ro.markers {
		s, offsets, err := readSegment(ctx, v, layout, m, ro)
		switch {
		case errors.Is(err, engine.ErrNotFound):
			continue // reclaimed since the listing
		case err != nil:
			r.Problems = append(r.Problems, err.Error())
			continue
		}
		r.Segments = append(r.Segments, s)
		committed = segment.MaxMerge(committed, offsets)
	}
	if err := readOffsets(ctx, v, layout, committed, r); err != nil {
		return err
	}
	if err := readKeyStore(ctx, v, layout, ro.idem, r); err != nil {
		return err
	}
	r.Orphans = orphansOf(layout, ro)
	ups, err := v.uploads(ctx, layout.Root())
	if err != nil {
		return err
	}
	for _, u := range ups {
		r.Uploads = append(r.Uploads, inspectUpload{u.Key, u.UploadID, u.InitiatedUnixMs})
	}
	return nil
}

// sortRoot sorts a listing of layout's root by what each object is.
func sortRoot(layout engine.Layout, objs []engine.ObjectInfo) rootObjects {
	ro := rootObjects{bodies: map[engine.SnapshotID]engine.ObjectInfo{}, bitmaps: map[engine.SnapshotID]engine.ObjectInfo{}}
	ids := map[string]engine.SnapshotID{}
	for _, o := range objs {
		_, id, kind, ok := layout.ParseKey(o.Key)
		switch {
		case ok && kind == engine.KindMarker:
			ro.markers, ids[o.Key] = append(ro.markers, o), id
		case ok && kind == engine.KindBody:
			ro.bodies[id] = o
		case ok && kind == engine.KindBitmap:
			ro.bitmaps[id] = o
		case strings.HasPrefix(o.Key, layout.IdemBucketsPrefix()):
			ro.idem = append(ro.idem, o)
		case strings.HasPrefix(o.Key, layout.SegmentsPrefix()):
			ro.other = append(ro.other, o)
		}
	}
	slices.SortFunc(ro.markers, func(a, b engine.ObjectInfo) int { return ids[a.Key].Compare(ids[b.Key]) })
	return ro
}

// readOffsets reads the offsets checkpoint and merges it with the live
// segments' offsets.
func readOffsets(ctx context.Context, v *storeView, layout engine.Layout, live segment.Offsets, r *inspectReport) error {
	key := layout.CheckpointKey()
	raw, err := v.get(ctx, key, segment.CheckpointBytesMax)
	var checkpoint segment.Offsets
	switch {
	case errors.Is(err, engine.ErrNotFound): // none written yet
	case err != nil:
		return err
	default:
		r.Offsets.CheckpointEpoch, checkpoint, err = segment.DecodeCheckpoint(key, raw)
		if err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	r.Offsets.Checkpoint, _ = offsetsOf(checkpoint)
	r.Offsets.Committed, _ = offsetsOf(segment.MaxMerge(checkpoint, live))
	return nil
}

// readKeyStore reads every bucket manifest of the idempotency-key store
// (the runs' sizes come from the listing: a manifest lists their counts).
func readKeyStore(ctx context.Context, v *storeView, layout engine.Layout, objs []engine.ObjectInfo, r *inspectReport) error {
	k := &r.Keys
	for _, o := range objs {
		k.Bytes += o.Size
		b, ok := layout.ParseIdemBucketKey(o.Key)
		if !ok || o.Key != layout.IdemBucketKey(b) {
			continue // a run: its manifest counts it
		}
		raw, err := v.get(ctx, o.Key, max(segment.KeyManifestBytesMax, segment.CheckpointBytesMax))
		if errors.Is(err, engine.ErrNotFound) {
			continue // expired since the listing
		}
		if err != nil {
			return err
		}
		k.Buckets++
		if err := addManifest(o.Key, raw, k); err != nil {
			r.Problems = append(r.Problems, err.Error())
		}
	}
	return nil
}

// addManifest adds one bucket's manifest (or old-format checkpoint) to k.
func addManifest(key string, raw []byte, k *inspectKeys) error {
	if segment.IsCheckpoint(raw) {
		_, legacy, err := segment.DecodeCheckpoint(key, raw)
		k.LegacyBuckets++
		k.Keys += int64(len(legacy))
		for _, o := range legacy {
			k.widen(o.Value, o.Value)
		}
		return err
	}
	_, runs, err := segment.DecodeKeyManifest(key, raw)
	for _, run := range runs {
		k.Runs++
		k.Keys += int64(run.Count)
		k.widen(run.MinValue, run.Value)
	}
	return err
}

// widen extends the span of key values k reports to [lo, hi].
func (k *inspectKeys) widen(lo, hi uint64) {
	if k.OldestUnixMs == 0 || int64(lo) < k.OldestUnixMs {
		k.OldestUnixMs = int64(lo)
	}
	k.NewestUnixMs = max(k.NewestUnixMs, int64(hi))
}

// orphansOf lists the objects no live segment accounts for.
func orphansOf(layout engine.Layout, ro rootObjects) []inspectOrphan {
	live := map[engine.SnapshotID]bool{}
	for _, m := range ro.markers {
		_, id, _, _ := layout.ParseKey(m.Key)
		live[id] = true
	}
	out := []inspectOrphan{}
	add := func(o engine.ObjectInfo, why string) {
		out = append(out, inspectOrphan{o.Key, o.Size, o.LastModifiedUnixMs, why})
	}
	for id, o := range ro.bodies {
		if !live[id] {
			add(o, "a segment body without its commit marker: a commit that never landed (or one being written now), or a reclaim that stopped part way")
		}
	}
	for id, o := range ro.bitmaps {
		if !live[id] {
			add(o, "a completion bitmap without its commit marker: a reclaim that stopped part way")
		}
	}
	for _, o := range ro.other {
		add(o, "not a segment object, under the segments' folders")
	}
	slices.SortFunc(out, func(a, b inspectOrphan) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// summarizeLog turns the log read for the report.
func summarizeLog(dataDir string, lv *logView) *inspectLogSummary {
	s := &inspectLogSummary{Root: filepath.Join(dataDir, wal.Root), UnflushedUnits: lv.unflushedUnits(),
		Partitions: []inspectLogPartition{}}
	for _, p := range lv.Partitions {
		ip := inspectLogPartition{Partition: p.Partition, Files: []inspectLogFile{}}
		if p.Halted != nil {
			ip.Halted = p.Halted.Error()
		}
		for _, f := range p.Files {
			gens, unsealed := lv.dirty(p.Partition, f)
			ip.Files = append(ip.Files, inspectLogFile{Name: filepath.Base(f.Path), Bytes: f.Bytes, Torn: f.Torn,
				Units: f.Units, FirstSeq: f.FirstSeq, LastSeq: f.LastSeq, Seals: refs(f.Seals), Flushed: refs(f.Flushed),
				Dirty: refs(gens), Unsealed: unsealed})
		}
		s.Partitions = append(s.Partitions, ip)
	}
	return s
}

// refs names generations as snapshot ids (never nil: an empty list).
func refs(rs []wal.SnapshotRef) []string {
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, engine.SnapshotID{Epoch: r.Epoch, Seq: r.Seq}.String())
	}
	return out
}
