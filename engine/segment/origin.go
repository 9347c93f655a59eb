package segment

import (
	"encoding/hex"
	"fmt"
	"unicode/utf8"
)

// WALID names one write-ahead log for good: 16 random bytes drawn when
// the log's writer object is first claimed, kept by every later claim
// (engine/writer.go), and written into every commit marker of the log. No
// two logs share one, so ids derived from it (compaction ids, docs/DESIGN.md
// §8.1) are unique across every pipeline that writes one destination.
type WALID [WALIDBytes]byte

// WALIDBytes is the size of a WAL id.
const WALIDBytes = 16

// IsZero reports whether id is the zero id: no identity (a marker of
// version 1, written before logs had identities).
func (id WALID) IsZero() bool { return id == WALID{} }

// String is the id as 32 lowercase hex digits.
func (id WALID) String() string { return hex.EncodeToString(id[:]) }

// ParseWALID parses 32 hex digits; the zero id is refused.
func ParseWALID(s string) (WALID, error) {
	var id WALID
	if len(s) != 2*len(id) {
		return WALID{}, fmt.Errorf("%w: WAL id %q: want %d hex digits", ErrInvalid, s, 2*len(id))
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return WALID{}, fmt.Errorf("%w: WAL id %q: %v", ErrInvalid, s, err)
	}
	if id.IsZero() {
		return WALID{}, fmt.Errorf("%w: WAL id is zero", ErrInvalid)
	}
	return id, nil
}

// Origin is who committed a segment: the log's identity and the name of
// its pipeline (for people reading ids and files; the WAL id alone is
// what makes them unique). The zero Origin is a segment committed before
// logs had identities: its marker is version 1, and its jobs keep the
// compaction ids they had then.
//
// INVARIANT: either zero, or WAL non-zero and Pipeline 1..PipelineBytesMax
// bytes of valid UTF-8 (Validate; the marker codec checks both ways).
type Origin struct {
	WAL      WALID
	Pipeline string
}

// IsZero reports whether o is the legacy (version 1) origin.
func (o Origin) IsZero() bool { return o == Origin{} }

// Validate checks a non-zero origin.
func (o Origin) Validate() error {
	switch {
	case o.WAL.IsZero():
		return invalidf("origin: zero WAL id (pipeline %q)", o.Pipeline)
	case len(o.Pipeline) == 0 || len(o.Pipeline) > PipelineBytesMax:
		return invalidf("origin: pipeline name of %d bytes, want 1..%d", len(o.Pipeline), PipelineBytesMax)
	case !utf8.ValidString(o.Pipeline):
		return invalidf("origin: pipeline name %q is not UTF-8", o.Pipeline)
	}
	return nil
}

func (o Origin) String() string {
	if o.IsZero() {
		return "legacy (no WAL id)"
	}
	return fmt.Sprintf("pipeline %s, WAL %s", o.Pipeline, o.WAL)
}
