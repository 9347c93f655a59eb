//go:build recordpath

package recordpath

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// module prefixes the functions of this module in a stack.
const module = "github.com/skipprd/skipprd/"

var spine struct {
	sync.Mutex
	funcs    map[string]string // function → file, relative to the module
	answered bool              // an answer came since Clear: record no more
}

// Spine records this module's functions on the caller's stack.
func Spine() { record(false) }

// Answer returns done, which when called first records the caller's
// stack, the last one until Clear: the submitter's answer ends the
// record's path.
func Answer[T any](done func(T)) func(T) {
	return func(v T) {
		record(true)
		done(v)
	}
}

func record(last bool) {
	pcs := make([]uintptr, 128)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	spine.Lock()
	defer spine.Unlock()
	if spine.answered {
		return
	}
	spine.answered = last
	if spine.funcs == nil {
		spine.funcs = map[string]string{}
	}
	for {
		f, more := frames.Next()
		if name, ok := strings.CutPrefix(f.Function, module); ok {
			spine.funcs[enclosing(name)] = relative(f.File, name)
		}
		if !more {
			return
		}
	}
}

// Clear forgets what was recorded.
func Clear() {
	spine.Lock()
	defer spine.Unlock()
	spine.funcs = nil
	spine.answered = false
}

// Write writes what was recorded to path, one "file function" a line,
// sorted.
func Write(path string) error {
	spine.Lock()
	defer spine.Unlock()
	lines := make([]string, 0, len(spine.funcs))
	for fn, file := range spine.funcs {
		lines = append(lines, fmt.Sprintf("%s %s\n", file, fn))
	}
	slices.Sort(lines)
	return os.WriteFile(path, []byte(strings.Join(lines, "")), 0o644)
}
