package postgrescdc

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/jackc/pglogrepl"
)

// The pgoutput messages of protocol version 1 the source reads, decoded
// here rather than by pglogrepl's parser, which indexes the buffer
// without checking its length: every count and length read below is
// checked against what remains before it is used or allocated for.
//
//	Begin     'B' | u64 final (commit) LSN | i64 commit time | u32 xid
//	Commit    'C' | u8 flags | u64 commit LSN | u64 end LSN | i64 commit time
//	Relation  'R' | u32 oid | str schema | str name | u8 replica identity
//	              | u16 n | n × ( u8 flags | str name | u32 type oid | i32 typmod )
//	Insert    'I' | u32 oid | 'N' tuple
//	Update    'U' | u32 oid | [ 'K' tuple | 'O' tuple ] | 'N' tuple
//	Delete    'D' | u32 oid | ( 'K' | 'O' ) tuple
//	Truncate  'T' | u32 n | u8 options | n × u32 oid
//	Origin    'O', Type 'Y': read and ignored
//	tuple     u16 n | n × ( 'n' | 'u' | 't' u32 len | len bytes )
//
// Strings are NUL-terminated. Decoded byte slices alias the message.

// columnsMax bounds the columns of a relation or tuple (Postgres allows
// 1600 per table, MaxTupleAttributeNumber is 1664).
const columnsMax = 1664

// Tuple value kinds.
const (
	valueNull      = 'n'
	valueUnchanged = 'u' // an unchanged TOAST value, not sent
	valueText      = 't'
)

// tupleValue is one column of a tuple: kind, and for valueText its
// text form.
type tupleValue struct {
	kind byte
	text []byte
}

type msgBegin struct{ commit pglogrepl.LSN }

type msgCommit struct{ commit, end pglogrepl.LSN }

type msgRelation struct {
	oid       uint32
	name      tableName
	replIdent byte // 'd' default, 'n' nothing, 'f' full, 'i' index
	columns   []relColumn
}

type relColumn struct {
	key    bool // part of the replica identity (every column under FULL)
	name   string
	typOID uint32
	typmod int32
}

// msgChange is an insert, update or delete.
type msgChange struct {
	op       byte // 'I', 'U', 'D'
	oid      uint32
	oldKind  byte         // 0, 'K' (key columns only) or 'O' (whole old row)
	old, new []tupleValue // old: nil unless oldKind; new: nil for a delete
}

type msgTruncate struct{ oids []uint32 }

type msgIgnored struct{ typ byte }

// decodeMessage decodes one pgoutput message.
func decodeMessage(b []byte) (any, error) {
	r := &wire{b: b}
	typ := r.u8()
	var m any
	switch typ {
	case 'B':
		m = msgBegin{commit: pglogrepl.LSN(r.u64())}
		r.skip(12)
	case 'C':
		r.skip(1)
		m = msgCommit{commit: pglogrepl.LSN(r.u64()), end: pglogrepl.LSN(r.u64())}
		r.skip(8)
	case 'R':
		m = decodeRelation(r)
	case 'I', 'U', 'D':
		m = decodeChange(r, typ)
	case 'T':
		m = decodeTruncate(r)
	case 'O', 'Y':
		r.pos = len(r.b)
		m = msgIgnored{typ}
	default:
		return nil, fmt.Errorf("pgoutput: message type %q is not one the source asked for", typ)
	}
	if r.err == nil && r.pos != len(r.b) {
		r.fail("%d bytes after the message", len(r.b)-r.pos)
	}
	if r.err != nil {
		return nil, fmt.Errorf("pgoutput: message %q of %d bytes: %w", typ, len(b), r.err)
	}
	return m, nil
}

func decodeRelation(r *wire) msgRelation {
	m := msgRelation{oid: r.u32()}
	m.name.schema = r.str()
	m.name.table = r.str()
	m.replIdent = r.u8()
	n := r.count(2, columnsMax, 10) // flags, NUL, oid, typmod: at least 10 bytes each
	m.columns = make([]relColumn, n)
	for i := range m.columns {
		c := &m.columns[i]
		c.key = r.u8()&1 != 0
		c.name = r.str()
		c.typOID = r.u32()
		c.typmod = int32(r.u32())
	}
	return m
}

