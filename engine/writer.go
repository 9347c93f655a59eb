package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/skipprd/skipprd/engine/segment"
)

// The writer object ({root}/_writer) is the pipeline's fence and holds
// its log's identity:
//
//	skipprd-writer 3
//	epoch <decimal>
//	nonce <16 hex digits>
//	wal <32 hex digits>
//	floor <epoch>
//	sealed <epoch> <last valid sequence>      (zero or more, ascending epoch)
//	sha256 <64 hex digits: SHA-256 of every byte before this line>
//
// The checksum makes a damaged read (a flipped digit in an epoch would
// otherwise parse) a detectable error: readers re-read, and only a
// consistently bad object is corruption. Version 1 (no sha256 line) and
// version 2 (no wal line) are still read, so a log written before them
// recovers.
//
// The WAL id names the log for good (segment.WALID): the first claim
// that finds none draws 16 random bytes, and every later claim and seal
// carries them over, so every incarnation of the pipeline — a restart, a
// new host on an empty disk, a zombie — commits under the same identity,
// and no other log has it. Commit markers repeat it (segment.Origin), and
// compaction ids are derived from it (compact.go).
//
// Epochs: every incarnation claims epoch+1 with a conditional PUT
// (If-Match on the ETag it read, If-None-Match: * for the first), so
// epochs are unique and grow with every start even when LIST lags. The
// nonce tells an incarnation whether an ambiguous claim of its own landed.
//
// Seals fence superseded writers (docs/DESIGN.md §11). S3 cannot make a marker
// PUT conditional on another key, so validity is decided after the fact:
// a marker of an older epoch e counts only if its sequence is at most
// sealed[e]. The recovering writer claims its epoch, waits FenceWait (so
// every marker that landed before the claim is listed), lists, and seals
// each older epoch at the highest sequence it saw. A superseded writer
// checks the epoch after every marker lands and before acking
// (fenceThenCommit, persist.go):
// if its marker landed after the claim it does not ack (and the marker
// may or may not be valid — nobody was told it was committed); if it
// landed before the claim, the new writer's listing saw it, so the seal
// covers it. The floor records how far sealing has gone: every epoch below
// it was decided by some recovery, and one without a seal had no marker
// listed when it was superseded — none of its markers count, ever. A
// recovery seals the epochs from the floor up to its own and moves the
// floor to its epoch. Seals of epochs with nothing left in the store are
// dropped, so the object stays small.

const (
	writerMagic   = "skipprd-writer 3"
	writerMagicV2 = "skipprd-writer 2"
	writerMagicV1 = "skipprd-writer 1"
	sealsMax      = 4096 // bounds the object (writerObjectLimit)
)

type seal struct {
	epoch, seq uint64
}

type writerRecord struct {
	epoch uint64
	nonce uint64
	wal   segment.WALID // the log's identity; zero only in a version 1 or 2 object
	floor uint64        // epochs below were all decided; INVARIANT: floor ≤ epoch
	seals []seal        // INVARIANT: ascending epoch, all below floor (check, before every write)
}

// encode writes version 3, or version 2 for a record without a WAL id (a
// test's or a tool's: the engine claims with one).
// REQUIRES: at most sealsMax seals, and an object within writerObjectLimit:
// what parseWriterRecord and readWriter accept. A record past either
// would be written, and never read back: no incarnation could start.
func (w writerRecord) encode() []byte {
	if len(w.seals) > sealsMax {
		panic(fmt.Sprintf("engine: a writer record holds at most sealsMax seals: %d seals, limit %d (epoch %d, floor %d)",
			len(w.seals), sealsMax, w.epoch, w.floor))
	}
	var b []byte
	if w.wal.IsZero() {
		b = fmt.Appendf(b, "%s\nepoch %d\nnonce %016x\nfloor %d\n", writerMagicV2, w.epoch, w.nonce, w.floor)
	} else {
		b = fmt.Appendf(b, "%s\nepoch %d\nnonce %016x\nwal %s\nfloor %d\n", writerMagic, w.epoch, w.nonce, w.wal, w.floor)
	}
	for _, s := range w.seals {
		b = fmt.Appendf(b, "sealed %d %d\n", s.epoch, s.seq)
	}
	sum := sha256.Sum256(b)
	b = fmt.Appendf(b, "sha256 %s\n", hex.EncodeToString(sum[:]))
	if len(b) > writerObjectLimit {
		panic(fmt.Sprintf("engine: a writer object fits what readWriter reads: %d bytes, limit %d (%d seals)", len(b), writerObjectLimit, len(w.seals)))
	}
	return b
}

