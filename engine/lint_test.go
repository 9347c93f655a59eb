package engine

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

// The engine's determinism rules (doc.go, docs/DESIGN.md §3.1), checked on the
// source of every package under engine/. A map may be ranged over only
// where order cannot matter, marked by a comment line "//engine:orderless"
// directly above the loop.

var bannedImports = []string{
	"os", "os/exec", "os/signal", "net", "net/http", "sync", "sync/atomic",
	"math/rand", "math/rand/v2", "runtime", "syscall", "unsafe", "log",
}

var bannedImportPrefixes = []string{"net/", "github.com/aws/", "github.com/johannesboyne/"}

var bannedCalls = map[string][]string{
	"time": {"Now", "Sleep", "After", "AfterFunc", "Tick", "NewTimer", "NewTicker", "Since", "Until"},
	"fmt":  {"Print", "Printf", "Println"},
}

type violation struct {
	pos  token.Position
	rule string
}

func (v violation) String() string { return fmt.Sprintf("%s: %s", v.pos, v.rule) }

func TestEngineIsDeterministic(t *testing.T) {
	pkgs := loadPackages(t, "./...")
	var found []violation
	for _, p := range pkgs {
		found = append(found, lintPackage(p)...)
	}
	for _, v := range found {
		t.Errorf("%s", v)
	}
	if len(pkgs) < 2 {
		t.Fatalf("linted %d packages; the pattern no longer finds engine/...", len(pkgs))
	}
}

// TestLintCatchesViolations proves every rule fires: internal/testdata/lintbad has
// one violation of each (outside engine/, so that only this test sees it).
func TestLintCatchesViolations(t *testing.T) {
	pkgs := loadPackages(t, "../internal/testdata/lintbad")
	var rules []string
	for _, v := range lintPackage(pkgs[0]) {
		rules = append(rules, v.rule)
	}
	for _, want := range []string{
		`import "math/rand"`, `import "os"`, `import "sync"`,
		"call time.Now", "call time.Sleep", "go statement", "select statement",
		"channel type", "channel send", "channel receive", "range over map",
	} {
		if !slices.Contains(rules, want) {
			t.Errorf("rule %q did not fire; fired: %q", want, rules)
		}
	}
	if n := count(rules, "range over map"); n != 1 {
		t.Errorf("range over map fired %d times; the //engine:orderless loop must be exempt", n)
	}
}

func count(xs []string, x string) (n int) {
	for _, y := range xs {
		if y == x {
			n++
		}
	}
	return n
}

func loadPackages(t *testing.T, pattern string) []*packages.Package {
	t.Helper()
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}
	pkgs, err := packages.Load(cfg, pattern)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, e := range p.Errors {
			t.Fatalf("load %s: %v", p.PkgPath, e)
		}
	}
	return pkgs
}

func lintPackage(p *packages.Package) []violation {
	var out []violation
	for _, f := range p.Syntax {
		name := p.Fset.Position(f.Pos()).Filename
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		out = append(out, lintFile(p, f)...)
	}
	return out
}

func lintFile(p *packages.Package, f *ast.File) []violation {
	var out []violation
	report := func(n ast.Node, rule string) {
		out = append(out, violation{p.Fset.Position(n.Pos()), rule})
	}
	for _, imp := range f.Imports {
		path := strings.Trim(imp.Path.Value, `"`)
		if slices.Contains(bannedImports, path) || slices.ContainsFunc(bannedImportPrefixes, func(pre string) bool {
			return strings.HasPrefix(path, pre)
		}) {
			report(imp, fmt.Sprintf("import %q", path))
		}
	}
	orderless := orderlessLines(p.Fset, f)
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			report(n, "go statement")
		case *ast.SelectStmt:
			report(n, "select statement")
		case *ast.ChanType:
			report(n, "channel type")
		case *ast.SendStmt:
			report(n, "channel send")
		case *ast.UnaryExpr:
			if n.Op == token.ARROW {
				report(n, "channel receive")
			}
		case *ast.CallExpr:
			if rule := bannedCall(p.TypesInfo, n); rule != "" {
				report(n, rule)
			}
		case *ast.RangeStmt:
			if _, ok := p.TypesInfo.TypeOf(n.X).Underlying().(*types.Map); ok {
				if !orderless[p.Fset.Position(n.Pos()).Line-1] {
					report(n, "range over map")
				}
			}
		}
		return true
	})
	return out
}

func bannedCall(info *types.Info, call *ast.CallExpr) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil {
		return ""
	}
	if slices.Contains(bannedCalls[fn.Pkg().Path()], fn.Name()) {
		return fmt.Sprintf("call %s.%s", fn.Pkg().Path(), fn.Name())
	}
	return ""
}

// orderlessLines returns the lines holding an //engine:orderless comment.
func orderlessLines(fset *token.FileSet, f *ast.File) map[int]bool {
	lines := map[int]bool{}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, "//engine:orderless") {
				lines[fset.Position(c.Pos()).Line] = true
			}
		}
	}
	return lines
}
