package main

// inspect's text output: the report, a section each, for people. Long
// lists are cut at inspectListMax lines, saying how many were left out
// (--json prints them all).

import (
	"fmt"
	"io"
	"strings"
	"time"
)

const inspectListMax = 50

const readOnlyLine = "read-only: nothing written, no lock or writer object taken; a running pipeline shows what it has committed now"

func printReport(w io.Writer, r *inspectReport) {
	fmt.Fprintf(w, "skipprd inspect (%s)\n", readOnlyLine)
	fmt.Fprintf(w, "pipeline %s, WAL %s, DATA_DIR %s\n", r.Pipeline, r.WALStorage, r.DataDir)
	if r.StoreMissing {
		fmt.Fprintf(w, "segments: %s does not exist: nothing committed there\n", r.Store)
	} else {
		fmt.Fprintf(w, "segments: %s, under %s\n", r.Store, r.Root)
	}
	printSegments(w, r.Segments)
	printOffsets(w, r.Offsets)
	printKeys(w, r.Keys)
	if r.Log != nil {
		printLog(w, r.Log)
	}
	printOrphans(w, r)
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "\nproblems: %d\n", len(r.Problems))
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
}

func printSegments(w io.Writer, segs []inspectSegment) {
	fmt.Fprintf(w, "\nlive segments: %d, in commit order\n", len(segs))
	for _, s := range segs {
		printSegmentHead(w, s)
	}
}

// printSegmentHead prints a segment, its parts and its offsets.
func printSegmentHead(w io.Writer, s inspectSegment) {
	bitmap := "no bitmap object yet"
	if s.BitmapObject {
		bitmap = "bitmap object"
	}
	fmt.Fprintf(w, "  segment %s  created %s  body %d bytes  applied %d/%d [%s] (%s)\n",
		s.ID, unixMs(s.CreatedUnixMs), s.BodyBytes, s.Applied, len(s.Parts), s.Bitmap, bitmap)
	fmt.Fprintf(w, "    marker %s  origin %s wal %s\n", s.Marker, s.Pipeline, orNone(s.WALID))
	for _, p := range s.Parts {
		state := "pending"
		if p.Applied {
			state = "applied"
		}
		fmt.Fprintf(w, "    PART %d  sink %s  namespace %s  partition %q  rows %d  bytes %d  %s\n",
			p.Ordinal, p.Sink, p.Namespace, p.Partition, p.Rows, p.Bytes, state)
	}
	for _, c := range s.Cuts {
		fmt.Fprintf(w, "    cut %s/%s: a job of %d part(s) in %d segment(s) from %s (%s)\n", c.Sink, c.Namespace, c.Parts, c.Segments, c.First, c.Reason)
	}
	printOffsetList(w, "    offset ", s.Offsets)
	if s.IdempotencyKeys > 0 {
		fmt.Fprintf(w, "    idempotency keys: %d\n", s.IdempotencyKeys)
	}
}

func printOffsets(w io.Writer, o inspectOffsets) {
	fmt.Fprintf(w, "\ncommitted offsets: %d (the checkpoint, epoch %d, with %d keys, max-merged with the live segments')\n",
		len(o.Committed), o.CheckpointEpoch, len(o.Checkpoint))
	printOffsetList(w, "  ", o.Committed)
}

func printOffsetList(w io.Writer, indent string, os []inspectOffset) {
	for i, o := range os {
		if i == inspectListMax {
			fmt.Fprintf(w, "%s… and %d more (--json lists them all)\n", indent, len(os)-i)
			return
		}
		fmt.Fprintf(w, "%s%s = %d\n", indent, o.Key, o.Value)
	}
}

