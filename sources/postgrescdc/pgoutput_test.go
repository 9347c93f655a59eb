package postgrescdc

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"

	"github.com/jackc/pglogrepl"
)

// enc builds pgoutput messages for tests, field by field as the
// protocol documents them.
type enc []byte

func (e enc) u8(v byte) enc     { return append(e, v) }
func (e enc) u16(v uint16) enc  { return binary.BigEndian.AppendUint16(e, v) }
func (e enc) u32(v uint32) enc  { return binary.BigEndian.AppendUint32(e, v) }
func (e enc) u64(v uint64) enc  { return binary.BigEndian.AppendUint64(e, v) }
func (e enc) str(s string) enc  { return append(append(e, s...), 0) }
func (e enc) text(s string) enc { return append(e.u8('t').u32(uint32(len(s))), s...) }

// tuple encodes values: "\x00" is NULL, "\x01" unchanged TOAST.
func (e enc) tuple(values ...string) enc {
	e = e.u16(uint16(len(values)))
	for _, v := range values {
		switch v {
		case "\x00":
			e = e.u8('n')
		case "\x01":
			e = e.u8('u')
		default:
			e = e.text(v)
		}
	}
	return e
}

func tv(values ...string) []tupleValue {
	out := make([]tupleValue, len(values))
	for i, v := range values {
		switch v {
		case "\x00":
			out[i] = tupleValue{kind: valueNull}
		case "\x01":
			out[i] = tupleValue{kind: valueUnchanged}
		default:
			out[i] = tupleValue{kind: valueText, text: []byte(v)}
		}
	}
	return out
}

// testMessages are well-formed messages and what they decode to.
func testMessages() []struct {
	name string
	b    enc
	want any
} {
	rel := enc{}.u8('R').u32(16384).str("public").str("items").u8('d').u16(2).
		u8(1).str("id").u32(oidInt8).u32(0xFFFFFFFF).u8(0).str("name").u32(25).u32(0xFFFFFFFF)
	return []struct {
		name string
		b    enc
		want any
	}{
		{"begin", enc{}.u8('B').u64(0x16B3748).u64(1).u32(7), msgBegin{commit: 0x16B3748}},
		{"commit", enc{}.u8('C').u8(0).u64(0x16B3748).u64(0x16B3778).u64(1), msgCommit{commit: 0x16B3748, end: 0x16B3778}},
		{"relation", rel, msgRelation{oid: 16384, name: tableName{"public", "items"}, replIdent: 'd', columns: []relColumn{
			{key: true, name: "id", typOID: oidInt8, typmod: -1}, {name: "name", typOID: 25, typmod: -1}}}},
		{"insert", enc{}.u8('I').u32(16384).u8('N').tuple("1", "\x00"), msgChange{op: 'I', oid: 16384, new: tv("1", "\x00")}},
		{"insert of empty text", enc{}.u8('I').u32(1).u8('N').tuple(""), msgChange{op: 'I', oid: 1, new: []tupleValue{{kind: valueText, text: []byte{}}}}},
		{"update", enc{}.u8('U').u32(16384).u8('N').tuple("1", "\x01"), msgChange{op: 'U', oid: 16384, new: tv("1", "\x01")}},
		{"update with key", enc{}.u8('U').u32(1).u8('K').tuple("1", "\x00").u8('N').tuple("2", "b"),
			msgChange{op: 'U', oid: 1, oldKind: 'K', old: tv("1", "\x00"), new: tv("2", "b")}},
		{"update with old row", enc{}.u8('U').u32(1).u8('O').tuple("1", "a").u8('N').tuple("1", "\x01"),
			msgChange{op: 'U', oid: 1, oldKind: 'O', old: tv("1", "a"), new: tv("1", "\x01")}},
		{"delete", enc{}.u8('D').u32(1).u8('K').tuple("1", "\x00"), msgChange{op: 'D', oid: 1, oldKind: 'K', old: tv("1", "\x00")}},
		{"truncate", enc{}.u8('T').u32(2).u8(0).u32(5).u32(6), msgTruncate{oids: []uint32{5, 6}}},
		{"origin", enc{}.u8('O').u64(1).str("elsewhere"), msgIgnored{'O'}},
		{"type", enc{}.u8('Y').u32(9).str("public").str("mood"), msgIgnored{'Y'}},
	}
}

