package kafka

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/skipprd/skipprd/sources"
)

// topicSet is the topics a run reads: the listed ones, or those whose
// name matches the regex, a set that grows as matching topics appear.
//
// INVARIANTS (checked in add): a topic is added once; without
// Config.Namespace, no two topics of the set go to one namespace, and
// each goes to a valid one.
type topicSet struct {
	re        *regexp.Regexp // nil: the listed topics
	listed    []string
	namespace func(topic string) string

	mu     sync.Mutex
	names  []string          // in the order they were added
	tables map[string]string // namespace → its topic, when each topic has its own
	shared bool              // every topic goes to Config.Namespace
}

func (s *Source) newTopicSet() *topicSet {
	ts := &topicSet{listed: s.cfg.Topics, namespace: s.cfg.namespaceOf, tables: map[string]string{}, shared: s.cfg.Namespace != ""}
	if s.cfg.TopicRegex != "" {
		ts.re, _ = CompileTopicRegex(s.cfg.TopicRegex) // Config.check compiled it
	}
	return ts
}

// all returns the topics of the set.
func (ts *topicSet) all() []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.names)
}

// lookup describes the topics the set may hold: the listed ones, or
// every topic of the cluster but its internal ones.
func (ts *topicSet) lookup(ctx context.Context, adm *kadm.Client) (kadm.TopicDetails, error) {
	if ts.re == nil {
		return adm.ListTopics(ctx, ts.listed...)
	}
	return adm.ListTopics(ctx)
}

// fresh returns the topics of details the set does not hold yet and
// should: the listed ones, or the ones whose name matches — never one
// of Kafka's internal topics (a leading "__"), nor, while the broker
// reports an error for it, one just created (the next look-up finds
// it). Sorted.
func (ts *topicSet) fresh(details kadm.TopicDetails) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []string
	if ts.re == nil {
		for _, t := range ts.listed {
			if !slices.Contains(ts.names, t) {
				out = append(out, t)
			}
		}
		return out
	}
	for t, d := range details {
		if d.IsInternal || strings.HasPrefix(t, "__") || !ts.re.MatchString(t) || d.Err != nil || slices.Contains(ts.names, t) {
			continue
		}
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// add adds topics to the set, checking each one's namespace: a topic
// that cannot be a namespace, or goes to one another topic of the set
// goes to, is an error naming them.
func (ts *topicSet) add(topics []string) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range topics {
		if slices.Contains(ts.names, t) {
			return invariantf("topic %q added to the set twice", t)
		}
		ns := ts.namespace(t)
		if err := sources.CheckNamespace(ns); err != nil {
			return fmt.Errorf("topic %q: %w (set namespace to choose one)", t, err)
		}
		if other, ok := ts.tables[ns]; ok && !ts.shared {
			return fmt.Errorf("topics %q and %q both go to namespace %q; give them a source each, or set namespace", other, t, ns)
		}
		ts.tables[ns] = t
		ts.names = append(ts.names, t)
	}
	return nil
}

// partitionsOf lists the partitions of topics in details; a topic
// missing from them, or one the broker reports an error for, is an
// error.
func partitionsOf(details kadm.TopicDetails, topics []string) ([]tp, error) {
	var out []tp
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok:
			return nil, fmt.Errorf("topic %q does not exist", t)
		case d.Err != nil:
			return nil, fmt.Errorf("topic %q: %w", t, d.Err)
		}
		for _, p := range d.Partitions.Numbers() {
			out = append(out, tp{t, p})
		}
	}
	return out, nil
}