func decodeChange(r *wire, op byte) msgChange {
	m := msgChange{op: op, oid: r.u32()}
	kind := r.u8()
	if op != 'I' && (kind == 'K' || kind == 'O') {
		m.oldKind = kind
		m.old = decodeTuple(r)
		if op == 'D' {
			return m
		}
		kind = r.u8()
	}
	if op == 'D' {
		r.fail("delete with tuple marker %q, not 'K' or 'O'", kind)
		return m
	}
	if kind != 'N' {
		r.fail("tuple marker %q where the new tuple ('N') belongs", kind)
		return m
	}
	m.new = decodeTuple(r)
	return m
}

func decodeTuple(r *wire) []tupleValue {
	n := r.count(2, columnsMax, 1)
	t := make([]tupleValue, n)
	for i := range t {
		t[i].kind = r.u8()
		switch t[i].kind {
		case valueNull, valueUnchanged:
		case valueText:
			t[i].text = r.bytes(int(r.count(4, len(r.b), 1)))
		default:
			r.fail("column %d: value kind %q (binary values are not asked for)", i, t[i].kind)
		}
		if r.err != nil {
			return nil
		}
	}
	return t
}

func decodeTruncate(r *wire) msgTruncate {
	n := r.count(4, len(r.b), 4)
	r.skip(1)
	m := msgTruncate{oids: make([]uint32, n)}
	for i := range m.oids {
		m.oids[i] = r.u32()
	}
	return m
}

// wire reads big-endian fields from a message; the first fault sticks
// and later reads return zeros.
type wire struct {
	b   []byte
	pos int
	err error
}

func (r *wire) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("at byte %d: %s", r.pos, fmt.Sprintf(format, args...))
	}
}

// take returns the next n bytes, or nil after a fault.
func (r *wire) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.pos {
		r.fail("%d bytes wanted, %d left", n, len(r.b)-r.pos)
		return nil
	}
	p := r.b[r.pos : r.pos+n : r.pos+n]
	r.pos += n
	return p
}

func (r *wire) skip(n int) { r.take(n) }

func (r *wire) u8() byte {
	if p := r.take(1); p != nil {
		return p[0]
	}
	return 0
}

func (r *wire) u16() uint16 {
	if p := r.take(2); p != nil {
		return binary.BigEndian.Uint16(p)
	}
	return 0
}

func (r *wire) u32() uint32 {
	if p := r.take(4); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (r *wire) u64() uint64 {
	if p := r.take(8); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

// bytes returns the next n bytes, never nil on success (an empty text
// value is not NULL).
func (r *wire) bytes(n int) []byte {
	p := r.take(n)
	if p == nil && r.err == nil {
		return []byte{}
	}
	return p
}

// str reads a NUL-terminated string.
func (r *wire) str() string {
	if r.err != nil {
		return ""
	}
	end := bytes.IndexByte(r.b[r.pos:], 0)
	if end < 0 {
		r.fail("a string without its terminating NUL")
		return ""
	}
	s := string(r.b[r.pos : r.pos+end])
	r.pos += end + 1
	return s
}

// count reads a count of size bytes (2 or 4) that must be at most limit
// and leave at least per bytes for each item in what remains: the bound
// keeps every allocation proportional to the message.
func (r *wire) count(size, limit, per int) int {
	var n uint64
	if size == 2 {
		n = uint64(r.u16())
	} else {
		n = uint64(r.u32())
	}
	if r.err != nil {
		return 0
	}
	left := uint64(len(r.b) - r.pos)
	if n > uint64(limit) || n*uint64(per) > left {
		r.fail("count %d over the limit %d or the %d bytes left", n, limit, left)
		return 0
	}
	return int(n)
}
