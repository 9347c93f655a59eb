package sqlcatalog

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	icegoio "github.com/apache/iceberg-go/io"
)

// iceberg-go's IO for local files is this package's durable one, and it
// writes files (creating folders) that read back whole.
func TestLocalIOIsDurable(t *testing.T) {
	dir := t.TempDir()
	for _, loc := range []string{"file://" + dir + "/a/b/f.json", dir + "/c/g.json"} {
		fsys, err := icegoio.LoadFS(context.Background(), nil, loc)
		if err != nil {
			t.Fatal(err)
		}
		wfs, ok := fsys.(durableFS)
		if !ok {
			t.Fatalf("the IO of %s is %T, not durableFS", loc, fsys)
		}
		if err := wfs.WriteFile(loc, []byte("{}")); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"a/b/f.json", "c/g.json"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != "{}" {
			t.Fatalf("%s: %q %v", p, b, err)
		}
	}
	if _, err := osPath("file://elsewhere/x"); err == nil {
		t.Fatal("a file URI naming another host")
	}
}
