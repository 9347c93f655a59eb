package golden

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Check compares each of names' bytes in files with dir/name, in order;
// with update it writes them instead. A missing file or a difference is
// an error naming the file.
func Check(t *testing.T, dir string, files map[string][]byte, names []string, update bool) {
	t.Helper()
	for _, name := range names {
		path := filepath.Join(dir, name)
		if update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, files[name], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create)", err)
		}
		if !bytes.Equal(files[name], want) {
			t.Errorf("%s: encoding changed (%d bytes, golden %d); if deliberate, run -update and review the diff",
				name, len(files[name]), len(want))
		}
	}
}
