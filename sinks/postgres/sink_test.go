package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/skipprd/skipprd/engine"
	"github.com/skipprd/skipprd/storage"
)

// runLoop starts a storage.Loop for t and stops it when t ends.
func runLoop(t *testing.T) *storage.Loop {
	t.Helper()
	loop := storage.NewLoop()
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = loop.Run(ctx) }()
	t.Cleanup(func() { cancel(); loop.Stop() })
	return loop
}

// A job with a column whose Arrow type has no Postgres mapping (an
// interval) is refused by Plan: the Sink's done gets ErrCannotApply
// naming the column, the refusal is counted, and the DB sees nothing.
func TestSinkRefusesUnmappableType(t *testing.T) {
	loop := runLoop(t)
	model := NewModel()
	sink := NewSink(model, storage.NewWorkers(loop, 1, testTimeout))
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "ok", Type: arrow.PrimitiveTypes.Int64},
		{Name: "span", Type: arrow.FixedWidthTypes.MonthInterval},
	}, nil)
	rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer rb.Release()
	rb.Field(0).(*array.Int64Builder).Append(1)
	rb.Field(1).(*array.MonthIntervalBuilder).Append(3)
	job := plainJob("j-interval", "refused", rb.NewRecordBatch())

	err, stop := storage.Call(loop, func(done func(error)) { sink.Apply(job, done) })
	if stop != nil {
		t.Fatalf("loop: %v", stop)
	}
	wantCannotApply(t, err, `"refused"`, `"span"`, "month_interval")
	if st := sink.Stats(); st.Refused != 1 || st.Applied != 0 || st.Failed != 0 {
		t.Fatalf("stats %+v, want one refusal", st)
	}
	if len(model.Tables()) != 0 || len(model.AppliedJobs()) != 0 {
		t.Fatalf("the model was written: tables %v, jobs %v", model.Tables(), model.AppliedJobs())
	}
}

// The Sink's settling: an ambiguous Apply whose job is found applied
// succeeds; one whose job is absent fails with an error that no longer
// wraps ErrAmbiguous; a definite failure is passed on unsettled.
func TestSinkSettlesAmbiguousByLookup(t *testing.T) {
	loop := runLoop(t)
	for _, c := range []struct {
		outcome            Outcome
		wantErr            bool
		landed, lost, fail int64
	}{
		{CommitAmbiguous, false, 1, 0, 0},
		{FailAmbiguous, true, 0, 1, 1},
		{Fail, true, 0, 0, 1},
	} {
		model := NewModel()
		model.Decide = func(*Tx) Outcome { return c.outcome }
		sink := NewSink(model, storage.NewWorkers(loop, 1, testTimeout))
		job := plainJob("j", "t", int64Batch(t, []string{"a"}, [][]*int64{{i64(1)}}))
		err, _ := storage.Call(loop, func(done func(error)) { sink.Apply(job, done) })
		st := sink.Stats()
		if (err != nil) != c.wantErr || errors.Is(err, ErrAmbiguous) || st.AmbiguousLanded != c.landed || st.AmbiguousLost != c.lost || st.Failed != c.fail {
			t.Errorf("outcome %d: err %v, stats %+v", c.outcome, err, st)
		}
	}
}

var _ engine.Sink = (*Sink)(nil)
