package httpsrc

import (
	"encoding/binary"
	"fmt"
)

// verifyMeta checks an Arrow IPC message's metadata — a flatbuffer —
// before arrow-go reads it. arrow-go trusts the flatbuffer: it sizes
// allocations by the vector lengths it finds there (make([]arrow.Field,
// n) with n read from the bytes) and follows offsets unchecked, so a
// 300-byte stream can make it allocate 190 GB, and the process dies of
// that: a Go out-of-memory is fatal, not a panic. verifyMeta walks every
// table, vector and string arrow-go reads, and checks that
//
//   - every offset points forward and inside the buffer (arrow-go adds
//     offsets in 32 bits, so one can wrap around, point back, and make
//     a cycle);
//   - every table's vtable and fields, every vector's elements and every
//     string's bytes lie inside the buffer;
//   - the walk visits at most the buffer's size in tables, vectors and
//     strings (charge): a flatbuffer may point at one string or table
//     many times, and arrow-go copies it each time. Writers (arrow-go,
//     Arrow C++ and so pyarrow, Java, Rust) share nothing but vtables,
//     which are not charged.
//
// It refuses, as a *badStream, a schema of more than lim.Fields fields,
// more than nestedFieldsMax in all (arrow-go builds them all before the
// schema can be checked) or nested more than nestingMax deep (arrow-go
// recurses per level), custom metadata of more than metadataMax pairs,
// and compressed record batches: each compressed buffer states its own
// decompressed size, which arrow-go allocates unchecked, and the codecs
// keep windows of their own outside mem. A client compresses the HTTP
// body instead.
func verifyMeta(b []byte, lim Limits) error {
	v := &fbVerifier{b: b, lim: lim}
	root, err := v.deref(0)
	if err != nil {
		return err
	}
	return v.message(root)
}

// nestingMax is the deepest a field may nest in a schema; arrow-go's
// reader stops loading arrays at the same depth.
const nestingMax = 64

// slotsMax bounds the fields of a table arrow-go reads: Field has the
// most, 7.
const slotsMax = 8

// Message header types (Message.fbs, union MessageHeader).
const (
	headerSchema          = 1
	headerDictionaryBatch = 2
	headerRecordBatch     = 3
)

// Type union members whose tables hold more than scalars (Schema.fbs).
const (
	typeTagTimestamp = 10
	typeTagUnion     = 14
)

type fbVerifier struct {
	b      []byte
	lim    Limits
	charge int // bytes of the tables, vectors and strings visited
	fields int // Field tables visited, nested ones included
}

// nestedFieldsMax is the most fields a schema may have, nested ones
// included: generous for a struct of structs, and a bound on the schema
// arrow-go builds (about 100 bytes a field) from 8 bytes of metadata each.
func nestedFieldsMax(lim Limits) int { return 16 * lim.Fields }

// fbTable is a verified table: its fields lie in b[pos:pos+size].
type fbTable struct {
	pos, vt, vtLen, size int
}

func (v *fbVerifier) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid message metadata: "+format, args...)
}

func (v *fbVerifier) u32(at int) (uint32, error) {
	if at < 0 || at > len(v.b)-4 {
		return 0, v.errorf("offset %d outside %d bytes", at, len(v.b))
	}
	return binary.LittleEndian.Uint32(v.b[at:]), nil
}

func (v *fbVerifier) u16(at int) (int, error) {
	if at < 0 || at > len(v.b)-2 {
		return 0, v.errorf("offset %d outside %d bytes", at, len(v.b))
	}
	return int(binary.LittleEndian.Uint16(v.b[at:])), nil
}

func (v *fbVerifier) charged(n int64) error {
	v.charge += int(n)
	if int64(v.charge) > int64(len(v.b)) {
		return v.errorf("refers to more than its %d bytes (shared or overlapping objects)", len(v.b))
	}
	return nil
}

