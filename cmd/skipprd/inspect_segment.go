package main

// One live segment as inspect reports it: its commit marker decoded, its
// body checked against it, its completion bitmap read.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// readSegment reads the segment whose commit marker m is: the marker,
// the body's index (its PART headers, not its payload: the overview
// stays cheap; inspect segment ID verifies the checksum), and the
// bitmap. An error wrapping engine.ErrNotFound: the segment was reclaimed
// since the listing. Any other error is damage, naming the object.
func readSegment(ctx context.Context, v *storeView, layout engine.Layout, m engine.ObjectInfo, ro rootObjects) (inspectSegment, segment.Offsets, error) {
	_, id, _, _ := layout.ParseKey(m.Key)
	ix, err := readMarker(ctx, v, m.Key)
	if err != nil {
		return inspectSegment{}, nil, err
	}
	body, ok := ro.bodies[id]
	if !ok {
		return inspectSegment{}, nil, v.gone(ctx, m.Key, fmt.Errorf("commit marker %s: its body %s is missing from %s", m.Key,
			strings.TrimSuffix(m.Key, ".commit"), v.where))
	}
	if err := checkIndex(ctx, v, ix, body); err != nil {
		return inspectSegment{}, nil, v.gone(ctx, m.Key, err)
	}
	bm, err := readBitmap(ctx, v, ro.bitmaps, id, len(ix.Entries))
	if err != nil {
		return inspectSegment{}, nil, err
	}
	return segmentOf(id, m.Key, ix, bm), ix.Offsets, nil
}

// readMarker reads and decodes a commit marker.
func readMarker(ctx context.Context, v *storeView, key string) (*segment.Index, error) {
	raw, err := v.get(ctx, key, segment.MarkerBytesMax)
	if err != nil {
		return nil, err
	}
	return segment.DecodeMarker(key, raw)
}

// gone is err, unless the marker is gone since: then the segment was
// reclaimed meanwhile (a reclaim deletes the marker first), and the
// answer wraps engine.ErrNotFound.
func (v *storeView) gone(ctx context.Context, marker string, err error) error {
	if _, again := v.get(ctx, marker, segment.MarkerBytesMax); errors.Is(again, engine.ErrNotFound) {
		return again
	}
	return err
}

// checkIndex reads the body's index by ranges and requires it to be the
// marker's copy, with the marker's length.
func checkIndex(ctx context.Context, v *storeView, ix *segment.Index, body engine.ObjectInfo) error {
	if body.Size != ix.BodyBytes {
		return fmt.Errorf("segment body %s in %s: %d bytes, its commit marker says %d", body.Key, v.where, body.Size, ix.BodyBytes)
	}
	got, err := segment.ReadIndex(body.Key, objectReader{ctx, v, body.Key, body.Size}, body.Size)
	if err != nil {
		return fmt.Errorf("segment body %s in %s: %w", body.Key, v.where, err)
	}
	if !got.Equal(ix) {
		return fmt.Errorf("segment body %s in %s: its index differs from its commit marker's copy", body.Key, v.where)
	}
	return nil
}

// readBitmap reads segment id's completion bitmap, if it has one; none is
// a bitmap of parts clear bits (nothing applied yet, or not yet recorded).
func readBitmap(ctx context.Context, v *storeView, bitmaps map[engine.SnapshotID]engine.ObjectInfo, id engine.SnapshotID, parts int) (*segment.Bitmap, error) {
	o, ok := bitmaps[id]
	if !ok {
		return nil, nil
	}
	raw, err := v.get(ctx, o.Key, segment.BitmapBytesMax)
	if errors.Is(err, engine.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	bm, err := segment.DecodeBitmap(o.Key, raw)
	if err != nil {
		return nil, err
	}
	if bm.Len() != parts {
		return nil, fmt.Errorf("completion bitmap %s in %s: %d bits, its segment has %d parts", o.Key, v.where, bm.Len(), parts)
	}
	return bm, nil
}

// segmentOf is the report of a segment from its marker's index and its
// bitmap (nil: none).
func segmentOf(id engine.SnapshotID, marker string, ix *segment.Index, bm *segment.Bitmap) inspectSegment {
	s := inspectSegment{ID: id.String(), Marker: marker, CreatedUnixMs: ix.CreatedAtUnixMs, BodyBytes: ix.BodyBytes,
		Pipeline: ix.Origin.Pipeline, Parts: []inspectPart{}, BitmapObject: bm != nil, Cuts: []inspectCut{}}
	s.Offsets, s.IdempotencyKeys = offsetsOf(ix.Offsets)
	if !ix.Origin.WAL.IsZero() {
		s.WALID = ix.Origin.WAL.String()
	}
	var bits strings.Builder
	for _, e := range ix.Entries {
		applied := bm != nil && bm.IsSet(e.Ordinal)
		s.Parts = append(s.Parts, inspectPart{Ordinal: uint32(e.Ordinal), Sink: e.Key.SinkRef, Namespace: e.Key.Namespace,
			Partition: e.Key.Partition, Rows: e.Rows, Bytes: e.ArrowLen + e.SidecarLen, SidecarBytes: e.SidecarLen, Applied: applied})
		bits.WriteByte("01"[b2i(applied)])
		s.Applied += b2i(applied)
	}
	s.Bitmap = bits.String()
	for _, c := range ix.Cuts {
		s.Cuts = append(s.Cuts, inspectCut{Sink: c.Group.SinkRef, Namespace: c.Group.Namespace, First: c.First.String(),
			Segments: c.Segments, Parts: c.Parts, Reason: c.Reason.String()})
	}
	return s
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
