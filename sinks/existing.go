package sinks

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/metadata"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/engine/segment"
)

// A Parquet sink that finds a file (or object) already at a job's name
// must not take it for the job on the name alone: the name is the job's
// id, and a file of another job under the same id (another log's, as
// before WAL identities) would make it report rows applied that never
// were. So it reads the
// file's footer — its tail, through the sink's port, every length
// bounded — and judges it (judgeFile, on the Executor):
//
//	skipprd.content recorded   equal to Job.Content ⇒ applied
//	                           different            ⇒ collision
//	no content recorded        (a file of a build before contents were
//	                           recorded) the footer's row count and Arrow
//	                           schema equal the job's ⇒ applied, "legacy
//	                           trusted" (Stats); else ⇒ collision
//	not a Parquet footer       ⇒ collision: something foreign holds the name
//
// A collision is an error wrapping engine.ErrCannotApply and
// engine.ErrIDCollision: the engine refuses the job, alerts id-collision
// and keeps the segment. The file is left as it is. Because a read may
// come back damaged (a flipped bit on the way), a collision stands only
// when a second read of the same ranges returns the same bytes; reads
// that disagree are an ordinary error, and the engine retries the job.
// Read errors are ordinary errors too.

// Bounds of reading a footer.
const (
	// footerTailBytes is the first read: the file's last 64 KiB (or all
	// of it), enough for the footer of any job a segment gives but the
	// widest; a longer footer takes one more read.
	footerTailBytes = 64 << 10
	// footerBytesMax bounds a footer this sink reads. One job's file has
	// a few row groups of at most its segment's columns; its footer is
	// kilobytes, and a footer claiming more than this is not one this
	// sink wrote.
	footerBytesMax = 64 << 20
	// parquetBytesMin is the smallest Parquet file: "PAR1", a footer,
	// its length, "PAR1".
	parquetBytesMin = 12
	parquetMagic    = "PAR1"
)

// readAtFunc reads exactly n bytes at off of the existing file, or fails.
type readAtFunc func(off, n int64, done func(b []byte, err error))

// footerRead is what reading an existing file's tail found.
type footerRead struct {
	size   int64
	raw    []byte // every byte read, to compare two reads
	footer []byte // the serialized FileMetaData; nil if foreign != ""
	// foreign says why the bytes are not a Parquet file ("" if they may be).
	foreign string
}

// readFooter reads the footer of a file of size bytes.
func readFooter(size int64, read readAtFunc, done func(footerRead, error)) {
	r := footerRead{size: size}
	if size < parquetBytesMin {
		r.foreign = fmt.Sprintf("%d bytes are too few for a Parquet file", size)
		done(r, nil)
		return
	}
	tail := min(size, footerTailBytes)
	read(size-tail, tail, func(b []byte, err error) {
		if err != nil {
			done(footerRead{}, err)
			return
		}
		r.raw = b
		trailer := b[len(b)-8:]
		n := int64(binary.LittleEndian.Uint32(trailer[:4]))
		switch {
		case string(trailer[4:]) != parquetMagic:
			r.foreign = fmt.Sprintf("it does not end in the Parquet magic %q but in %q", parquetMagic, trailer[4:])
		case n > footerBytesMax:
			r.foreign = fmt.Sprintf("its footer length is %d bytes, more than any this sink writes (%d)", n, footerBytesMax)
		case n > size-parquetBytesMin:
			r.foreign = fmt.Sprintf("its footer length %d does not fit in its %d bytes", n, size)
		case n+8 <= tail:
			r.footer = b[tail-8-n : tail-8]
		default:
			read(size-8-n, n, func(f []byte, err error) {
				if err != nil {
					done(footerRead{}, err)
					return
				}
				r.raw = append(bytes.Clone(b), f...)
				r.footer = f
				done(r, nil)
			})
			return
		}
		done(r, nil)
	})
}

// verdict is what a sink concludes of an existing file.
type verdict struct {
	// legacy: applied, on rows and schema, for the file records no
	// content.
	legacy bool
	// collision says why the file is not this job's ("" ⇒ applied).
	collision string
}