// deref follows the offset stored at at; it must point forward, inside
// the buffer.
func (v *fbVerifier) deref(at int) (int, error) {
	u, err := v.u32(at)
	if err != nil {
		return 0, err
	}
	target := int64(at) + int64(u)
	if u == 0 || target >= int64(len(v.b)) {
		return 0, v.errorf("offset %d at %d points outside %d bytes", u, at, len(v.b))
	}
	return int(target), nil
}

// table checks the table at pos: its vtable, and that every field it
// lists starts inside the table.
func (v *fbVerifier) table(pos int) (fbTable, error) {
	so, err := v.u32(pos)
	if err != nil {
		return fbTable{}, err
	}
	vt := int64(pos) - int64(int32(so))
	if vt < 0 || vt > int64(len(v.b))-4 {
		return fbTable{}, v.errorf("table at %d: vtable at %d outside %d bytes", pos, vt, len(v.b))
	}
	t := fbTable{pos: pos, vt: int(vt)}
	t.vtLen, _ = v.u16(t.vt) // in bounds: checked above
	t.size, _ = v.u16(t.vt + 2)
	if t.vtLen < 4 || t.vtLen%2 != 0 || t.vt+t.vtLen > len(v.b) || t.size < 4 || t.pos+t.size > len(v.b) {
		return fbTable{}, v.errorf("table at %d: vtable of %d bytes, table of %d, in %d bytes", pos, t.vtLen, t.size, len(v.b))
	}
	// Every field arrow-go may read starts inside the table. Only the
	// first slotsMax: a vtable may list 32,767 fields and be shared by
	// every table, and checking them all for each would cost the square.
	for at := t.vt + 4; at < t.vt+min(t.vtLen, 4+2*slotsMax); at += 2 {
		if off, _ := v.u16(at); off >= t.size {
			return fbTable{}, v.errorf("table at %d: a field at %d outside its %d bytes", pos, off, t.size)
		}
	}
	return t, v.charged(int64(t.size))
}

// field returns where slot's value of size bytes is, or -1 if absent.
func (v *fbVerifier) field(t fbTable, slot, size int) (int, error) {
	vo := 4 + 2*slot
	if vo+2 > t.vtLen {
		return -1, nil
	}
	off, _ := v.u16(t.vt + vo) // inside the vtable: checked by table
	if off == 0 {
		return -1, nil
	}
	if off+size > t.size {
		return 0, v.errorf("table at %d: field %d of %d bytes at %d outside its %d bytes", t.pos, slot, size, off, t.size)
	}
	return t.pos + off, nil
}

// child checks the table slot refers to; ok is false if it is absent.
func (v *fbVerifier) child(t fbTable, slot int) (c fbTable, ok bool, err error) {
	at, err := v.field(t, slot, 4)
	if err != nil || at < 0 {
		return fbTable{}, false, err
	}
	pos, err := v.deref(at)
	if err != nil {
		return fbTable{}, false, err
	}
	c, err = v.table(pos)
	return c, err == nil, err
}

// vector checks the vector slot refers to, of elements of elem bytes,
// and returns where its elements start and how many there are.
func (v *fbVerifier) vector(t fbTable, slot, elem int) (start, n int, err error) {
	at, err := v.field(t, slot, 4)
	if err != nil || at < 0 {
		return 0, 0, err
	}
	pos, err := v.deref(at)
	if err != nil {
		return 0, 0, err
	}
	count, err := v.u32(pos)
	if err != nil {
		return 0, 0, err
	}
	size := 4 + int64(count)*int64(elem)
	if int64(pos)+size > int64(len(v.b)) {
		return 0, 0, v.errorf("vector at %d: %d elements of %d bytes outside %d bytes", pos, count, elem, len(v.b))
	}
	return pos + 4, int(count), v.charged(size)
}

// tables checks every table of the vector of tables slot refers to.
func (v *fbVerifier) tables(t fbTable, slot int, each func(fbTable) error) error {
	start, n, err := v.vector(t, slot, 4)
	if err != nil {
		return err
	}
	return v.each(start, n, each)
}

