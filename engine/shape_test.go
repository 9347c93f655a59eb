package engine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The engine's shape (STYLE.md): asynchronous steps are named methods of
// a state record, not closure pyramids; a long function states what it
// relies on. Checked on the source of every package under engine/; the
// assertion rules hold for the core — package engine and the disk log's
// core in engine/wal (coreFile).

const (
	// closureDepthMax: a callback inside a callback inside a callback, no
	// deeper. A longer sequence is a staged record (recovery, wal's open,
	// multipart, atomicWrite, partCopy).
	closureDepthMax = 3
	// longFunctionLines: a function longer than this asserts at least once
	// (package engine: its invariants are the engine's).
	longFunctionLines = 30
	// assertionsPerFunctionMin is the floor the engine package's density
	// of assertions may not fall below: raise it as checks are added.
	assertionsPerFunctionMin = 1.0
	// walLogAssertionsPerFunctionMin is the same floor for the disk log's
	// core (engine/wal's log*.go), whose checks report through
	// Hooks.Broken.
	walLogAssertionsPerFunctionMin = 1.0
)

func TestEngineShape(t *testing.T) {
	for _, p := range loadPackages(t, "./...") {
		s := shapeOf(p)
		for _, v := range s.violations {
			t.Errorf("%s", v)
		}
		floor, ok := densityFloors[p.PkgPath]
		if !ok {
			continue
		}
		density := float64(s.asserts) / float64(s.functions)
		t.Logf("%s: %d functions, %d assertions (%.2f per function), %d over %d lines",
			p.PkgPath, s.functions, s.asserts, density, s.long, longFunctionLines)
		if density < floor {
			t.Errorf("%s has %.3f assertions per function, below the floor %.2f", p.PkgPath, density, floor)
		}
	}
}

// densityFloors: the packages whose every function is held to the
// rules of the core (long functions assert, a density floor), and their
// floors. In engine/wal only the log core is (coreFile): its codec is
// held to its own rules (decoders never panic, every length bounded).
var densityFloors = map[string]float64{
	"github.com/skipprd/skipprd/engine":     assertionsPerFunctionMin,
	"github.com/skipprd/skipprd/engine/wal": walLogAssertionsPerFunctionMin,
}

// coreFile reports whether file of package path holds core code.
func coreFile(path, file string) bool {
	switch path {
	case "github.com/skipprd/skipprd/engine":
		return true
	case "github.com/skipprd/skipprd/engine/wal":
		return strings.HasPrefix(filepath.Base(file), "log")
	}
	return false
}

// TestNoPyramidsAnywhere holds every Go file of the repository, tests
// included, to closureDepthMax: the rule is the project's, not only the
// engine's. Parsed only (no type checking), so it costs about a second.
func TestNoPyramidsAnywhere(t *testing.T) {
	fset := token.NewFileSet()
	files := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n != ".." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		for _, decl := range f.Decls {
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Body != nil {
				if depth := closureDepth(fd.Body); depth > closureDepthMax {
					t.Errorf("%s: %s: closures nested %d deep, limit %d", fset.Position(fd.Pos()), fd.Name.Name, depth, closureDepthMax)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 300 {
		t.Fatalf("walked %d Go files; the repository has hundreds: the walk went wrong", files)
	}
}

// TestShapeCatchesViolations: each rule fires on internal/testdata/lintbad
// (treated as package engine), and only where it should.
func TestShapeCatchesViolations(t *testing.T) {
	pkgs := loadPackages(t, "../internal/testdata/lintbad")
	s := shapeOfAs(pkgs[0], func(string) bool { return true })
	var rules []string
	for _, v := range s.violations {
		rules = append(rules, v.rule)
	}
	want := []string{
		"long: 32 lines and no assertion",
		"pyramid: closures nested 4 deep, limit 3",
	}
	slices.Sort(rules)
	if !slices.Equal(rules, want) {
		t.Errorf("fired %q; want exactly %q", rules, want)
	}
}

type shape struct {
	functions, asserts, long int
	violations               []violation
}

func shapeOf(p *packages.Package) shape {
	return shapeOfAs(p, func(file string) bool { return coreFile(p.PkgPath, file) })
}

func shapeOfAs(p *packages.Package, core func(file string) bool) shape {
	var s shape
	for _, f := range p.Syntax {
		name := p.Fset.Position(f.Pos()).Filename
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				s.add(p.Fset, fd, core(name))
			}
		}
	}
	return s
}

func (s *shape) add(fset *token.FileSet, fd *ast.FuncDecl, core bool) {
	pos := fset.Position(fd.Pos())
	if d := closureDepth(fd.Body); d > closureDepthMax {
		s.violations = append(s.violations, violation{pos, fmt.Sprintf("%s: closures nested %d deep, limit %d", fd.Name.Name, d, closureDepthMax)})
	}
	if !core {
		return
	}
	n := assertions(fd.Body)
	lines := fset.Position(fd.End()).Line - pos.Line + 1
	s.functions++
	s.asserts += n
	if lines > longFunctionLines {
		s.long++
		if n == 0 {
			s.violations = append(s.violations, violation{pos, fmt.Sprintf("%s: %d lines and no assertion", fd.Name.Name, lines)})
		}
	}
}

// closureDepth is the deepest nesting of function literals in n.
func closureDepth(n ast.Node) int {
	deepest := 0
	ast.Inspect(n, func(m ast.Node) bool {
		if fl, ok := m.(*ast.FuncLit); ok {
			deepest = max(deepest, 1+closureDepth(fl.Body))
			return false
		}
		return true
	})
	return deepest
}

// assertions counts the calls in n that check an invariant: broken,
// invariantError, panic, and every call of a check* function — the
// invariant checks of assert.go, and also the few data checks that
// return an error (checkBodySize, checkOffsetKeys), which the count does
// not tell apart.
func assertions(n ast.Node) int {
	count := 0
	ast.Inspect(n, func(m ast.Node) bool {
		call, ok := m.(*ast.CallExpr)
		if !ok {
			return true
		}
		var name string
		switch f := call.Fun.(type) {
		case *ast.Ident:
			name = f.Name
		case *ast.SelectorExpr:
			name = f.Sel.Name
		}
		if name == "broken" || name == "Broken" || name == "invariantError" || name == "panic" || strings.HasPrefix(name, "check") {
			count++
		}
		return true
	})
	return count
}
