package generator

import "time"

// pacer spaces one partition's units so that its rows follow a constant
// rate: the unit that ends at row k (counted from the schedule's origin)
// is due k/rate after the origin. A unit is sent when its last row is
// due, so a partition never runs ahead of its rate. When it falls more
// than lagMax behind — backpressure, a suspended machine — the schedule
// restarts from the present instead of bursting the backlog out.
type pacer struct {
	rate       float64   // rows per second; ≤ 0: unpaced
	origin     time.Time // when row originOffset was due
	originRows uint64    // the offset at origin
}

func newPacer(rowsPerSecond float64, now time.Time, offset uint64) *pacer {
	return &pacer{rate: rowsPerSecond, origin: now, originRows: offset}
}

// wait returns how long to wait before sending the unit [next, next+n).
//
// REQUIRES: next ≥ the offset the pacer was created (or last reset) at.
func (p *pacer) wait(now time.Time, next, n uint64) time.Duration {
	if p.rate <= 0 {
		return 0
	}
	if next < p.originRows {
		panic("generator: pacer asked about an offset before its origin")
	}
	due := p.origin.Add(p.after(next + n - p.originRows))
	if d := due.Sub(now); d > 0 {
		return d
	}
	// Behind: the start of this unit should have been sent by now.
	if behind := now.Sub(p.origin.Add(p.after(next - p.originRows))); behind > lagMax {
		p.origin, p.originRows = now, next
		return p.after(n)
	}
	return 0
}

// after is how long rows take at the rate.
func (p *pacer) after(rows uint64) time.Duration {
	return time.Duration(float64(rows) / p.rate * float64(time.Second))
}
