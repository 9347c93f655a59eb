package engine

import "testing"

// Every mark has a distinct name, and names round-trip.
func TestMarkNames(t *testing.T) {
	seen := map[string]Mark{}
	for m := range NumMarks {
		name := m.String()
		if name == "" || name == "mark?" {
			t.Fatalf("mark %d has no name", m)
		}
		if prev, dup := seen[name]; dup {
			t.Fatalf("marks %d and %d are both %q", prev, m, name)
		}
		seen[name] = m
		if back, ok := MarkByName(name); !ok || back != m {
			t.Fatalf("MarkByName(%q) = %d, %v", name, back, ok)
		}
	}
}
