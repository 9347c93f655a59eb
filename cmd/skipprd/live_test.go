package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/skipprd/skipprd/engine"
)

// Segments that leave the tape are shown as reclaimed in commit order,
// whatever order they went in, and only the newest liveReclaimedMax.
func TestLiveReclaimedInCommitOrder(t *testing.T) {
	v := &liveView{}
	tape := func(ids ...int) []engine.TapeSegment {
		out := make([]engine.TapeSegment, len(ids))
		for i, id := range ids {
			out[i].ID = fmt.Sprintf("%06d", id)
		}
		return out
	}
	v.reclaim(tape(1, 2, 3, 4))
	v.reclaim(tape(1, 3))    // 2 and 4 go
	got := v.reclaim(tape()) // then 1 and 3
	if want := []string{"000001", "000002", "000003", "000004"}; !slices.Equal(got, want) {
		t.Fatalf("reclaimed %v, want %v", got, want)
	}
	var many []int
	for i := range 2 * liveReclaimedMax {
		many = append(many, 100+i)
	}
	v.reclaim(tape(many...))
	got = v.reclaim(tape())
	if len(got) != liveReclaimedMax || got[len(got)-1] != fmt.Sprintf("%06d", 100+2*liveReclaimedMax-1) {
		t.Fatalf("kept %d: %v", len(got), got)
	}
}

// /api/live never has a null where the page expects a list or an object,
// in any state: an idle pipeline (nothing at all), segments without
// PARTs, no alerts, no namespaces — and busy ones. The answer also says
// what the host said: every live segment in order, the newest alerts.
func TestLiveNeverNull(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		in := liveInputs{uptime: time.Duration(rapid.Int64Range(0, 1e12).Draw(t, "uptime"))}
		n := rapid.IntRange(0, 6).Draw(t, "segments")
		for i := range n {
			seg := engine.TapeSegment{ID: fmt.Sprintf("000001-%06d", i+1), Kept: rapid.Bool().Draw(t, "kept")}
			for j := range rapid.IntRange(0, 4).Draw(t, "parts") {
				seg.Parts = append(seg.Parts, engine.TapePart{Namespace: fmt.Sprint("ns", j), Ordinal: j, Rows: 1, Bytes: 10})
			}
			in.tape = append(in.tape, seg)
		}
		for i := range rapid.IntRange(0, 2*liveAlertsMax).Draw(t, "alerts") {
			in.alerts = append(in.alerts, engine.Alert{Seq: uint64(i + 1), Kind: engine.AlertCannotApply, Err: errors.New("refused")})
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "namespaces") {
			in.stats.Namespaces = append(in.stats.Namespaces, engine.NamespaceStats{Namespace: fmt.Sprint("ns", i), RowsAcked: 1})
		}
		for i := range rapid.IntRange(0, 3).Draw(t, "waiting") {
			in.stats.OpenJobs = append(in.stats.OpenJobs, engine.OpenJob{SinkRef: "lake", Namespace: fmt.Sprint("ns", i), Bytes: 10, Segments: 1})
		}
		if rapid.Bool().Draw(t, "reclaimed") {
			in.reclaimed = []string{"000001-000000"}
		}
		b, err := json.Marshal(buildLive(in))
		if err != nil {
			t.Fatal(err)
		}
		if nulls, err := jsonNulls(b); err != nil || len(nulls) > 0 {
			t.Fatalf("/api/live has null at %v (%v): %s", nulls, err, b)
		}
		var got liveState
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Segments) != len(in.tape) || len(got.Alerts) != min(len(in.alerts), liveAlertsMax) ||
			len(got.Namespaces) != len(in.stats.Namespaces) || len(got.Reclaimed) != len(in.reclaimed) || len(got.Waiting) != len(in.stats.OpenJobs) {
			t.Fatalf("the answer dropped something: %s", b)
		}
		if k := len(got.Alerts); k > 0 && got.Alerts[k-1].Seq != uint64(len(in.alerts)) {
			t.Fatalf("the newest alert is #%d, want #%d", got.Alerts[k-1].Seq, len(in.alerts))
		}
	})
}

// jsonNulls is the oracle of TestLiveNeverNull: it must find every null,
// however deep — the zero liveState (what the handler answered on an
// idle pipeline, Go's nil slices) has five.
func TestJSONNullsFindsThem(t *testing.T) {
	b, _ := json.Marshal(liveState{})
	got, _ := jsonNulls(b)
	if want := []string{"$.alerts", "$.namespaces", "$.reclaimed", "$.segments", "$.waiting"}; !slices.Equal(got, want) {
		t.Fatalf("jsonNulls(zero liveState) = %v, want %v", got, want)
	}
	if got, _ := jsonNulls([]byte(`{"a":[1,{"b":null}],"c":[]}`)); !slices.Equal(got, []string{"$.a[1].b"}) {
		t.Fatalf("nested: %v", got)
	}
}

// jsonNulls lists the paths of b's null values, sorted.
func jsonNulls(b []byte) ([]string, error) {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("not JSON: %w: %.200s", err, b)
	}
	var out []string
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case nil:
			out = append(out, path)
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s[%d]", path, i), e)
			}
		case map[string]any:
			for k, e := range x {
				walk(path+"."+k, e)
			}
		}
	}
	walk("$", v)
	slices.Sort(out)
	return out, nil
}