// checkWriterSum verifies and strips a version 2 object's checksum line;
// a version 1 object is returned as it is.
func checkWriterSum(b []byte) ([]byte, error) {
	if bytes.HasPrefix(b, []byte(writerMagicV1+"\n")) {
		return b, nil
	}
	body, line, ok := bytes.Cut(bytes.TrimSuffix(b, []byte("\n")), []byte("\nsha256 "))
	if !ok || bytes.Contains(line, []byte("\n")) {
		return nil, fmt.Errorf("%w: writer object: no checksum line", ErrCorrupt)
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	if want := hex.EncodeToString(sum[:]); string(line) != want {
		return nil, fmt.Errorf("%w: writer object: checksum %.16s…, content hashes to %.16s…", ErrCorrupt, line, want)
	}
	return body, nil
}

func parseWriterRecord(raw []byte) (writerRecord, error) {
	bad := func(format string, args ...any) (writerRecord, error) {
		return writerRecord{}, fmt.Errorf("%w: writer object: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	b, err := checkWriterSum(raw)
	if err != nil {
		return writerRecord{}, err
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	head := 4 // magic, epoch, nonce, floor (version 3: and wal)
	if len(lines) > 0 && lines[0] == writerMagic {
		head = 5
	}
	if len(lines) < head || (lines[0] != writerMagic && lines[0] != writerMagicV2 && lines[0] != writerMagicV1) || len(lines) > head+sealsMax {
		return bad("unknown format (%d lines)", len(lines))
	}
	var w writerRecord
	if w.epoch, err = field(lines[1], "epoch ", 10); err != nil {
		return bad("%v", err)
	}
	if w.nonce, err = field(lines[2], "nonce ", 16); err != nil {
		return bad("%v", err)
	}
	if head == 5 {
		v, ok := strings.CutPrefix(lines[3], "wal ")
		if w.wal, err = segment.ParseWALID(v); !ok || err != nil {
			return bad("line %q: want wal and 32 hex digits, not zero", lines[3])
		}
	}
	if w.floor, err = field(lines[head-1], "floor ", 10); err != nil || w.floor > w.epoch {
		return bad("floor %d of epoch %d: %v", w.floor, w.epoch, err)
	}
	for _, line := range lines[head:] {
		e, q, ok := strings.Cut(strings.TrimPrefix(line, "sealed "), " ")
		epoch, err1 := strconv.ParseUint(e, 10, 64)
		seq, err2 := strconv.ParseUint(q, 10, 64)
		if !strings.HasPrefix(line, "sealed ") || !ok || err1 != nil || err2 != nil {
			return bad("line %q", line)
		}
		if epoch >= w.floor || len(w.seals) > 0 && epoch <= w.seals[len(w.seals)-1].epoch {
			return bad("seal of epoch %d out of order", epoch)
		}
		w.seals = append(w.seals, seal{epoch, seq})
	}
	return w, nil
}

func field(line, prefix string, base int) (uint64, error) {
	v, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return 0, fmt.Errorf("want %q, got %q", prefix, line)
	}
	return strconv.ParseUint(v, base, 64)
}

// valid reports whether a marker with this id counts as a commit.
func (w writerRecord) valid(id SnapshotID) bool {
	if id.Epoch >= w.epoch {
		return true // ours (a later epoch cannot exist while we hold the claim)
	}
	i, ok := slices.BinarySearchFunc(w.seals, id.Epoch, func(s seal, e uint64) int { return cmpUint(s.epoch, e) })
	return ok && id.Seq <= w.seals[i].seq
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// sealed returns the record after this writer's recovery: a seal for
// every epoch from the floor up to ours that the listing shows (at its
// highest listed marker sequence, 0 if only bodies are left), earlier
// seals kept as they are, seals of epochs the listing no longer shows
// dropped, and the floor moved up to our epoch.
//
// logged are snapshots the disk WAL sealed and will persist again under
// their own ids (wal_disk_recover.go): each counts as a listed marker, so
// its epoch is sealed at least that far (unless already sealed).
func (w writerRecord) sealed(listing []*listedSegment, logged []SnapshotID) writerRecord {
	for _, id := range logged {
		listing = append(listing, &listedSegment{id: id, marker: &ObjectInfo{}})
	}
	present := map[uint64]uint64{} // epoch → highest listed marker seq
	old := map[uint64]uint64{}
	for _, s := range w.seals {
		old[s.epoch] = s.seq
	}
	for _, ls := range listing {
		if _, decided := old[ls.id.Epoch]; ls.id.Epoch >= w.epoch || ls.id.Epoch < w.floor && !decided {
			continue // ours, or decided long ago with nothing valid
		}
		cur := present[ls.id.Epoch]
		if ls.marker != nil {
			cur = max(cur, ls.id.Seq)
		}
		present[ls.id.Epoch] = cur
	}
	out := writerRecord{epoch: w.epoch, nonce: w.nonce, wal: w.wal, floor: w.epoch}
	//engine:orderless — collected, then sorted by epoch below.
	for epoch, seq := range present {
		if prev, ok := old[epoch]; ok {
			seq = prev // a seal never moves
		}
		out.seals = append(out.seals, seal{epoch, seq})
	}
	slices.SortFunc(out.seals, func(a, b seal) int { return cmpUint(a.epoch, b.epoch) })
	return out
}

// WriterRecord is the writer object as an outside reader (an oracle, an
// operator tool) sees it: the current epoch, how far sealing has gone,
// and which markers of earlier epochs count.
type WriterRecord struct{ w writerRecord }

// ParseWriterObject parses the bytes of {root}/_writer.
func ParseWriterObject(b []byte) (WriterRecord, error) {
	w, err := parseWriterRecord(b)
	return WriterRecord{w}, err
}

// Epoch is the epoch of the latest claim.
func (r WriterRecord) Epoch() uint64 { return r.w.epoch }

// WAL is the log's identity (zero in an object an older build wrote).
func (r WriterRecord) WAL() segment.WALID { return r.w.wal }

// Floor: every epoch below it was sealed by some recovery.
func (r WriterRecord) Floor() uint64 { return r.w.floor }

// Decided reports whether the validity of a marker of id is final: its
// epoch was sealed (below the floor), or it is the current epoch with
// sealing done (floor = epoch). A marker of an epoch between the floor
// and the current one awaits the recovery in progress.
func (r WriterRecord) Decided(id SnapshotID) bool {
	return id.Epoch < r.w.floor || id.Epoch >= r.w.epoch && r.w.floor == r.w.epoch
}

// Valid reports whether a marker of id counts as a commit (see writer.go).
func (r WriterRecord) Valid(id SnapshotID) bool { return r.w.valid(id) }

// EncodeWriterObject returns the bytes of a writer object (for tests and
// tools that need one): epoch, nonce, floor and seals as {epoch, last
// valid sequence} pairs in ascending epoch, all below the floor.
//
// REQUIRES: the record keeps what it promises (writerRecord.check); an
// object that breaks it would parse as corrupt.
func EncodeWriterObject(epoch, nonce, floor uint64, seals [][2]uint64) []byte {
	w := writerRecord{epoch: epoch, nonce: nonce, floor: floor}
	for _, s := range seals {
		w.seals = append(w.seals, seal{s[0], s[1]})
	}
	if err := w.check(); err != nil {
		panic(err)
	}
	return w.encode()
}