// judgeFile compares what r read of an existing file with job. It is
// pure and may be CPU work (a long footer): sinks run it on the
// Executor. An error is a job that cannot be encoded (its schema checks
// fail); a verdict is otherwise always given.
func judgeFile(job *engine.Job, noun string, r footerRead) (verdict, error) {
	if r.foreign != "" {
		return verdict{collision: fmt.Sprintf("%s (%d bytes) is not a Parquet file this sink wrote: %s; this job's content is %s (%s)",
			noun, r.size, r.foreign, job.Content, jobOrigin(job))}, nil
	}
	md, err := parseFooter(r.footer)
	if err != nil {
		return verdict{collision: fmt.Sprintf("%s (%d bytes) is not a Parquet file this sink wrote: its footer does not parse (%v); this job's content is %s (%s)",
			noun, r.size, err, job.Content, jobOrigin(job))}, nil
	}
	kv := md.KeyValueMetadata()
	if content := lastValue(kv, MetaContent); content != "" {
		if content == job.Content {
			return verdict{}, nil
		}
		id := lastValue(kv, MetaCompactionID)
		if id == "" {
			id = "(no id recorded)"
		}
		return verdict{collision: fmt.Sprintf("%s holds job %s with content %s (%s), this job's is %s (%s)",
			noun, id, content, recordedOrigin(kv), job.Content, jobOrigin(job))}, nil
	}
	// A file of a build before contents were recorded: rows and schema.
	want, _, err := fileSchema(job)
	if err != nil {
		return verdict{}, fmt.Errorf("%w: %w", ErrUnencodable, err)
	}
	var diffs []string
	if md.NumRows != job.Rows() {
		diffs = append(diffs, fmt.Sprintf("%d rows, this job has %d", md.NumRows, job.Rows()))
	}
	have, err := footerSchema(md)
	switch {
	case err != nil:
		diffs = append(diffs, fmt.Sprintf("a schema that does not read as Arrow (%v)", err))
	case !sameFields(have.Fields(), want.Fields()):
		diffs = append(diffs, fmt.Sprintf("columns %s, this job's are %s", columnsString(have), columnsString(want)))
	}
	if len(diffs) == 0 {
		return verdict{legacy: true}, nil
	}
	return verdict{collision: fmt.Sprintf("%s records no job content (a build before contents were recorded wrote it) and is not this job's (content %s, %s): it has %s",
		noun, job.Content, jobOrigin(job), strings.Join(diffs, "; "))}, nil
}

// parseFooter decodes a serialized FileMetaData; a panic in the decoder
// (the bytes are anyone's) is an error.
func parseFooter(footer []byte) (md *metadata.FileMetaData, err error) {
	defer func() {
		if p := recover(); p != nil {
			md, err = nil, fmt.Errorf("the decoder panicked: %v", p)
		}
	}()
	return metadata.NewFileMetaData(footer, nil)
}

// footerSchema is the Arrow schema a footer records: ARROW:schema, which
// every file of this sink carries (the writer's schema, list elements
// renamed "element"), or else the one the Parquet schema maps to.
func footerSchema(md *metadata.FileMetaData) (s *arrow.Schema, err error) {
	defer func() {
		if p := recover(); p != nil {
			s, err = nil, fmt.Errorf("the decoder panicked: %v", p)
		}
	}()
	kv := md.KeyValueMetadata()
	if v := kv.FindValue("ARROW:schema"); v != nil {
		b, err := base64.StdEncoding.DecodeString(*v)
		if err != nil {
			if b, err = base64.RawStdEncoding.DecodeString(*v); err != nil {
				return nil, fmt.Errorf("ARROW:schema: %w", err)
			}
		}
		s, err := flight.DeserializeSchema(b, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("ARROW:schema: %w", err)
		}
		return s, nil
	}
	return pqarrow.FromParquet(md.Schema, &pqarrow.ArrowReadProperties{}, kv)
}

// sameFields reports whether two field lists are the same columns: names,
// nullability and types, whatever the fields' metadata and the names of
// list elements (the writer renames them).
func sameFields(a, b []arrow.Field) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Nullable != b[i].Nullable || !sameType(a[i].Type, b[i].Type) {
			return false
		}
	}
	return true
}

func sameType(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	switch at := a.(type) {
	case *arrow.MapType:
		bt := b.(*arrow.MapType)
		return at.KeysSorted == bt.KeysSorted && sameType(at.KeyType(), bt.KeyType()) &&
			at.ItemField().Nullable == bt.ItemField().Nullable && sameType(at.ItemType(), bt.ItemType())
	case *arrow.FixedSizeListType:
		bt := b.(*arrow.FixedSizeListType)
		return at.Len() == bt.Len() && at.ElemField().Nullable == bt.ElemField().Nullable && sameType(at.Elem(), bt.Elem())
	case arrow.ListLikeType:
		bt := b.(arrow.ListLikeType)
		return at.ElemField().Nullable == bt.ElemField().Nullable && sameType(at.Elem(), bt.Elem())
	case *arrow.StructType:
		return sameFields(at.Fields(), b.(*arrow.StructType).Fields())
	}
	return arrow.TypeEqual(a, b)
}

