package faults

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Decision is one fault that fired: the N-th decision of its kind in the
// run (every point where the kind could have fired counts, whether it did
// or not) and the value drawn with it (an extra latency, an outcome, a
// pause, …; 0 when the kind has none).
type Decision struct {
	Kind  Kind
	N     uint64
	Param int64
}

// Schedule is the full list of faults a run injected, in (Kind, N) order.
// Replaying a schedule (NewReplay) fires exactly these decisions and no
// others, drawing nothing: with the same world and seed it reproduces the
// run, whatever the plan's rates, and removing entries from it (shrinking)
// removes exactly those faults.
type Schedule []Decision

func (s Schedule) sorted() Schedule {
	out := slices.Clone(s)
	slices.SortFunc(out, func(a, b Decision) int {
		if a.Kind != b.Kind {
			return int(a.Kind) - int(b.Kind)
		}
		switch {
		case a.N < b.N:
			return -1
		case a.N > b.N:
			return 1
		}
		return 0
	})
	return out
}

// String is the schedule's text form: "kind@n" or "kind@n=param" entries
// separated by spaces, in (kind, n) order; a run of consecutive
// decisions of one kind without parameters is "kind@first-last" (an
// outage window is hundreds of them).
func (s Schedule) String() string {
	var b strings.Builder
	sorted := s.sorted()
	for i := 0; i < len(sorted); i++ {
		d := sorted[i]
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(d.Kind.String())
		b.WriteByte('@')
		b.WriteString(strconv.FormatUint(d.N, 10))
		if d.Param != 0 {
			b.WriteByte('=')
			b.WriteString(strconv.FormatInt(d.Param, 10))
			continue
		}
		j := i
		for j+1 < len(sorted) && sorted[j+1].Kind == d.Kind && sorted[j+1].N == sorted[j].N+1 && sorted[j+1].Param == 0 {
			j++
		}
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(sorted[j].N, 10))
			i = j
		}
	}
	return b.String()
}

// Counts returns how many decisions of each kind the schedule holds.
func (s Schedule) Counts() [NumKinds]uint64 {
	var c [NumKinds]uint64
	for _, d := range s {
		c[d.Kind]++
	}
	return c
}

// ParseSchedule reads String's form (entries may span several lines).
// An unknown kind, a malformed entry or a repeated (kind, n) is an error
// naming the entry.
func ParseSchedule(text string) (Schedule, error) {
	var s Schedule
	for _, f := range strings.Fields(text) {
		ds, err := parseEntry(f)
		if err != nil {
			return nil, fmt.Errorf("faults: schedule entry %q: %w", f, err)
		}
		s = append(s, ds...)
	}
	s = s.sorted()
	for i := 1; i < len(s); i++ {
		if s[i].Kind == s[i-1].Kind && s[i].N == s[i-1].N {
			return nil, fmt.Errorf("faults: schedule: %s@%d appears twice", s[i].Kind, s[i].N)
		}
	}
	return s, nil
}

// rangeMax bounds the decisions one "kind@a-b" entry expands to.
const rangeMax = 1 << 20

func parseEntry(f string) ([]Decision, error) {
	name, rest, ok := strings.Cut(f, "@")
	if !ok {
		return nil, fmt.Errorf("want kind@n[=param] or kind@first-last")
	}
	k, ok := KindByName(name)
	if !ok {
		return nil, fmt.Errorf("unknown fault kind %q", name)
	}
	if first, last, isRange := strings.Cut(rest, "-"); isRange {
		a, err1 := strconv.ParseUint(first, 10, 64)
		b, err2 := strconv.ParseUint(last, 10, 64)
		if err1 != nil || err2 != nil || b < a || b-a >= rangeMax {
			return nil, fmt.Errorf("range %q: want first-last, first ≤ last, at most %d decisions", rest, rangeMax)
		}
		out := make([]Decision, 0, b-a+1)
		for n := a; n <= b; n++ {
			out = append(out, Decision{Kind: k, N: n})
		}
		return out, nil
	}
	nText, pText, hasParam := strings.Cut(rest, "=")
	n, err := strconv.ParseUint(nText, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("decision number: %w", err)
	}
	d := Decision{Kind: k, N: n}
	if hasParam {
		if d.Param, err = strconv.ParseInt(pText, 10, 64); err != nil {
			return nil, fmt.Errorf("param: %w", err)
		}
	}
	return []Decision{d}, nil
}

// strictJSON decodes b into v, refusing unknown fields and trailing data.
func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the JSON value")
	}
	return nil
}
