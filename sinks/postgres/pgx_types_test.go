package postgres

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/decimal256"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// typeCase is one mapped Arrow type: two values and, written by hand, the
// Postgres type and the text Postgres prints for each value (session
// TimeZone UTC). The round trip appends a null as a third row.
type typeCase struct {
	name   string
	typ    arrow.DataType
	pgType string
	build  func(b array.Builder)
	want   [2]string
}

var (
	tsUTC = &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}
	tsNY  = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "America/New_York"}
	tsMs  = &arrow.TimestampType{Unit: arrow.Millisecond}
	tsNs  = &arrow.TimestampType{Unit: arrow.Nanosecond}
)

func typeCases() []typeCase {
	return []typeCase{
		{"int8", arrow.PrimitiveTypes.Int8, "smallint", func(b array.Builder) { b.(*array.Int8Builder).AppendValues([]int8{-128, 127}, nil) }, [2]string{"-128", "127"}},
		{"int16", arrow.PrimitiveTypes.Int16, "smallint", func(b array.Builder) { b.(*array.Int16Builder).AppendValues([]int16{-32768, 32767}, nil) }, [2]string{"-32768", "32767"}},
		{"int32", arrow.PrimitiveTypes.Int32, "integer", func(b array.Builder) {
			b.(*array.Int32Builder).AppendValues([]int32{math.MinInt32, math.MaxInt32}, nil)
		}, [2]string{"-2147483648", "2147483647"}},
		{"int64", arrow.PrimitiveTypes.Int64, "bigint", func(b array.Builder) {
			b.(*array.Int64Builder).AppendValues([]int64{math.MinInt64, math.MaxInt64}, nil)
		}, [2]string{"-9223372036854775808", "9223372036854775807"}},
		{"uint8", arrow.PrimitiveTypes.Uint8, "smallint", func(b array.Builder) { b.(*array.Uint8Builder).AppendValues([]uint8{0, 255}, nil) }, [2]string{"0", "255"}},
		{"uint16", arrow.PrimitiveTypes.Uint16, "integer", func(b array.Builder) { b.(*array.Uint16Builder).AppendValues([]uint16{0, 65535}, nil) }, [2]string{"0", "65535"}},
		{"uint32", arrow.PrimitiveTypes.Uint32, "bigint", func(b array.Builder) { b.(*array.Uint32Builder).AppendValues([]uint32{1, math.MaxUint32}, nil) }, [2]string{"1", "4294967295"}},
		{"uint64", arrow.PrimitiveTypes.Uint64, "numeric(20,0)", func(b array.Builder) {
			b.(*array.Uint64Builder).AppendValues([]uint64{math.MaxInt64, math.MaxUint64}, nil)
		}, [2]string{"9223372036854775807", "18446744073709551615"}},
		{"float16", arrow.FixedWidthTypes.Float16, "real", func(b array.Builder) {
			b.(*array.Float16Builder).AppendValues([]float16.Num{float16.New(1.5), float16.New(-0.25)}, nil)
		}, [2]string{"1.5", "-0.25"}},
		{"float32", arrow.PrimitiveTypes.Float32, "real", func(b array.Builder) {
			b.(*array.Float32Builder).AppendValues([]float32{0.1, float32(math.Inf(1))}, nil)
		}, [2]string{"0.1", "Infinity"}},
		{"float64", arrow.PrimitiveTypes.Float64, "double precision", func(b array.Builder) { b.(*array.Float64Builder).AppendValues([]float64{math.Pi, math.NaN()}, nil) }, [2]string{"3.141592653589793", "NaN"}},
		{"bool", arrow.FixedWidthTypes.Boolean, "boolean", func(b array.Builder) { b.(*array.BooleanBuilder).AppendValues([]bool{true, false}, nil) }, [2]string{"true", "false"}},
		{"string", arrow.BinaryTypes.String, "text", func(b array.Builder) { b.(*array.StringBuilder).AppendValues([]string{"héllo ☃", ""}, nil) }, [2]string{"héllo ☃", ""}},
		{"large_string", arrow.BinaryTypes.LargeString, "text", func(b array.Builder) { b.(*array.LargeStringBuilder).AppendValues([]string{`a"b'c\`, "x"}, nil) }, [2]string{`a"b'c\`, "x"}},
		{"binary", arrow.BinaryTypes.Binary, "bytea", func(b array.Builder) { b.(*array.BinaryBuilder).AppendValues([][]byte{{0x00, 0xff}, {}}, nil) }, [2]string{`\x00ff`, `\x`}},
		{"large_binary", arrow.BinaryTypes.LargeBinary, "bytea", func(b array.Builder) { b.(*array.BinaryBuilder).AppendValues([][]byte{{0x01}, {}}, nil) }, [2]string{`\x01`, `\x`}},
		{"fixed_binary", &arrow.FixedSizeBinaryType{ByteWidth: 3}, "bytea", func(b array.Builder) {
			b.(*array.FixedSizeBinaryBuilder).AppendValues([][]byte{{1, 2, 3}, {0, 0, 0}}, nil)
		}, [2]string{`\x010203`, `\x000000`}},
		{"date32", arrow.FixedWidthTypes.Date32, "date", func(b array.Builder) { b.(*array.Date32Builder).AppendValues([]arrow.Date32{19723, -2440588}, nil) }, [2]string{"2024-01-01", "4714-11-24 BC"}},
		{"date64", arrow.FixedWidthTypes.Date64, "date", func(b array.Builder) { b.(*array.Date64Builder).AppendValues([]arrow.Date64{1704067200000, -1}, nil) }, [2]string{"2024-01-01", "1969-12-31"}},
		{"time32s", arrow.FixedWidthTypes.Time32s, "time without time zone", func(b array.Builder) { b.(*array.Time32Builder).AppendValues([]arrow.Time32{3661, 86400}, nil) }, [2]string{"01:01:01", "24:00:00"}},
		{"time32ms", arrow.FixedWidthTypes.Time32ms, "time without time zone", func(b array.Builder) { b.(*array.Time32Builder).AppendValues([]arrow.Time32{45296789, 0}, nil) }, [2]string{"12:34:56.789", "00:00:00"}},
		{"time64us", arrow.FixedWidthTypes.Time64us, "time without time zone", func(b array.Builder) { b.(*array.Time64Builder).AppendValues([]arrow.Time64{1, 86399999999}, nil) }, [2]string{"00:00:00.000001", "23:59:59.999999"}},
		{"time64ns", arrow.FixedWidthTypes.Time64ns, "time without time zone", func(b array.Builder) {
			b.(*array.Time64Builder).AppendValues([]arrow.Time64{1999, 86399999999999}, nil)
		}, [2]string{"00:00:00.000001", "23:59:59.999999"}},
		{"ts_s_utc", tsUTC, "timestamp with time zone", func(b array.Builder) { b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, -1}, nil) }, [2]string{"1970-01-01 00:00:00+00", "1969-12-31 23:59:59+00"}},
		{"ts_us_ny", tsNY, "timestamp with time zone", func(b array.Builder) {
			b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1, -210866803200000000}, nil)
		}, [2]string{"1970-01-01 00:00:00.000001+00", "4714-11-24 00:00:00+00 BC"}},
		{"ts_ms", tsMs, "timestamp without time zone", func(b array.Builder) {
			b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1704067200123, 0}, nil)
		}, [2]string{"2024-01-01 00:00:00.123", "1970-01-01 00:00:00"}},
		{"ts_ns", tsNs, "timestamp without time zone", func(b array.Builder) { b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{-1, 1999}, nil) }, [2]string{"1969-12-31 23:59:59.999999", "1970-01-01 00:00:00.000001"}},
		{"dec128", &arrow.Decimal128Type{Precision: 10, Scale: 2}, "numeric(10,2)", func(b array.Builder) {
			b.(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(12345), decimal128.FromI64(-1)}, nil)
		}, [2]string{"123.45", "-0.01"}},
		{"dec128_neg_scale", &arrow.Decimal128Type{Precision: 5, Scale: -2}, "numeric(5,-2)", func(b array.Builder) {
			b.(*array.Decimal128Builder).AppendValues([]decimal128.Num{decimal128.FromI64(123), decimal128.FromI64(0)}, nil)
		}, [2]string{"12300", "0"}},
		{"dec256", &arrow.Decimal256Type{Precision: 40, Scale: 5}, "numeric(40,5)", func(b array.Builder) {
			big39 := new(big.Int).Add(new(big.Int).Exp(big.NewInt(10), big.NewInt(39), nil), big.NewInt(1))
			b.(*array.Decimal256Builder).AppendValues([]decimal256.Num{decimal256.FromBigInt(big39), decimal256.FromI64(-5)}, nil)
		}, [2]string{"1" + strings.Repeat("0", 34) + ".00001", "-0.00005"}},
		{"struct", arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int64}, arrow.Field{Name: "b", Type: arrow.BinaryTypes.String, Nullable: true}), "jsonb", func(b array.Builder) {
			sb := b.(*array.StructBuilder)
			for _, v := range []struct {
				a int64
				b string
			}{{1, "x"}, {-2, ""}} {
				sb.Append(true)
				sb.FieldBuilder(0).(*array.Int64Builder).Append(v.a)
				sb.FieldBuilder(1).(*array.StringBuilder).Append(v.b)
			}
		}, [2]string{`{"a": 1, "b": "x"}`, `{"a": -2, "b": ""}`}},
		{"list", arrow.ListOf(arrow.PrimitiveTypes.Int32), "jsonb", func(b array.Builder) {
			lb := b.(*array.ListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.Int32Builder).AppendValues([]int32{1, 2}, nil)
			lb.ValueBuilder().AppendNull()
			lb.Append(true)
		}, [2]string{"[1, 2, null]", "[]"}},
		{"large_list", arrow.LargeListOf(arrow.BinaryTypes.String), "jsonb", func(b array.Builder) {
			lb := b.(*array.LargeListBuilder)
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append("a")
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append(`q"`)
		}, [2]string{`["a"]`, `["q\""]`}},
		{"map", arrow.MapOf(arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32), "jsonb", func(b array.Builder) {
			mb := b.(*array.MapBuilder)
			mb.Append(true)
			mb.KeyBuilder().(*array.StringBuilder).Append("k")
			mb.ItemBuilder().(*array.Int32Builder).Append(1)
			mb.Append(true)
		}, [2]string{`[{"key": "k", "value": 1}]`, "[]"}},
	}
}

