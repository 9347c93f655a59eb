package sim

import (
	"fmt"
	"strings"
	"time"
)

// BrokerSpec (SourceSpec.Broker) is what the broker behind a broker
// source does besides serving records (broker_log.go): retention that
// removes the oldest records, partitions added while the world runs,
// outages in which every fetch fails. nil: none of them, the worlds
// recorded before.
type BrokerSpec struct {
	// RetentionAge: retention removes the records first read this long
	// ago or longer; 0: no retention.
	RetentionAge time.Duration `json:"retention_age,omitempty"`
	// RetentionCheck is how often retention runs (mean; Kafka's
	// log.retention.check.interval).
	RetentionCheck time.Duration `json:"retention_check,omitempty"`
	// OnGapSkip: the source skips the records retention removed before
	// it read them, and reports each range (the Kafka source's on_gap
	// "skip"); false: it reports the first and stops (on_gap "stop", the
	// default).
	OnGapSkip bool `json:"on_gap_skip,omitempty"`
	// AddedPermille: the last len(AddedPermille) of the source's
	// Partitions are added to the topic when this many thousandths of
	// the fault phase's steps have run, one value each; the others exist
	// from the start.
	AddedPermille []int `json:"added_permille,omitempty"`
	// Metadata is how often the source looks the topic up for added
	// partitions (the Kafka source's Config.Metadata).
	Metadata time.Duration `json:"metadata,omitempty"`
	// Outages are intervals in which the broker answers no fetch, no
	// offset listing and no metadata request.
	Outages []BrokerOutage `json:"outages,omitempty"`
}

// BrokerOutage is one interval without a broker: from the step when
// StartPermille thousandths of the fault phase have run, for Length of
// simulated time (or until the fault phase ends).
type BrokerOutage struct {
	StartPermille int           `json:"start_permille"`
	Length        time.Duration `json:"length"`
}

// Shares of drawn worlds whose broker sources have each feature (each
// drawn on its own, swarm style).
const (
	brokerRetentionShare = 0.4
	brokerAddedShare     = 0.35
	brokerOutageShare    = 0.4
)

// drawBrokers draws, for each broker source of every pipeline, what its
// broker does: in some worlds retention (records first read 2 s to 90 s
// ago removed, checked every 100 ms to 5 s; half the sources skip what it
// removed), in some one to three partitions added during the fault
// phase (looked for every 200 ms to 30 s), in some one to four outages of
// 100 ms to 30 s. A healthy consumer reads records well within the
// retention age; a crash's recovery, the wait for replayed units and an
// outage together may not.
func drawBrokers(r *Rand, s *WorldSpec) {
	retention, added, outages := r.Chance(brokerRetentionShare), r.Chance(brokerAddedShare), r.Chance(brokerOutageShare)
	if !retention && !added && !outages {
		return
	}
	draw := func(src *SourceSpec) {
		if src.FetchMax == 0 || !src.Replayable || src.CDC || src.Prefix {
			return
		}
		b := &BrokerSpec{}
		if retention {
			b.RetentionAge = time.Duration(logUniform(r, float64(2*time.Second), float64(90*time.Second)))
			b.RetentionCheck = time.Duration(logUniform(r, float64(100*time.Millisecond), float64(5*time.Second)))
			b.OnGapSkip = r.Chance(0.5)
		}
		if added {
			n := 1 + r.Intn(3)
			b.Metadata = time.Duration(logUniform(r, float64(200*time.Millisecond), float64(30*time.Second)))
			for range n {
				b.AddedPermille = append(b.AddedPermille, 20+r.Intn(850))
			}
			src.Partitions += n
		}
		if outages {
			for range 1 + r.Intn(4) {
				b.Outages = append(b.Outages, BrokerOutage{StartPermille: r.Intn(950),
					Length: time.Duration(logUniform(r, float64(100*time.Millisecond), float64(30*time.Second)))})
			}
		}
		src.Broker = b
	}
	for i := range s.Sources {
		draw(&s.Sources[i])
	}
	for p := range s.Pipelines {
		for i := range s.Pipelines[p].Sources {
			draw(&s.Pipelines[p].Sources[i])
		}
	}
}

// summary is what a source's summary adds for its broker: "" for none.
func (b *BrokerSpec) summary() string {
	if b == nil {
		return ""
	}
	var out []string
	if b.RetentionAge > 0 {
		gap := "stop"
		if b.OnGapSkip {
			gap = "skip"
		}
		out = append(out, fmt.Sprintf("retention=%v/%v/%s", b.RetentionAge.Round(time.Millisecond), b.RetentionCheck.Round(time.Millisecond), gap))
	}
	if len(b.AddedPermille) > 0 {
		out = append(out, fmt.Sprintf("added=%v‰/%v", b.AddedPermille, b.Metadata.Round(time.Millisecond)))
	}
	for _, o := range b.Outages {
		out = append(out, fmt.Sprintf("outage=%d‰+%v", o.StartPermille, o.Length.Round(time.Millisecond)))
	}
	return " broker[" + strings.Join(out, " ") + "]"
}