// each checks the n tables whose offsets start at start.
func (v *fbVerifier) each(start, n int, check func(fbTable) error) error {
	for i := range n {
		pos, err := v.deref(start + 4*i)
		if err != nil {
			return err
		}
		c, err := v.table(pos)
		if err != nil {
			return err
		}
		if err := check(c); err != nil {
			return err
		}
	}
	return nil
}

// i64 reads a little-endian int64 at at, which a checked vector or
// field holds.
func (v *fbVerifier) i64(at int) int64 { return int64(binary.LittleEndian.Uint64(v.b[at:])) }

// long returns the int64 field slot of t; 0 (the default) if absent.
func (v *fbVerifier) long(t fbTable, slot int) (int64, error) {
	at, err := v.field(t, slot, 8)
	if err != nil || at < 0 {
		return 0, err
	}
	return v.i64(at), nil
}

// scalars checks that the scalar fields (slot, size) lie in t.
func (v *fbVerifier) scalars(t fbTable, fields ...[2]int) error {
	for _, f := range fields {
		if _, err := v.field(t, f[0], f[1]); err != nil {
			return err
		}
	}
	return nil
}

// message: version, header_type, header, bodyLength, custom_metadata.
func (v *fbVerifier) message(pos int) error {
	t, err := v.table(pos)
	if err != nil {
		return err
	}
	if err := v.scalars(t, [2]int{0, 2}); err != nil {
		return err
	}
	bodyLen, err := v.long(t, 3)
	if err != nil {
		return err
	}
	if err := v.metadata(t, 4); err != nil {
		return err
	}
	htAt, err := v.field(t, 1, 1)
	if err != nil {
		return err
	}
	ht := 0
	if htAt >= 0 {
		ht = int(v.b[htAt])
	}
	h, ok, err := v.child(t, 2)
	switch {
	case err != nil:
		return err
	case !ok:
		return v.errorf("a message without a header")
	case ht == headerSchema:
		return v.schema(h)
	case ht == headerDictionaryBatch:
		return v.dictionaryBatch(h, bodyLen)
	case ht == headerRecordBatch:
		return v.recordBatch(h, bodyLen)
	}
	return v.errorf("message header type %d; a stream holds a schema, dictionaries and record batches", ht)
}

// schema: endianness, fields, custom_metadata, features.
func (v *fbVerifier) schema(t fbTable) error {
	if err := v.scalars(t, [2]int{0, 2}); err != nil {
		return err
	}
	start, n, err := v.vector(t, 1, 4)
	switch {
	case err != nil:
		return err
	case n > v.lim.Fields:
		return refusedf("the stream's schema has %d fields; at most %d", n, v.lim.Fields)
	}
	if err := v.each(start, n, func(f fbTable) error { return v.arrowField(f, 1) }); err != nil {
		return err
	}
	if err := v.metadata(t, 2); err != nil {
		return err
	}
	_, _, err = v.vector(t, 3, 8)
	return err
}

// arrowField: name, nullable, type_type, type, dictionary, children,
// custom_metadata.
func (v *fbVerifier) arrowField(t fbTable, depth int) error {
	if v.fields++; v.fields > nestedFieldsMax(v.lim) {
		return refusedf("the stream's schema has more than %d fields, nested ones included", nestedFieldsMax(v.lim))
	}
	if depth > nestingMax {
		return refusedf("the stream's schema has fields nested more than %d deep", nestingMax)
	}
	if _, _, err := v.vector(t, 0, 1); err != nil {
		return err
	}
	if err := v.scalars(t, [2]int{1, 1}, [2]int{2, 1}); err != nil {
		return err
	}
	if err := v.fieldType(t); err != nil {
		return err
	}
	d, ok, err := v.child(t, 4)
	if err != nil {
		return err
	}
	if ok {
		if err := v.dictionaryEncoding(d); err != nil {
			return err
		}
	}
	if err := v.tables(t, 5, func(c fbTable) error { return v.arrowField(c, depth+1) }); err != nil {
		return err
	}
	return v.metadata(t, 6)
}

