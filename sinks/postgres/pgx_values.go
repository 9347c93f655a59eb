package postgres

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/jackc/pgx/v5/pgtype"
)

// valueFunc returns row i of one Arrow array as the Go value pgx encodes
// for the column type PGType maps the array's type to, or why Postgres
// cannot hold it.
// REQUIRES: row i is not null.
type valueFunc func(i int) (any, error)

// Postgres's date and timestamp ranges (src/include/datatype/timestamp.h),
// moved to the Unix epoch: dates from Julian day 0 (4714-11-24 BC) up to,
// not including, Julian day 2147483494 (5874898-01-01); timestamps from
// Julian day 0 on. Every int64 count of microseconds after the epoch is
// below the timestamp end, so it needs no check.
const (
	unixJulianDay      = 2440588 // Julian day number of 1970-01-01
	dateUnixDaysMin    = -unixJulianDay
	dateUnixDaysEnd    = 2147483494 - unixJulianDay
	timestampMicrosMin = dateUnixDaysMin * microsPerDay
	microsPerDay       = 86_400_000_000
	msPerDay           = 86_400_000
)

// converter returns the valueFunc of arr.
// REQUIRES: PGType maps arr's type (Plan refused the job otherwise).
func converter(arr arrow.Array) valueFunc {
	if f := numberConverter(arr); f != nil {
		return f
	}
	if f := timeConverter(arr); f != nil {
		return f
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return func(i int) (any, error) { return a.Value(i), nil }
	case *array.String:
		return func(i int) (any, error) { return textValue(a.Value(i)) }
	case *array.LargeString:
		return func(i int) (any, error) { return textValue(a.Value(i)) }
	case *array.Binary:
		return func(i int) (any, error) { return byteaValue(a.Value(i)), nil }
	case *array.LargeBinary:
		return func(i int) (any, error) { return byteaValue(a.Value(i)), nil }
	case *array.FixedSizeBinary:
		return func(i int) (any, error) { return byteaValue(a.Value(i)), nil }
	case *array.Decimal128:
		scale := a.DataType().(arrow.DecimalType).GetScale()
		return func(i int) (any, error) { return numericValue(a.Value(i).BigInt(), scale), nil }
	case *array.Decimal256:
		scale := a.DataType().(arrow.DecimalType).GetScale()
		return func(i int) (any, error) { return numericValue(a.Value(i).BigInt(), scale), nil }
	case *array.Struct, *array.List, *array.LargeList, *array.Map:
		return func(i int) (any, error) { return jsonValue(arr, i) }
	}
	panic(fmt.Sprintf("postgres: no converter for Arrow type %s (PGType maps it?)", arr.DataType()))
}

// numberConverter handles the integer and floating-point arrays: each to
// the Go type of its Postgres column (smallint int16, integer int32,
// bigint int64, numeric(20,0) a numeric, real float32, double float64).
func numberConverter(arr arrow.Array) valueFunc {
	switch a := arr.(type) {
	case *array.Int8:
		return func(i int) (any, error) { return int16(a.Value(i)), nil }
	case *array.Uint8:
		return func(i int) (any, error) { return int16(a.Value(i)), nil }
	case *array.Int16:
		return func(i int) (any, error) { return a.Value(i), nil }
	case *array.Int32:
		return func(i int) (any, error) { return a.Value(i), nil }
	case *array.Uint16:
		return func(i int) (any, error) { return int32(a.Value(i)), nil }
	case *array.Int64:
		return func(i int) (any, error) { return a.Value(i), nil }
	case *array.Uint32:
		return func(i int) (any, error) { return int64(a.Value(i)), nil }
	case *array.Uint64:
		return func(i int) (any, error) { return uint64Value(a.Value(i)), nil }
	case *array.Float16:
		return func(i int) (any, error) { return a.Value(i).Float32(), nil }
	case *array.Float32:
		return func(i int) (any, error) { return a.Value(i), nil }
	case *array.Float64:
		return func(i int) (any, error) { return a.Value(i), nil }
	}
	return nil
}

// timeConverter handles dates, times of day and timestamps.
func timeConverter(arr arrow.Array) valueFunc {
	switch a := arr.(type) {
	case *array.Date32:
		return func(i int) (any, error) { return dateValue(int64(a.Value(i))) }
	case *array.Date64:
		return func(i int) (any, error) { return dateValue(floorDiv(int64(a.Value(i)), msPerDay)) }
	case *array.Time32:
		unit := a.DataType().(*arrow.Time32Type).Unit
		return func(i int) (any, error) { return timeOfDayValue(int64(a.Value(i)), unit) }
	case *array.Time64:
		unit := a.DataType().(*arrow.Time64Type).Unit
		return func(i int) (any, error) { return timeOfDayValue(int64(a.Value(i)), unit) }
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return func(i int) (any, error) { return timestampValue(int64(a.Value(i)), unit) }
	}
	return nil
}

