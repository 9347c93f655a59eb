package kafka

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitions take turns: with records queued in every partition and a
// unit of one partition's worth, each take begins after the partition
// the last one began with — not at the lowest, which would leave the
// others waiting while it has records.
func TestTakeGivesPartitionsTurns(t *testing.T) {
	b := newBuffer([]string{"events"}, 1<<20)
	var recs []*kgo.Record
	for p := range int32(4) {
		for o := range int64(10) {
			recs = append(recs, &kgo.Record{Topic: "events", Partition: p, Offset: o, Value: make([]byte, 10)})
		}
	}
	b.add(recs)
	var order []int32
	for range 5 {
		_, got, _ := b.take(100) // one partition's ten records, or some of each
		if len(got) == 0 {
			t.Fatal("took nothing")
		}
		order = append(order, got[0].Partition)
		if err := b.done([]tp{{"events", got[0].Partition}}, 0); err != nil {
			t.Fatal(err)
		}
		b.add([]*kgo.Record{{Topic: "events", Partition: got[0].Partition, Offset: 10, Value: make([]byte, 10)}})
	}
	want := []int32{0, 1, 2, 3, 0}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("takes began with partitions %v, want %v", order, want)
		}
	}
}
