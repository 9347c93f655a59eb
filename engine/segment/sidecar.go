package segment

import (
	"encoding/binary"
	"fmt"
)

// MutationKind is what a CDC row does to its target row.
type MutationKind uint8

const (
	Insert MutationKind = 1
	Update MutationKind = 2
	Delete MutationKind = 3
)

func (m MutationKind) String() string {
	switch m {
	case Insert:
		return "insert"
	case Update:
		return "update"
	case Delete:
		return "delete"
	}
	return fmt.Sprintf("MutationKind(%d)", uint8(m))
}

func (m MutationKind) valid() bool { return m >= Insert && m <= Delete }

// CDCRow is the change metadata of one Arrow row.
type CDCRow struct {
	Kind     MutationKind
	Identity []byte // event identity (source event id or primary key bytes)
	Order    uint64 // order token (e.g. a log sequence number)
}

// Sidecar carries per-row CDC metadata for one PART.
//
// INVARIANT: Rows[i] describes Arrow row i of the PART (rows counted across
// its record batches in order); len(Rows) equals the PART's row count.
//
// Wire form:
//
//	"CDCS" | u16 version=1 | u32 row_count
//	| row_count × ( u8 kind | u16 identity_len | identity | u64 order_token )
type Sidecar struct {
	Rows []CDCRow
}

// encodedLen is the byte length of s's wire form.
func (s *Sidecar) encodedLen() int {
	n := sidecarHeaderBytes
	for _, r := range s.Rows {
		n += sidecarRowBytesMin + len(r.Identity)
	}
	return n
}

// Validate reports whether every row is encodable.
func (s *Sidecar) Validate() error {
	if len(s.Rows) > PartRowsMax {
		return tooLargef("sidecar: %d rows, limit %d", len(s.Rows), PartRowsMax)
	}
	for i, r := range s.Rows {
		if !r.Kind.valid() {
			return invalidf("sidecar: row %d: mutation kind %d", i, r.Kind)
		}
		if len(r.Identity) > SidecarIdentityBytesMax {
			return tooLargef("sidecar: row %d: identity of %d bytes, limit %d", i, len(r.Identity), SidecarIdentityBytesMax)
		}
	}
	return nil
}

// AppendSidecar appends s's wire form to dst.
func AppendSidecar(dst []byte, s *Sidecar) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return dst, err
	}
	dst = append(dst, sidecarMagic...)
	dst = binary.LittleEndian.AppendUint16(dst, SidecarVersion)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(s.Rows)))
	for _, r := range s.Rows {
		dst = append(dst, byte(r.Kind))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.Identity)))
		dst = append(dst, r.Identity...)
		dst = binary.LittleEndian.AppendUint64(dst, r.Order)
	}
	return dst, nil
}

// DecodeSidecar parses a sidecar spanning all of b. base is b's offset
// within the enclosing object (for error offsets). Identities alias b.
func DecodeSidecar(name string, b []byte, base int64) (*Sidecar, error) {
	c := newCursor("cdc sidecar", name, b, base)
	c.magic("magic", sidecarMagic)
	c.version("version", SidecarVersion)
	// Every row takes at least sidecarRowBytesMin bytes: bound the count by
	// what remains before allocating for it.
	maxRows := min(PartRowsMax, c.remaining()/sidecarRowBytesMin)
	n := int(c.bounded("row_count", 4, uint64(maxRows)))
	if c.err != nil {
		return nil, c.err
	}
	s := &Sidecar{Rows: make([]CDCRow, n)}
	for i := range s.Rows {
		r := &s.Rows[i]
		r.Kind = MutationKind(c.u8("row.kind"))
		if c.err == nil && !r.Kind.valid() {
			c.pos--
			c.fail("row.kind", ErrCorrupt, "row %d: mutation kind %d", i, r.Kind)
		}
		r.Identity = c.bytes("row.identity", SidecarIdentityBytesMax)
		r.Order = c.u64("row.order_token")
		if c.err != nil {
			return nil, c.err
		}
	}
	c.end("rows")
	if err := c.failed(); err != nil {
		return nil, err
	}
	return s, nil
}