func TestDecodeMessage(t *testing.T) {
	for _, c := range testMessages() {
		t.Run(c.name, func(t *testing.T) {
			got, err := decodeMessage(c.b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("decoded %#v\nwant    %#v", got, c.want)
			}
		})
	}
}

// Every prefix of a well-formed message, and every message with bytes
// after it, is refused with an error — never a panic, never a partial
// message.
func TestDecodeMessageRefusesTornInput(t *testing.T) {
	for _, c := range testMessages() {
		if c.name == "origin" || c.name == "type" {
			continue // read and ignored whole
		}
		for n := range len(c.b) {
			if m, err := decodeMessage(c.b[:n]); err == nil {
				t.Fatalf("%s: %d of %d bytes decoded to %#v", c.name, n, len(c.b), m)
			}
		}
		if _, err := decodeMessage(append(c.b[:len(c.b):len(c.b)], 0)); err == nil {
			t.Fatalf("%s: a trailing byte was accepted", c.name)
		}
	}
}

func TestDecodeMessageRefuses(t *testing.T) {
	for _, c := range []struct {
		name, why string
		b         enc
	}{
		{"unknown type", "not one the source asked for", enc{}.u8('S').u32(1)},
		{"binary value", "binary values", enc{}.u8('I').u32(1).u8('N').u16(1).u8('b').u32(1).u8(0)},
		{"delete without key", "delete with tuple marker", enc{}.u8('D').u32(1).u8('N').tuple("1")},
		{"insert marker", "new tuple", enc{}.u8('I').u32(1).u8('K').tuple("1")},
		{"column count over the bytes", "count", enc{}.u8('I').u32(1).u8('N').u16(60000)},
		{"text length over the bytes", "count 4294967280", enc{}.u8('I').u32(1).u8('N').u16(1).u8('t').u32(0xFFFFFFF0)},
		{"relation of too many columns", "count", enc{}.u8('R').u32(1).str("s").str("t").u8('d').u16(columnsMax + 1)},
		{"truncate count", "count", enc{}.u8('T').u32(1 << 30).u8(0)},
		{"string without NUL", "NUL", enc{}.u8('R').u32(1).append("public")},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeMessage(c.b)
			if err == nil || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("error %v; want one saying %q", err, c.why)
			}
		})
	}
}

func (e enc) append(s string) enc { return append(e, s...) }

// FuzzDecodeMessage: no input panics, and what decodes is made of the
// input's own bytes, within its length.
func FuzzDecodeMessage(f *testing.F) {
	for _, c := range testMessages() {
		f.Add([]byte(c.b))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodeMessage(b)
		if err != nil {
			return
		}
		if c, ok := m.(msgChange); ok && len(c.old)+len(c.new) > len(b) {
			t.Fatalf("%d values from %d bytes", len(c.old)+len(c.new), len(b))
		}
		if r, ok := m.(msgRelation); ok && len(r.columns)*10 > len(b) {
			t.Fatalf("%d columns from %d bytes", len(r.columns), len(b))
		}
	})
}

// A keepalive and an XLogData as the replication protocol frames them
// are read by pglogrepl's parsers, which check their lengths.
func TestReplicationFraming(t *testing.T) {
	if _, err := pglogrepl.ParsePrimaryKeepaliveMessage(make([]byte, 16)); err == nil {
		t.Fatal("a short keepalive parsed")
	}
	if _, err := pglogrepl.ParseXLogData(make([]byte, 23)); err == nil {
		t.Fatal("a short XLogData parsed")
	}
}