// uint64Value is a numeric(20,0) value: through pgx's int64 path when it
// fits, else as a big integer.
func uint64Value(v uint64) any {
	if v <= math.MaxInt64 {
		return int64(v)
	}
	return pgtype.Numeric{Int: new(big.Int).SetUint64(v), Valid: true}
}

// numericValue is the decimal unscaled × 10^-scale, exactly.
func numericValue(unscaled *big.Int, scale int32) pgtype.Numeric {
	return pgtype.Numeric{Int: unscaled, Exp: -scale, Valid: true}
}

// textValue checks what Postgres text refuses: NUL bytes, invalid UTF-8.
func textValue(s string) (any, error) {
	if strings.IndexByte(s, 0) >= 0 {
		return nil, errors.New("text holds a NUL byte, which Postgres text cannot")
	}
	if !utf8.ValidString(s) {
		return nil, errors.New("text is not valid UTF-8")
	}
	return s, nil
}

// byteaValue keeps an empty value non-nil: pgx writes a nil slice as NULL.
func byteaValue(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// dateValue is the date days after 1970-01-01.
func dateValue(days int64) (any, error) {
	if days < dateUnixDaysMin || days >= dateUnixDaysEnd {
		return nil, fmt.Errorf("date %d days from 1970-01-01 is outside Postgres's range", days)
	}
	return pgtype.Date{Time: time.Unix(days*86400, 0).UTC(), Valid: true}, nil
}

// timeOfDayValue is a time of day in unit, truncated to microseconds.
func timeOfDayValue(v int64, unit arrow.TimeUnit) (any, error) {
	us, ok := micros(v, unit)
	if !ok || us < 0 || us > microsPerDay {
		return nil, fmt.Errorf("time of day %d%s is outside 00:00 to 24:00", v, unit)
	}
	return pgtype.Time{Microseconds: us, Valid: true}, nil
}

// timestampValue is an instant v units after the Unix epoch, truncated
// to microseconds; pgx writes its UTC wall clock for a timestamp without
// zone.
func timestampValue(v int64, unit arrow.TimeUnit) (any, error) {
	us, ok := micros(v, unit)
	if !ok || us < timestampMicrosMin {
		return nil, fmt.Errorf("timestamp %d%s is outside Postgres's range", v, unit)
	}
	return time.UnixMicro(us).UTC(), nil
}

// micros converts v in unit to microseconds, rounding down; ok is false
// when the result overflows int64.
func micros(v int64, unit arrow.TimeUnit) (us int64, ok bool) {
	switch unit {
	case arrow.Second:
		return v * 1_000_000, v >= math.MinInt64/1_000_000 && v <= math.MaxInt64/1_000_000
	case arrow.Millisecond:
		return v * 1_000, v >= math.MinInt64/1_000 && v <= math.MaxInt64/1_000
	case arrow.Microsecond:
		return v, true
	case arrow.Nanosecond:
		return floorDiv(v, 1_000), true
	}
	panic(fmt.Sprintf("postgres: time unit %d", unit))
}

// floorDiv is a/b rounded toward negative infinity.
// REQUIRES: b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// jsonValue is row i of a nested array in its JSON form (arrow's
// GetOneForMarshal), for a jsonb column. Arrow panics on JSON it cannot
// build; that becomes an error, not a crash of the worker.
func jsonValue(arr arrow.Array, i int) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			v, err = nil, fmt.Errorf("encoding JSON: %v", r)
		}
	}()
	raw, err := json.Marshal(arr.GetOneForMarshal(i))
	if err != nil {
		return nil, fmt.Errorf("encoding JSON: %w", err)
	}
	if hasNULEscape(raw) {
		return nil, errors.New(`JSON holds a string with a NUL character (\u0000), which jsonb refuses`)
	}
	return json.RawMessage(raw), nil
}

// hasNULEscape reports whether JSON text holds the escape \u0000.
func hasNULEscape(raw []byte) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		if i+1 < len(raw) && raw[i+1] == 'u' && bytes.HasPrefix(raw[i+2:], []byte("0000")) {
			return true
		}
		i++ // the escaped character, which may itself be a backslash
	}
	return false
}
