package main

import (
	"bytes"
	"fmt"
	"html"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The page is one HTML file with its CSS and an inline SVG; no script,
// no external asset. Every mark carries a <title> (hover text). It is
// also well-formed XML (every element closed, text escaped), which is how
// the tests parse it without an HTML parser.
//
// A long run has far more ACKs, commits and store faults than pixels: a
// lane's marks of one kind are drawn one by one up to marksEachMax, and
// beyond that aggregated — one bar per column of columnPx pixels, its
// height the count in that column, its title the counts by kind. If the
// page is still larger than pageBytesMax, it is drawn again with columns
// twice as wide and half the individual marks, until it fits. The header
// says what was aggregated and at what resolution.
const (
	plotWidthPx   = 1400
	labelWidthPx  = 200
	laneHeightPx  = 28
	axisHeightPx  = 30
	marksEachMax  = 400
	pageBytesMax  = 5 << 20
	violationsMax = 20 // violations drawn (a failing run has few; the rest are counted)
)

// catStyle is how a category of mark looks: its CSS class, name in the
// legend, and its band inside a lane (fractions of the lane height).
var catStyle = [catCount]struct {
	class, name string
	top, bottom float64
}{
	catStart:     {"start", "process start", 0, 1},
	catCrash:     {"crash", "crash (kill; power loss or not)", 0, 1},
	catRestart:   {"restart", "graceful restart", 0, 1},
	catZombie:    {"zombie", "zombie: frozen, replaced", 0, 1},
	catResume:    {"resume", "zombie resumes", 0, 1},
	catKill:      {"kill", "process ends", 0.2, 0.8},
	catFault:     {"fault", "fault injected (kind in title)", 0, 0.3},
	catCommit:    {"commit", "commit marker lands", 0.3, 0.65},
	catReclaim:   {"reclaim", "segment reclaimed (marker deleted)", 0.65, 1},
	catAck:       {"ack", "ACK", 0.6, 1},
	catApply:     {"apply", "sink applies a job", 0.35, 1},
	catDiskCrash: {"diskcrash", "disk crash (power loss)", 0, 1},
	catCorrupt:   {"corrupt", "corrupted at rest", 0.3, 1},
	catViolation: {"violation", "oracle violation", 0, 1},
}

const timelineCSS = `body{font:13px/1.4 system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:18px;margin:0 0 8px}
table.sum td{padding:1px 10px 1px 0;vertical-align:top}
.fail{color:#b00;font-weight:bold}.okr{color:#070;font-weight:bold}
.viol{background:#fee;border:1px solid #d00;padding:6px 10px;margin:8px 0}
.agg{background:#ffd;border:1px solid #cc0;padding:4px 10px;margin:8px 0}
svg{display:block;margin-top:8px}
.lanebg{fill:#f6f6f6}.lanebg.alt{fill:#ececec}
.life{fill:#cfe3ff}.paused{fill:#e9c7ff}
.lab{font-size:12px;fill:#222}.tick{font-size:11px;fill:#555}.grid{stroke:#ccc;stroke-width:1}
.start{fill:#2a2}.crash{fill:#d00}.restart{fill:#06c}.zombie{fill:#90c}.resume{fill:#c6f}
.kill{fill:#555}.fault{fill:#f80}.commit{fill:#024}.reclaim{fill:#a60}
.ack{fill:#3a3}.apply{fill:#088}.diskcrash{fill:#d00}.corrupt{fill:#f0f}
.violation{fill:#f00;fill-opacity:0.35;stroke:#d00;stroke-width:2}
.legend span{display:inline-block;margin-right:14px}
.legend i{display:inline-block;width:10px;height:12px;margin-right:4px;vertical-align:middle}
.legend i.start{background:#2a2}.legend i.crash,.legend i.diskcrash{background:#d00}.legend i.restart{background:#06c}
.legend i.zombie{background:#90c}.legend i.resume{background:#c6f}.legend i.kill{background:#555}.legend i.fault{background:#f80}
.legend i.commit{background:#024}.legend i.reclaim{background:#a60}.legend i.ack{background:#3a3}.legend i.apply{background:#088}
.legend i.corrupt{background:#f0f}.legend i.violation{background:#f99;border:1px solid #d00}
`

// laneOf is one row of the drawing.
type laneRow struct {
	key, label string
	inc        *tlInc
}

// renderTimeline draws the run; the second result says whether (and
// how) it aggregated, for the command's message.
func renderTimeline(out outcome, tl *timeline) ([]byte, string) {
	lanes := timelineLanes(out, tl)
	end := max(out.res.SimTime, tl.now, time.Nanosecond)
	columnPx, each := 1, marksEachMax
	for {
		var b bytes.Buffer
		agg := renderPage(&b, out, tl, lanes, end, columnPx, each)
		if b.Len() <= pageBytesMax || columnPx >= plotWidthPx {
			note := ""
			if len(agg) > 0 {
				note = fmt.Sprintf("; aggregated the dense marks of %d lane kinds into columns of %dpx", len(agg), columnPx)
			}
			return b.Bytes(), note
		}
		columnPx, each = columnPx*2, each/2
	}
}

// timelineLanes lists the rows: every process (zombies included), the
// store, the disk if the world has one, each sink, and "sinks" if sink
// faults could not be put on one sink's lane.
func timelineLanes(out outcome, tl *timeline) []laneRow {
	var lanes []laneRow
	for _, inc := range tl.incs {
		label := fmt.Sprintf("engine #%d", inc.id)
		if inc.zombie {
			label += " (zombie)"
		}
		lanes = append(lanes, laneRow{key: incLane(inc.id), label: label, inc: inc})
	}
	lanes = append(lanes, laneRow{key: "store", label: "object store"})
	if tl.diskLane {
		lanes = append(lanes, laneRow{key: "disk", label: "disk"})
	}
	for _, s := range out.job.spec.Sinks {
		lanes = append(lanes, laneRow{key: "sink/" + s.Ref, label: "sink " + s.Ref + " (" + s.Kind + ")"})
	}
	if tl.sinkLane == "sinks" && slices.ContainsFunc(tl.marks, func(m tlMark) bool { return m.lane == "sinks" }) {
		lanes = append(lanes, laneRow{key: "sinks", label: "sink faults (any sink)"})
	}
	return lanes
}

func renderPage(b *bytes.Buffer, out outcome, tl *timeline, lanes []laneRow, end time.Duration, columnPx, each int) []string {
	r := out.res
	e := html.EscapeString
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/>")
	fmt.Fprintf(b, "<title>simulate seed %d</title><style>%s</style></head><body>\n", r.Seed, timelineCSS)
	fmt.Fprintf(b, "<h1>simulate — seed %d</h1>\n<table class=\"sum\">", r.Seed)
	status := `<span class="okr">ok</span>`
	switch {
	case r.Err() != nil:
		status = `<span class="fail">FAIL</span>`
	case r.Halted != "":
		status = `<span class="okr">ok (halted as it should)</span> ` + e(r.Halted)
	}
	rows := [][2]string{
		{"result", status},
		{"plan", e(r.Plan)},
		{"world", e(r.World)},
		{"steps", fmt.Sprintf("%d (iters %d) over %v of simulated time", r.Steps, out.job.iters, r.SimTime)},
		{"trace hash", fmt.Sprintf("%016x", r.Hash)},
		{"processes", fmt.Sprintf("%d; crashes %d (kill only %d), restarts %d, zombies %d", len(tl.incs), r.Crashes, r.KillsOnly, r.Restarts, r.Zombies)},
		{"faults", e(faultsText(r.Faults))},
		{"acks / segments / applied", fmt.Sprintf("%d / %d / %d", r.Acks, r.Segments, r.Applied)},
		{"reproduce", e(out.job.command(""))},
	}
	for _, row := range rows {
		fmt.Fprintf(b, "<tr><td>%s</td><td>%s</td></tr>", row[0], row[1])
	}
	b.WriteString("</table>\n")
	var viols []tlMark
	for _, m := range tl.marks {
		if m.cat == catViolation {
			viols = append(viols, m)
		}
	}
	for i, v := range viols {
		if i == violationsMax {
			fmt.Fprintf(b, "<div class=\"viol\">… and %d more violations</div>\n", len(viols)-i)
			break
		}
		fmt.Fprintf(b, "<div class=\"viol\" id=\"violation-%d\"><b>violation</b> at step %d, %v: %s</div>\n", i+1, v.step, v.at, e(v.detail))
	}
	b.WriteString("<div class=\"legend\">")
	for c := range catCount {
		fmt.Fprintf(b, "<span><i class=\"%s\"></i>%s</span>", catStyle[c].class, catStyle[c].name)
	}
	b.WriteString("<span><i style=\"background:#cfe3ff\"></i>process alive</span><span><i style=\"background:#e9c7ff\"></i>process frozen</span></div>\n")
	var svg bytes.Buffer
	agg := renderSVG(&svg, tl, lanes, end, columnPx, each, viols)
	if len(agg) > 0 {
		col := colTime(end, columnPx)
		fmt.Fprintf(b, "<div class=\"agg\">Dense marks aggregated (bars: count per %dpx column, %v of simulated time; hover for counts): %s. The page is kept under %d bytes.</div>\n",
			columnPx, col.Round(readable(col)), e(strings.Join(agg, ", ")), pageBytesMax)
	}
	b.Write(svg.Bytes())
	b.WriteString("\n</body></html>\n")
	return agg
}

// faultsText is the run's injected faults, or says there were none: a
// quiet run's row is not left blank.
func faultsText(injected string) string {
	if strings.Trim(injected, "{} ") == "" {
		return "none injected"
	}
	return injected
}

func colTime(end time.Duration, columnPx int) time.Duration {
	return end * time.Duration(columnPx) / plotWidthPx
}

// renderSVG draws the lanes and their marks; it returns the
// "lane: category" pairs it aggregated.
func renderSVG(b *bytes.Buffer, tl *timeline, lanes []laneRow, end time.Duration, columnPx, each int, viols []tlMark) []string {
	height := axisHeightPx + len(lanes)*laneHeightPx + 4
	width := labelWidthPx + plotWidthPx + 10
	fmt.Fprintf(b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, height, width, height)
	x := func(t time.Duration) float64 {
		return labelWidthPx + float64(plotWidthPx)*float64(t)/float64(end)
	}
	renderAxis(b, end, height, x)
	index := map[string]int{}
	for i, l := range lanes {
		index[l.key] = i
		y := axisHeightPx + i*laneHeightPx
		alt := ""
		if i%2 == 1 {
			alt = " alt"
		}
		fmt.Fprintf(b, "<g class=\"lane\" id=\"lane-%s\"><rect class=\"lanebg%s\" x=\"0\" y=\"%d\" width=\"%d\" height=\"%d\"/>", laneID(l.key), alt, y, width, laneHeightPx)
		fmt.Fprintf(b, "<text class=\"lab\" x=\"4\" y=\"%d\">%s</text>", y+laneHeightPx/2+4, html.EscapeString(l.label))
		if inc := l.inc; inc != nil {
			to := end
			if inc.ended {
				to = inc.end
			}
			fmt.Fprintf(b, "<rect class=\"life\" x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\"><title>engine #%d alive %v – %v</title></rect>",
				fx(x(inc.start)), y+4, fx(max(x(to)-x(inc.start), 1)), laneHeightPx-8, inc.id, inc.start, to)
			for _, p := range inc.pauses {
				pto := p.to
				if pto < 0 {
					pto = to
				}
				fmt.Fprintf(b, "<rect class=\"paused\" x=\"%s\" y=\"%d\" width=\"%s\" height=\"%d\"><title>engine #%d frozen %v – %v</title></rect>",
					fx(x(p.from)), y+4, fx(max(x(pto)-x(p.from), 1)), laneHeightPx-8, inc.id, p.from, pto)
			}
		}
		b.WriteString("</g>\n")
	}
	agg := renderMarks(b, tl, lanes, index, end, columnPx, each, x)
	for i, v := range viols {
		if i == violationsMax {
			break
		}
		fmt.Fprintf(b, "<rect class=\"violation\" id=\"violation-mark-%d\" x=\"%s\" y=\"%d\" width=\"6\" height=\"%d\"><title>VIOLATION at step %d, %v: %s</title></rect>\n",
			i+1, fx(x(v.at)-3), axisHeightPx, len(lanes)*laneHeightPx, v.step, v.at, html.EscapeString(v.detail))
	}
	b.WriteString("</svg>")
	return agg
}

func renderAxis(b *bytes.Buffer, end time.Duration, height int, x func(time.Duration) float64) {
	b.WriteString("<g class=\"axis\">")
	const ticks = 10
	for i := 0; i <= ticks; i++ {
		t := end * time.Duration(i) / ticks
		fmt.Fprintf(b, "<line class=\"grid\" x1=\"%s\" y1=\"%d\" x2=\"%s\" y2=\"%d\"/><text class=\"tick\" x=\"%s\" y=\"%d\">%v</text>",
			fx(x(t)), axisHeightPx-4, fx(x(t)), height, fx(x(t)+2), axisHeightPx-10, t.Round(readable(end/ticks)))
	}
	b.WriteString("</g>\n")
}

// readable is the precision a time on a scale of step is shown to: the
// largest power of ten at most a hundredth of the step, at least 1 ms.
func readable(step time.Duration) time.Duration {
	p := time.Millisecond
	for p*1000 <= step {
		p *= 10
	}
	return p
}

// renderMarks draws each lane's marks, category by category, one by one
// or aggregated per column.
func renderMarks(b *bytes.Buffer, tl *timeline, lanes []laneRow, index map[string]int, end time.Duration, columnPx, each int, x func(time.Duration) float64) []string {
	// groups[lane][cat] lists the marks' indices in tl.marks, in order.
	groups := make([][catCount][]int, len(lanes))
	for i, m := range tl.marks {
		li, ok := index[m.lane]
		if !ok || m.cat == catViolation {
			continue
		}
		groups[li][m.cat] = append(groups[li][m.cat], i)
	}
	var agg []string
	for li, l := range lanes {
		y := axisHeightPx + li*laneHeightPx
		for c := range catCount {
			ms := groups[li][c]
			if len(ms) == 0 {
				continue
			}
			st := catStyle[c]
			top := float64(y) + 2 + st.top*float64(laneHeightPx-4)
			h := (st.bottom - st.top) * float64(laneHeightPx-4)
			fmt.Fprintf(b, "<g class=\"%s\">", st.class)
			if len(ms) <= each {
				for _, i := range ms {
					m := tl.marks[i]
					fmt.Fprintf(b, "<rect class=\"mark %s\" x=\"%s\" y=\"%s\" width=\"2\" height=\"%s\"><title>%s</title></rect>",
						st.class, fx(x(m.at)-1), fx(top), fx(h), html.EscapeString(markTitle(m, l.label)))
				}
			} else {
				agg = append(agg, fmt.Sprintf("%s: %d %s", l.label, len(ms), st.name))
				renderColumns(b, tl, ms, c, l.label, end, columnPx, top, h)
			}
			b.WriteString("</g>\n")
		}
	}
	return agg
}

// renderColumns draws one bar per non-empty column, its height the
// column's count relative to the fullest column.
func renderColumns(b *bytes.Buffer, tl *timeline, ms []int, c tlCat, label string, end time.Duration, columnPx int, top, h float64) {
	cols := plotWidthPx / columnPx
	col := func(t time.Duration) int { return min(int(float64(t)/float64(end)*float64(cols)), cols-1) }
	counts := make([]int, cols)
	for _, i := range ms {
		counts[col(tl.marks[i].at)]++
	}
	fullest := slices.Max(counts)
	st := catStyle[c]
	for k := 0; k < len(ms); {
		cl := col(tl.marks[ms[k]].at)
		j := k
		kinds := map[string]int{}
		for j < len(ms) && col(tl.marks[ms[j]].at) == cl {
			kinds[tl.marks[ms[j]].kind]++
			j++
		}
		bh := max(h*float64(counts[cl])/float64(fullest), 1.5)
		first, last := tl.marks[ms[k]], tl.marks[ms[j-1]]
		title := fmt.Sprintf("%s — %d × %s, %v – %v (steps %d–%d)%s", label, counts[cl], st.name, first.at, last.at, first.step, last.step, kindCounts(kinds))
		fmt.Fprintf(b, "<rect class=\"bar %s\" data-n=\"%d\" x=\"%s\" y=\"%s\" width=\"%d\" height=\"%s\"><title>%s</title></rect>",
			st.class, counts[cl], fx(labelWidthPx+float64(cl*columnPx)), fx(top+h-bh), columnPx, fx(bh), html.EscapeString(title))
		k = j
	}
}

// kindCounts lists the kinds of an aggregated bar (sorted: the page must
// not depend on map order), or "" if none has a kind.
func kindCounts(kinds map[string]int) string {
	var names []string
	for k := range kinds {
		if k != "" {
			names = append(names, k)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	var parts []string
	for _, k := range names {
		parts = append(parts, k+"="+strconv.Itoa(kinds[k]))
	}
	return ": " + strings.Join(parts, " ")
}

func markTitle(m tlMark, lane string) string {
	s := fmt.Sprintf("%s — %s at %v, step %d", lane, catStyle[m.cat].name, m.at, m.step)
	if m.kind != "" {
		s += ": " + m.kind
	}
	if m.detail != "" {
		s += ": " + m.detail
	}
	return s
}

// laneID makes a lane key usable as an element id.
func laneID(key string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
			return r
		}
		return '-'
	}, key)
}

// fx formats a coordinate with one decimal: fixed, so the page is the
// same bytes for the same run.
func fx(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