func printKeys(w io.Writer, k inspectKeys) {
	window := time.Duration(k.WindowSeconds) * time.Second
	bucket := time.Duration(k.BucketSeconds) * time.Second
	fmt.Fprintf(w, "\nidempotency keys: %d in %d run(s) of %d bucket(s), %d bytes; window %v (buckets of %v)\n",
		k.Keys, k.Runs, k.Buckets, k.Bytes, window, bucket)
	if k.Keys > 0 {
		fmt.Fprintf(w, "  submitted from %s to %s\n", unixMs(k.OldestUnixMs), unixMs(k.NewestUnixMs))
	}
	if k.LegacyBuckets > 0 {
		fmt.Fprintf(w, "  %d bucket(s) still in the old checkpoint format (the daemon rewrites them)\n", k.LegacyBuckets)
	}
}

func printLog(w io.Writer, l *inspectLogSummary) {
	fmt.Fprintf(w, "\ndisk log %s: %d partition(s); %d acked unit(s) not yet in a flushed segment\n",
		l.Root, len(l.Partitions), l.UnflushedUnits)
	for _, p := range l.Partitions {
		fmt.Fprintf(w, "  partition %d: %d file(s)\n", p.Partition, len(p.Files))
		if p.Halted != "" {
			fmt.Fprintf(w, "    HALTED: %s\n", p.Halted)
		}
		for _, f := range p.Files {
			printLogFile(w, f)
		}
	}
}

func printLogFile(w io.Writer, f inspectLogFile) {
	units := "no units"
	if f.Units > 0 {
		units = fmt.Sprintf("%d units (seq %d..%d)", f.Units, f.FirstSeq, f.LastSeq)
	}
	torn := ""
	if f.Torn {
		torn = "  torn tail"
	}
	fmt.Fprintf(w, "    %s  %d bytes  %s  seals %s  flushed %s  dirty %s  unsealed %d%s\n", f.Name, f.Bytes, units,
		list(f.Seals), list(f.Flushed), list(f.Dirty), f.Unsealed, torn)
}

func printOrphans(w io.Writer, r *inspectReport) {
	fmt.Fprintf(w, "\norphans: %d\n", len(r.Orphans))
	for i, o := range r.Orphans {
		if i == inspectListMax {
			fmt.Fprintf(w, "  … and %d more (--json lists them all)\n", len(r.Orphans)-i)
			break
		}
		fmt.Fprintf(w, "  %s  %d bytes  modified %s: %s\n", o.Key, o.Bytes, unixMs(o.ModifiedUnixMs), o.Why)
	}
	fmt.Fprintf(w, "multipart uploads in progress: %d\n", len(r.Uploads))
	for _, u := range r.Uploads {
		fmt.Fprintf(w, "  %s  upload %s  initiated %s\n", u.Key, u.UploadID, unixMs(u.InitiatedUnixMs))
	}
}

// printSegmentDoc prints inspect segment ID's decoding.
func printSegmentDoc(w io.Writer, d *inspectSegmentDoc) {
	fmt.Fprintf(w, "skipprd inspect segment (%s)\n", readOnlyLine)
	fmt.Fprintf(w, "store: %s\nbody %s: verified against its commit marker (length, sha256 %s, index)\n", d.Store, d.Body, d.BodySHA256)
	printSegmentHead(w, d.inspectSegment)
	fmt.Fprintf(w, "index: %d entries\n", len(d.Index))
	for _, e := range d.Index {
		fmt.Fprintf(w, "  %d  %s  arrow [%d, +%d)  sidecar [%d, +%d)  rows %d\n",
			e.Ordinal, e.Key, e.ArrowStart, e.ArrowLen, e.SidecarStart, e.SidecarLen, e.Rows)
	}
	fmt.Fprintf(w, "sidecars: %d\n", len(d.Sidecars))
	for _, s := range d.Sidecars {
		fmt.Fprintf(w, "  PART %d: %d rows %v\n", s.Ordinal, s.Rows, s.Kinds)
	}
}

func unixMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func list(ss []string) string { return "[" + strings.Join(ss, " ") + "]" }
