package segment

import "testing"

// ParseFloor enforces a floor's INVARIANT: a non-empty family without NUL
// that is not itself a floor, and a non-empty mark. Every unit's offsets
// pass through it (engine checkOffsetKeys).
func TestParseFloorRejects(t *testing.T) {
	if fam, mark, ok := ParseFloor(FloorKey("objects/s/", "m")); !ok || fam != "objects/s/" || mark != "m" {
		t.Fatalf("a well-formed floor: %q %q %v", fam, mark, ok)
	}
	for name, key := range map[string]string{
		"not a floor":    "objects/s/a",
		"no separator":   FloorPrefix + "objects/s/",
		"empty family":   FloorPrefix + "\x00m",
		"empty mark":     FloorPrefix + "objects/s/\x00",
		"nested floor":   FloorKey(FloorPrefix+"x", "m"),
		"nested, no NUL": FloorPrefix + FloorPrefix + "x",
	} {
		if fam, mark, ok := ParseFloor(key); ok {
			t.Errorf("%s: %q parsed as family %q, mark %q", name, key, fam, mark)
		}
	}
}
