package httpsrc

import (
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// fbBuf lays out a flatbuffer by hand, at absolute positions.
type fbBuf struct{ b []byte }

func (w *fbBuf) grow(end int) {
	if end > len(w.b) {
		w.b = append(w.b, make([]byte, end-len(w.b))...)
	}
}

func (w *fbBuf) u32(at int, v uint32) { w.grow(at + 4); binary.LittleEndian.PutUint32(w.b[at:], v) }
func (w *fbBuf) u16(at int, v uint16) { w.grow(at + 2); binary.LittleEndian.PutUint16(w.b[at:], v) }
func (w *fbBuf) ref(at, target int)   { w.u32(at, uint32(target-at)) }

// vtable writes a vtable at at: table size, then each field's offset.
func (w *fbBuf) vtable(at, size int, offs ...uint16) {
	w.u16(at, uint16(4+2*len(offs)))
	w.u16(at+2, uint16(size))
	for i, o := range offs {
		w.u16(at+4+2*i, o)
	}
}

// table writes a table's vtable offset at at.
func (w *fbBuf) table(at, vt int) { w.u32(at, uint32(int32(at-vt))) }

// schemaMessage lays out a Message whose header is a Schema, and returns
// where the Schema table is; the one vector slot it has (fields, 1, or
// custom_metadata, 2) is at offset 4, for the caller to point.
func schemaMessage(w *fbBuf, slot int) int {
	w.ref(0, 8)
	w.vtable(40, 12, 0, 4, 8) // Message: version absent, header_type at 4, header at 8
	w.table(8, 40)
	w.b[12] = headerSchema
	w.ref(16, 64)
	offs := make([]uint16, slot+1) // Schema: endianness absent
	offs[slot] = 4
	w.vtable(50, 8, offs...)
	w.table(64, 50)
	return 64
}

func TestVerifyMetaIsLinear(t *testing.T) {
	// 100,000 empty Field tables share a vtable that lists 32,000 fields.
	w := &fbBuf{}
	schema := schemaMessage(w, 1)
	const n = 100_000
	vec := 100
	w.ref(schema+4, vec)
	w.u32(vec, n)
	tables := vec + 4 + 4*n
	hugeVT := tables + 4*n
	for i := range n {
		w.ref(vec+4+4*i, tables+4*i)
		w.table(tables+4*i, hugeVT)
	}
	w.vtable(hugeVT, 4, make([]uint16, 32_000)...)
	lim := DefaultLimits()
	lim.Fields = n
	start := time.Now()
	err := verifyMeta(w.b, lim)
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Errorf("verifyMeta took %v", took)
	}
	if err != nil {
		t.Errorf("verifyMeta: %v", err)
	}
}

func TestVerifyMetaRefusesSharing(t *testing.T) {
	// 1,000 KeyValue tables all name one 1,000-byte string: arrow-go would
	// copy a megabyte out of 10 kB.
	w := &fbBuf{}
	schema := schemaMessage(w, 2)
	const n = 1_000
	vec := 100
	w.ref(schema+4, vec)
	w.u32(vec, n)
	kvVT := vec + 4 + 4*n
	w.vtable(kvVT, 12, 4, 8)
	kvs := kvVT + 8
	str := kvs + 12*n
	for i := range n {
		kv := kvs + 12*i
		w.ref(vec+4+4*i, kv)
		w.table(kv, kvVT)
		w.ref(kv+4, str)
		w.ref(kv+8, str)
	}
	w.u32(str, 1000)
	w.grow(str + 4 + 1000)
	lim := DefaultLimits()
	if err := verifyMeta(w.b, lim); err == nil || !strings.Contains(err.Error(), "refers to more than its") {
		t.Errorf("verifyMeta: %v; want an error about sharing", err)
	}
}

func TestVerifyMetaRefusesBackwardOffsets(t *testing.T) {
	w := &fbBuf{}
	schema := schemaMessage(w, 1)
	vec := 100
	w.ref(schema+4, vec)
	w.u32(vec, 1)
	w.u32(vec+4, 0xFFFFFFF0) // wraps around to vec-12 in 32 bits
	w.grow(200)
	lim := DefaultLimits()
	if err := verifyMeta(w.b, lim); err == nil || !strings.Contains(err.Error(), "offset 4294967280 at 104 points outside") {
		t.Errorf("verifyMeta: %v; want an error about the offset", err)
	}
}

func TestArrowNestingDepth(t *testing.T) {
	typ := arrow.DataType(arrow.PrimitiveTypes.Int64)
	for range nestingMax {
		typ = arrow.StructOf(arrow.Field{Name: "x", Type: typ, Nullable: true})
	}
	deep := arrow.NewSchema([]arrow.Field{{Name: "a", Type: typ, Nullable: true}}, nil)
	_, err := decode(t, ArrowIPC, string(writeStream(t, deep, nil)), DefaultLimits())
	wantInputError(t, err, 0, "", "message 1: the stream's schema has fields nested more than 64 deep")
}

// TestArrowFieldCounts: the verifier counts fields before arrow-go
// builds the schema.
func TestArrowFieldCounts(t *testing.T) {
	schema := func(top, children int) string {
		kids := make([]arrow.Field, children)
		for i := range kids {
			kids[i] = arrow.Field{Name: "k" + strconv.Itoa(i), Type: arrow.PrimitiveTypes.Int64}
		}
		fields := make([]arrow.Field, top)
		for i := range fields {
			fields[i] = arrow.Field{Name: "f" + strconv.Itoa(i), Type: arrow.StructOf(kids...)}
		}
		return string(writeStream(t, arrow.NewSchema(fields, nil), nil))
	}
	lim := DefaultLimits()
	lim.Fields = 2
	_, err := decode(t, ArrowIPC, schema(3, 0), lim)
	wantInputError(t, err, 0, "", "message 1: the stream's schema has 3 fields; at most 2")
	_, err = decode(t, ArrowIPC, schema(2, 20), lim) // 42 in all
	wantInputError(t, err, 0, "", "message 1: the stream's schema has more than 32 fields, nested ones included")
	_, err = decode(t, ArrowIPC, schema(2, 15), lim) // 32 in all: a schema, no rows
	wantInputError(t, err, 0, "", "no rows")
}

func TestArrowMetadataPairs(t *testing.T) {
	keys := make([]string, metadataMax+1)
	for i := range keys {
		keys[i] = strconv.Itoa(i)
	}
	for n, says := range map[int]string{metadataMax: "no rows", metadataMax + 1: "custom metadata of 1025 key-value pairs; at most 1024"} {
		md := arrow.NewMetadata(keys[:n], keys[:n])
		schema := arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}}, &md)
		_, err := decode(t, ArrowIPC, string(writeStream(t, schema, nil)), DefaultLimits())
		wantInputError(t, err, 0, "", says)
	}
}
