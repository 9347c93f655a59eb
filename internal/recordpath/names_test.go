package recordpath

import "testing"

func TestEnclosing(t *testing.T) {
	for in, want := range map[string]string{
		"engine.(*Engine).persist.func1.2":                           "engine.(*Engine).persist",
		"engine.(*Engine).putMarker.func3.(*Engine).fenceThenCommit": "engine.(*Engine).fenceThenCommit",
		"storage.callLoop[...].func1":                                "storage.callLoop",
		"engine/wal.(*Partition).kick":                               "engine/wal.(*Partition).kick",
		"storage.NewHost.func1":                                      "storage.NewHost",
	} {
		if got := enclosing(in); got != want {
			t.Errorf("enclosing(%q) = %q; want %q", in, got, want)
		}
	}
	if got := relative("/src/x/engine/wal/log.go", "engine/wal.(*Log).Append"); got != "engine/wal/log.go" {
		t.Errorf("relative = %q", got)
	}
}
