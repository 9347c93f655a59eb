package recordpath

import (
	"path/filepath"
	"regexp"
	"strings"
)

var methodValue = regexp.MustCompile(`^([^.]+\.)\S*\.func[0-9]+(?:\.[0-9]+)*\.(\(\*?\w+\)\.\w+)$`)

// enclosing names the declared function a closure belongs to:
// "engine.(*Engine).persist.func1.2" → "engine.(*Engine).persist",
// generic instantiations without their type arguments.
func enclosing(name string) string {
	name = strings.ReplaceAll(name, "[...]", "")
	// A method value made inside a closure ("….persist.func3.(*Engine).commit")
	// is the method itself.
	if m := methodValue.FindStringSubmatch(name); m != nil {
		return m[1] + m[2]
	}
	parts := strings.Split(name, ".")
	for len(parts) > 1 {
		last := parts[len(parts)-1]
		if !strings.HasPrefix(last, "func") && strings.TrimLeft(last, "0123456789") != "" {
			break
		}
		parts = parts[:len(parts)-1]
	}
	return strings.Join(parts, ".")
}

// relative is file's path inside the module: its package's directory
// (from the function's name) and its base name.
func relative(file, name string) string {
	pkg := name[:strings.Index(name, ".")]
	return filepath.Join(pkg, filepath.Base(file))
}