// Every mapped Arrow type, with a null, goes into a table the sink
// creates and reads back as the same values, in a column of the type
// PGType's table promises.
func TestPGXTypeRoundTrip(t *testing.T) {
	s := newServer(t, 2)
	cases := typeCases()
	fields := []arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}}
	for _, c := range cases {
		fields = append(fields, arrow.Field{Name: c.name, Type: c.typ, Nullable: true})
	}
	rb := array.NewRecordBuilder(memory.DefaultAllocator, arrow.NewSchema(fields, nil))
	defer rb.Release()
	rb.Field(0).(*array.Int64Builder).AppendValues([]int64{0, 1, 2}, nil)
	for i, c := range cases {
		c.build(rb.Field(i + 1))
		rb.Field(i + 1).AppendNull()
	}
	s.mustApply(t, plainJob("j-types", "types", rb.NewRecordBatch()))

	types := s.columnTypes(t, "types")
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if mapped, ok := PGType(c.typ); !ok || mapped != c.pgType {
				t.Errorf("PGType(%s) = %q, %t; want %q", c.typ, mapped, ok, c.pgType)
			}
			if types[c.name] != c.pgType {
				t.Errorf("column type %q, want %q", types[c.name], c.pgType)
			}
			got := s.texts(t, fmt.Sprintf("SELECT %s::text FROM types ORDER BY n", quote(c.name)))
			want := []string{c.want[0], c.want[1], "NULL"}
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for r := range want {
				if got[r][0] != want[r] {
					t.Errorf("row %d: %q, want %q", r, got[r][0], want[r])
				}
			}
		})
	}
}
