package postgrescdc

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// colKind is how a Postgres column becomes an Arrow column:
//
//	bool                          bool
//	smallint, integer, bigint     int16, int32, int64
//	real, double precision        float32, float64
//	bytea                         binary
//	date                          date32
//	timestamp                     timestamp[us]
//	timestamptz                   timestamp[us, tz=UTC]
//	anything else — text, varchar, char, numeric, json, jsonb,
//	uuid, arrays, enums, … —      string: Postgres's text form
//
// Every Arrow field is nullable: a delete carries its key columns only.
type colKind uint8

const (
	kindString colKind = iota
	kindBool
	kindInt16
	kindInt32
	kindInt64
	kindFloat32
	kindFloat64
	kindBinary
	kindDate
	kindTimestamp
	kindTimestampTZ
)

// Type OIDs of the built-in types mapped to something other than string
// (pg_type.dat; they never change).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidFloat4      = 700
	oidFloat8      = 701
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestampTZ = 1184
)

func kindOf(typOID uint32) colKind {
	switch typOID {
	case oidBool:
		return kindBool
	case oidInt2:
		return kindInt16
	case oidInt4:
		return kindInt32
	case oidInt8:
		return kindInt64
	case oidFloat4:
		return kindFloat32
	case oidFloat8:
		return kindFloat64
	case oidBytea:
		return kindBinary
	case oidDate:
		return kindDate
	case oidTimestamp:
		return kindTimestamp
	case oidTimestampTZ:
		return kindTimestampTZ
	}
	return kindString
}

func (k colKind) arrowType() arrow.DataType {
	switch k {
	case kindBool:
		return arrow.FixedWidthTypes.Boolean
	case kindInt16:
		return arrow.PrimitiveTypes.Int16
	case kindInt32:
		return arrow.PrimitiveTypes.Int32
	case kindInt64:
		return arrow.PrimitiveTypes.Int64
	case kindFloat32:
		return arrow.PrimitiveTypes.Float32
	case kindFloat64:
		return arrow.PrimitiveTypes.Float64
	case kindBinary:
		return arrow.BinaryTypes.Binary
	case kindDate:
		return arrow.FixedWidthTypes.Date32
	case kindTimestamp:
		return &arrow.TimestampType{Unit: arrow.Microsecond}
	case kindTimestampTZ:
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	}
	return arrow.BinaryTypes.String
}

var errBadText = errors.New("not the type's text form")

// appendText appends one value in Postgres text form (nil: NULL) to b,
// a builder of k's Arrow type.
func appendText(b array.Builder, k colKind, text []byte) error {
	if text == nil {
		b.AppendNull()
		return nil
	}
	switch k {
	case kindString:
		if !utf8.Valid(text) {
			return fmt.Errorf("not UTF-8")
		}
		b.(*array.StringBuilder).BinaryBuilder.Append(text)
	case kindBinary:
		return appendBytea(b.(*array.BinaryBuilder), text)
	case kindBool:
		return appendBool(b.(*array.BooleanBuilder), text)
	case kindInt16, kindInt32, kindInt64:
		return appendInt(b, k, text)
	case kindFloat32, kindFloat64:
		return appendFloat(b, k, text)
	case kindDate:
		d, err := parseDate(text)
		if err != nil {
			return err
		}
		b.(*array.Date32Builder).Append(arrow.Date32(d))
	case kindTimestamp, kindTimestampTZ:
		ts, err := parseTimestamp(text, k == kindTimestampTZ)
		if err != nil {
			return err
		}
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(ts))
	default:
		panic(fmt.Sprintf("postgrescdc: column kind %d", k))
	}
	return nil
}

func appendBool(b *array.BooleanBuilder, text []byte) error {
	switch string(text) {
	case "t":
		b.Append(true)
	case "f":
		b.Append(false)
	default:
		return errBadText
	}
	return nil
}

func appendInt(b array.Builder, k colKind, text []byte) error {
	bits := 64
	switch k {
	case kindInt16:
		bits = 16
	case kindInt32:
		bits = 32
	}
	v, err := strconv.ParseInt(string(text), 10, bits)
	if err != nil {
		return errBadText
	}
	switch k {
	case kindInt16:
		b.(*array.Int16Builder).Append(int16(v))
	case kindInt32:
		b.(*array.Int32Builder).Append(int32(v))
	default:
		b.(*array.Int64Builder).Append(v)
	}
	return nil
}

// appendFloat takes Postgres's forms, "NaN", "Infinity" and "-Infinity"
// included (ParseFloat reads them too).
func appendFloat(b array.Builder, k colKind, text []byte) error {
	if k == kindFloat32 {
		v, err := strconv.ParseFloat(string(text), 32)
		if err != nil {
			return errBadText
		}
		b.(*array.Float32Builder).Append(float32(v))
		return nil
	}
	v, err := strconv.ParseFloat(string(text), 64)
	if err != nil {
		return errBadText
	}
	b.(*array.Float64Builder).Append(v)
	return nil
}

// appendBytea reads bytea's hex form, "\x" then two hex digits a byte
// (bytea_output = hex, sessionParams).
func appendBytea(b *array.BinaryBuilder, text []byte) error {
	if len(text) < 2 || text[0] != '\\' || text[1] != 'x' || len(text)%2 != 0 {
		return errBadText
	}
	out := make([]byte, (len(text)-2)/2)
	if _, err := hex.Decode(out, text[2:]); err != nil {
		return errBadText
	}
	b.Append(out)
	return nil
}