// fieldType checks a field's type table; only Timestamp (timezone) and
// Union (typeIds) hold more than scalars.
func (v *fbVerifier) fieldType(field fbTable) error {
	tagAt, err := v.field(field, 2, 1)
	if err != nil || tagAt < 0 {
		return err
	}
	t, ok, err := v.child(field, 3)
	if err != nil || !ok {
		return err
	}
	switch v.b[tagAt] {
	case typeTagTimestamp:
		_, _, err = v.vector(t, 1, 1)
	case typeTagUnion:
		_, _, err = v.vector(t, 1, 4)
	}
	return err
}

// dictionaryEncoding: id, indexType (an Int table), isOrdered, kind.
func (v *fbVerifier) dictionaryEncoding(t fbTable) error {
	if err := v.scalars(t, [2]int{0, 8}, [2]int{2, 1}, [2]int{3, 2}); err != nil {
		return err
	}
	it, ok, err := v.child(t, 1)
	if err != nil || !ok {
		return err
	}
	return v.scalars(it, [2]int{0, 4}, [2]int{1, 1})
}

// metadataMax bounds the key-value pairs of one custom_metadata: arrow-go
// makes two []string of as many as the vector claims, and 8 bytes of
// metadata a pair would otherwise make 64 bytes of Go memory. Writers
// put a handful there (pandas: one).
const metadataMax = 1024

// metadata checks the custom_metadata (a vector of KeyValue) slot
// refers to.
func (v *fbVerifier) metadata(t fbTable, slot int) error {
	start, n, err := v.vector(t, slot, 4)
	switch {
	case err != nil:
		return err
	case n > metadataMax:
		return refusedf("custom metadata of %d key-value pairs; at most %d", n, metadataMax)
	}
	return v.each(start, n, v.keyValue)
}

// keyValue: key, value.
func (v *fbVerifier) keyValue(t fbTable) error {
	if _, _, err := v.vector(t, 0, 1); err != nil {
		return err
	}
	_, _, err := v.vector(t, 1, 1)
	return err
}

// recordBatch: length, nodes, buffers (both structs of two longs),
// compression, variadicBufferCounts. Lengths and counts must not be
// negative, and every buffer must lie in the message body, of bodyLen
// bytes (arrow-go would slice past it, and panic).
func (v *fbVerifier) recordBatch(t fbTable, bodyLen int64) error {
	rows, err := v.long(t, 0)
	if err != nil {
		return err
	}
	if rows < 0 {
		return v.errorf("a record batch of %d rows", rows)
	}
	start, n, err := v.vector(t, 1, 16)
	for i := 0; i < n && err == nil; i++ {
		length, nulls := v.i64(start+16*i), v.i64(start+16*i+8)
		if length < 0 || nulls < 0 || nulls > length {
			err = v.errorf("field node %d: %d nulls in %d values", i, nulls, length)
		}
	}
	if err != nil {
		return err
	}
	start, n, err = v.vector(t, 2, 16)
	for i := 0; i < n && err == nil; i++ {
		off, length := v.i64(start+16*i), v.i64(start+16*i+8)
		if off < 0 || length < 0 || off > bodyLen || length > bodyLen-off {
			err = v.errorf("buffer %d at %d, %d bytes long, outside the %d-byte message body", i, off, length, bodyLen)
		}
	}
	if err != nil {
		return err
	}
	_, compressed, err := v.child(t, 3)
	switch {
	case err != nil:
		return err
	case compressed:
		return refusedf("compressed record batches are not accepted; send the stream uncompressed (compress the HTTP body instead)")
	}
	_, _, err = v.vector(t, 4, 8)
	return err
}

// dictionaryBatch: id, data (a record batch), isDelta.
func (v *fbVerifier) dictionaryBatch(t fbTable, bodyLen int64) error {
	if err := v.scalars(t, [2]int{0, 8}, [2]int{2, 1}); err != nil {
		return err
	}
	rb, ok, err := v.child(t, 1)
	switch {
	case err != nil:
		return err
	case !ok:
		return v.errorf("a dictionary batch without data")
	}
	return v.recordBatch(rb, bodyLen)
}
