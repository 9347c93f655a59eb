package main

// skipprd inspect segment ID: one segment decoded whole — its marker,
// its body verified against it (length, SHA-256, index), its index
// entries, offsets, cuts, bitmap, and each CDC sidecar's rows by kind.

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// inspectSegmentDoc is inspect segment ID's JSON document: the segment
// as the overview reports it, and what only its body says.
type inspectSegmentDoc struct {
	ReadOnly bool   `json:"read_only"` // always true
	Store    string `json:"store"`
	inspectSegment
	Body       string           `json:"body"`        // the body's key
	BodySHA256 string           `json:"body_sha256"` // its footer checksum, verified
	Index      []inspectEntry   `json:"index"`
	Sidecars   []inspectSidecar `json:"sidecars"` // the PARTs with a CDC sidecar
}

// inspectEntry is one index entry: a PART header.
type inspectEntry struct {
	Ordinal      uint32 `json:"ordinal"`
	Key          string `json:"key"`            // sink/namespace/partition@bucket#schema
	BucketUnixMs *int64 `json:"bucket_unix_ms"` // null: the key has no time bucket
	Schema       string `json:"schema"`         // the schema fingerprint, 16 hex digits
	ArrowStart   int64  `json:"arrow_start"`
	ArrowLen     int64  `json:"arrow_len"`
	SidecarStart int64  `json:"sidecar_start"`
	SidecarLen   int64  `json:"sidecar_len"`
	Rows         int64  `json:"rows"`
}

// inspectSidecar is one PART's CDC sidecar: its rows by mutation kind.
type inspectSidecar struct {
	Ordinal uint32         `json:"ordinal"`
	Rows    int            `json:"rows"`
	Kinds   map[string]int `json:"kinds"` // insert, update, delete
}

// errNoSegment: the store has no live segment of the id asked for.
var errNoSegment = errors.New("no such live segment")

// decodeSegment reads segment id of cfg's pipeline whole.
func decodeSegment(ctx context.Context, cfg config, id engine.SnapshotID, log *slog.Logger) (*inspectSegmentDoc, error) {
	layout := engine.NewLayout(cfg.WALPrefix, cfg.Pipeline)
	v, ok, err := openStoreView(ctx, cfg, recordOf(cfg).Segments, log)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %s: %s does not exist", errNoSegment, id, missingStore(cfg))
	}
	defer v.close()
	objs, err := v.list(ctx, layout.SegmentsPrefix())
	if err != nil {
		return nil, err
	}
	ro := sortRoot(layout, objs)
	for _, m := range ro.markers {
		if _, mid, _, _ := layout.ParseKey(m.Key); mid == id {
			return decodeLive(ctx, v, m, ro, id)
		}
	}
	return nil, fmt.Errorf("%w: %s has no commit marker of %s under %s (skipprd inspect lists the live ones)", errNoSegment, v.where, id, layout.SegmentsPrefix())
}

// decodeLive decodes the segment whose commit marker m is.
func decodeLive(ctx context.Context, v *storeView, m engine.ObjectInfo, ro rootObjects, id engine.SnapshotID) (*inspectSegmentDoc, error) {
	ix, err := readMarker(ctx, v, m.Key)
	if err != nil {
		return nil, err
	}
	bodyInfo, ok := ro.bodies[id]
	if !ok {
		return nil, fmt.Errorf("commit marker %s: its body is missing from %s", m.Key, v.where)
	}
	r := objectReader{ctx, v, bodyInfo.Key, bodyInfo.Size}
	body, err := segment.CheckBody(ix, bodyInfo.Key, r, bodyInfo.Size)
	if err != nil {
		return nil, fmt.Errorf("segment body %s in %s: %w", bodyInfo.Key, v.where, err)
	}
	bm, err := readBitmap(ctx, v, ro.bitmaps, id, len(ix.Entries))
	if err != nil {
		return nil, err
	}
	doc := &inspectSegmentDoc{ReadOnly: true, Store: v.where, inspectSegment: segmentOf(id, m.Key, body.Index, bm),
		Body: bodyInfo.Key, BodySHA256: hex.EncodeToString(ix.BodySum[:]), Index: []inspectEntry{}, Sidecars: []inspectSidecar{}}
	for _, e := range ix.Entries {
		doc.Index = append(doc.Index, entryOf(e))
		if !e.HasSidecar() {
			continue
		}
		sc, err := readSidecar(r, bodyInfo.Key, e)
		if err != nil {
			return nil, err
		}
		doc.Sidecars = append(doc.Sidecars, sc)
	}
	return doc, nil
}

func entryOf(e segment.IndexEntry) inspectEntry {
	ie := inspectEntry{Ordinal: uint32(e.Ordinal), Key: e.Key.String(), Schema: fmt.Sprintf("%016x", uint64(e.Key.Schema)),
		ArrowStart: e.ArrowStart, ArrowLen: e.ArrowLen, SidecarStart: e.SidecarStart, SidecarLen: e.SidecarLen, Rows: e.Rows}
	if e.Key.Bucketed {
		ie.BucketUnixMs = &e.Key.BucketUnixMs
	}
	return ie
}

// readSidecar decodes entry e's CDC sidecar from the body (verified by
// CheckBody, so its length is the body's, at most segment.BodyBytesMax).
func readSidecar(r objectReader, key string, e segment.IndexEntry) (inspectSidecar, error) {
	b := make([]byte, e.SidecarLen)
	if _, err := r.ReadAt(b, e.SidecarStart); err != nil {
		return inspectSidecar{}, err
	}
	sc, err := segment.DecodeSidecar(key, b, e.SidecarStart)
	if err != nil {
		return inspectSidecar{}, err
	}
	out := inspectSidecar{Ordinal: uint32(e.Ordinal), Rows: len(sc.Rows), Kinds: map[string]int{}}
	for _, row := range sc.Rows {
		out.Kinds[row.Kind.String()]++
	}
	return out, nil
}