// columnsString is a schema's columns for a message, bounded.
func columnsString(s *arrow.Schema) string {
	const max = 400
	var b strings.Builder
	b.WriteString("(")
	for i, f := range s.Fields() {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %s", f.Name, f.Type)
		if b.Len() > max {
			return b.String()[:max] + "…)"
		}
	}
	b.WriteString(")")
	return b.String()
}

// lastValue is the last value of key in kv ("" if none): the job's own
// entries come after the schema's, which could hold the same key.
func lastValue(kv metadata.KeyValueMetadata, key string) string {
	for i := len(kv) - 1; i >= 0; i-- {
		if kv[i] != nil && kv[i].Key == key {
			return kv[i].GetValue()
		}
	}
	return ""
}

// recordedOrigin describes the job a file's metadata records (a file of
// a build before jobs spanned segments records no segments).
func recordedOrigin(kv metadata.KeyValueMetadata) string {
	pipeline, wal, seg := lastValue(kv, MetaPipeline), lastValue(kv, MetaWALID), lastValue(kv, MetaSegment)
	s := segment.Origin{}.String()
	if pipeline != "" || wal != "" {
		s = fmt.Sprintf("pipeline %s, WAL %s", pipeline, wal)
	}
	if seg != "" {
		s += ", segment " + seg
	}
	if segs := lastValue(kv, MetaSegments); segs != "" {
		s += ", segments " + segs
	}
	return s
}

// jobOrigin describes job's origin, its segment and the segments it
// spans, as recordedOrigin does a file's.
func jobOrigin(job *engine.Job) string {
	return fmt.Sprintf("%s, segment %s, segments %s", job.Origin, job.Segment, SegmentsText(job))
}

// checkExisting judges the existing file of size bytes at job's name
// (read through read, judged on exec) and answers done once: nil when it
// holds job (legacy: trusted on rows and schema), an error wrapping
// engine.ErrCannotApply and engine.ErrIDCollision when it is another's
// (two reads agreeing), another error to retry. sinkName and noun ("the
// existing object") name the sink and the file in messages.
func checkExisting(exec engine.Executor, sinkName, noun string, job *engine.Job, size int64, read readAtFunc,
	done func(legacy bool, err error)) {
	readFooter(size, read, func(first footerRead, err error) {
		if err != nil {
			done(false, fmt.Errorf("reading the footer of %s: %w", noun, err))
			return
		}
		var v verdict
		var judgeErr error
		exec.Go(func() { v, judgeErr = judgeFile(job, noun, first) }, func() {
			switch {
			case judgeErr != nil:
				done(false, judgeErr)
				return
			case v.collision == "":
				done(v.legacy, nil)
				return
			}
			readFooter(size, read, func(again footerRead, err error) {
				switch {
				case err != nil:
					done(false, fmt.Errorf("reading the footer of %s again: %w", noun, err))
				case !bytes.Equal(first.raw, again.raw) || first.foreign != again.foreign:
					done(false, fmt.Errorf("%s: %w", noun, errReadsDisagree))
				default:
					done(false, fmt.Errorf("%w: %w: sinks: %s: %s", engine.ErrCannotApply, engine.ErrIDCollision, sinkName, v.collision))
				}
			})
		})
	})
}

// errReadsDisagree: two reads of an existing file's footer gave other
// bytes; one was damaged on the way. The engine retries the job.
var errReadsDisagree = errors.New("two reads of its footer disagree (one was damaged on the way?)")

// ParquetStats counts a Parquet sink's rare outcomes since it was made.
type ParquetStats struct {
	// Replays: jobs found applied, the file's recorded content theirs.
	Replays int64
	// LegacyTrusted: jobs found applied in a file that records no
	// content (written before contents were), trusted because its row
	// count and schema are the job's.
	LegacyTrusted int64
	// Collisions: jobs refused because another job's file (or something
	// that is not a Parquet file) holds their name.
	Collisions int64
}

// parquetStats is ParquetStats, safe to read from any goroutine.
type parquetStats struct{ replays, legacy, collisions atomic.Int64 }

func (s *parquetStats) get() ParquetStats {
	return ParquetStats{Replays: s.replays.Load(), LegacyTrusted: s.legacy.Load(), Collisions: s.collisions.Load()}
}

// count counts checkExisting's answer.
func (s *parquetStats) count(legacy bool, err error) {
	switch {
	case err == nil && legacy:
		s.legacy.Add(1)
	case err == nil:
		s.replays.Add(1)
	case errors.Is(err, engine.ErrIDCollision):
		s.collisions.Add(1)
	}
}
