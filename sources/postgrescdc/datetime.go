package postgrescdc

import (
	"errors"
	"math"
)

// Dates and timestamps in the text form sessionParams make Postgres
// print (DateStyle ISO, TimeZone UTC):
//
//	date         Y…Y-MM-DD[ BC]
//	timestamp    Y…Y-MM-DD HH:MM:SS[.F…F][ BC]
//	timestamptz  Y…Y-MM-DD HH:MM:SS[.F…F]±HH[:MM[:SS]][ BC]
//
// (four or more year digits; years before 1 AD as "BC"). They become
// days, or microseconds, since 1970-01-01 in the proleptic Gregorian
// calendar that Postgres uses. "infinity" and "-infinity", and instants
// beyond what an int64 of microseconds holds, have no Arrow value:
// errNotRepresentable.

var (
	errBadDateTime      = errors.New("not an ISO date or timestamp")
	errNotRepresentable = errors.New("beyond what the Arrow type holds (±infinity, or too far from 1970)")
)

const (
	microsPerSecond = 1_000_000
	microsPerDay    = 86_400 * microsPerSecond
	// yearDigitsMax: Postgres dates end in year 5874897.
	yearDigitsMax = 7
)

// parseDate returns the days since 1970-01-01 of a date's text form.
func parseDate(s []byte) (int32, error) {
	p := dtParser{s: s}
	p.date()
	p.era()
	if err := p.end(); err != nil {
		return 0, err
	}
	days := p.days()
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, errNotRepresentable
	}
	return int32(days), nil
}

// parseTimestamp returns the microseconds since 1970-01-01 00:00 UTC of
// a timestamp's text form; zoned: it carries a UTC offset.
func parseTimestamp(s []byte, zoned bool) (int64, error) {
	p := dtParser{s: s}
	p.date()
	p.expect(' ')
	secs := p.clock()
	micros := p.fraction()
	if zoned {
		secs -= p.offset()
	}
	p.era()
	if err := p.end(); err != nil {
		return 0, err
	}
	days := p.days()
	// |days| < 4e9 and |secs| < 2e5, so the sums below cannot overflow
	// before the range check.
	const dayLimit = math.MaxInt64/microsPerDay - 1
	if days < -dayLimit || days > dayLimit {
		return 0, errNotRepresentable
	}
	return days*microsPerDay + secs*microsPerSecond + micros, nil
}

// dtParser reads one text form; the first fault sticks.
type dtParser struct {
	s   []byte
	pos int
	err error
	// The date read: year (AD, or BC when bc), month, day.
	y, m, d int64
	bc      bool
}

func (p *dtParser) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

func (p *dtParser) end() error {
	if p.err == nil && p.pos != len(p.s) {
		p.fail(errBadDateTime)
	}
	return p.err
}

// digits reads between lo and hi decimal digits.
func (p *dtParser) digits(lo, hi int) int64 {
	var v int64
	n := 0
	for p.err == nil && p.pos < len(p.s) && n < hi && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		v = v*10 + int64(p.s[p.pos]-'0')
		p.pos++
		n++
	}
	if n < lo {
		p.fail(errBadDateTime)
	}
	return v
}

func (p *dtParser) expect(c byte) {
	if p.err == nil && (p.pos >= len(p.s) || p.s[p.pos] != c) {
		p.fail(errBadDateTime)
	}
	p.pos++
}

func (p *dtParser) peek(c byte) bool { return p.err == nil && p.pos < len(p.s) && p.s[p.pos] == c }

// date reads Y…Y-MM-DD.
func (p *dtParser) date() {
	if p.err == nil && len(p.s) > 0 && (p.s[0] == 'i' || p.s[0] == '-') {
		p.fail(errNotRepresentable) // infinity, -infinity
		return
	}
	p.y = p.digits(4, yearDigitsMax)
	p.expect('-')
	p.m = p.digits(2, 2)
	p.expect('-')
	p.d = p.digits(2, 2)
	if p.m < 1 || p.m > 12 || p.d < 1 || p.d > 31 {
		p.fail(errBadDateTime)
	}
}

// days returns the days since the epoch of the date read: year y BC is
// astronomical year 1-y.
func (p *dtParser) days() int64 {
	y := p.y
	if p.bc {
		y = 1 - y
	}
	return daysFromCivil(y, p.m, p.d)
}

// clock reads HH:MM:SS and returns seconds into the day.
func (p *dtParser) clock() int64 {
	h := p.digits(2, 2)
	p.expect(':')
	m := p.digits(2, 2)
	p.expect(':')
	s := p.digits(2, 2)
	if h > 24 || m > 59 || s > 60 {
		p.fail(errBadDateTime)
	}
	return h*3600 + m*60 + s
}

// fraction reads an optional .F…F (up to 6 digits) as microseconds.
func (p *dtParser) fraction() int64 {
	if !p.peek('.') {
		return 0
	}
	p.pos++
	start := p.pos
	f := p.digits(1, 6)
	for range 6 - (p.pos - start) {
		f *= 10
	}
	return f
}

// offset reads ±HH[:MM[:SS]] and returns it in seconds east of UTC.
func (p *dtParser) offset() int64 {
	sign := int64(1)
	switch {
	case p.peek('+'):
	case p.peek('-'):
		sign = -1
	default:
		p.fail(errBadDateTime)
		return 0
	}
	p.pos++
	off := p.digits(2, 2) * 3600
	for unit := int64(60); unit >= 1 && p.peek(':'); unit /= 60 {
		p.pos++
		off += p.digits(2, 2) * unit
	}
	return sign * off
}

// era reads an optional " BC" at the end.
func (p *dtParser) era() {
	if p.err != nil || p.pos == len(p.s) {
		return
	}
	if string(p.s[p.pos:]) != " BC" || p.y < 1 {
		p.fail(errBadDateTime)
		return
	}
	p.pos = len(p.s)
	p.bc = true
}

// daysFromCivil returns the days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (astronomical years: 0 is 1 BC). Years
// are shifted to start in March so that the leap day ends a year.
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era-- // floor division
	}
	yoe := y - era*400                     // [0, 399]
	mp := (m + 9) % 12                     // March = 0
	doy := (153*mp+2)/5 + d - 1            // [0, 365]
	doe := yoe*365 + yoe/4 - yoe/100 + doy // [0, 146096]
	return era*146097 + doe - 719468
}
