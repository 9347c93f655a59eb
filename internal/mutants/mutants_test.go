package mutants

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// repoRoot is the repository root, from this package's directory.
const repoRoot = "../.."

// The data file parses, has at least the mutants the harness promises,
// and every mutant still applies to the tree: exactly one match of its
// original text. A refactor that makes a mutant STALE fails here, in
// `make test`, naming the mutant.
func TestMutantsApply(t *testing.T) {
	ms, err := Load("mutants.txt")
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) < 15 {
		t.Errorf("%d mutants, want at least 15", len(ms))
	}
	for _, m := range ms {
		src, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(m.File)))
		if err != nil {
			t.Errorf("mutant %s: %v", m.ID, err)
			continue
		}
		got, err := m.Apply(src)
		if err != nil {
			t.Error(err)
			continue
		}
		if strings.Count(string(got), "\n") != strings.Count(string(src), "\n") {
			t.Errorf("mutant %s changes the file's line count", m.ID)
		}
		if m.LineNo(src) == 0 {
			t.Errorf("mutant %s: no line", m.ID)
		}
	}
}

func TestParse(t *testing.T) {
	const good = `# comment
id: a-1
file: engine/x.go
rule: §2.2 No ACK of a maybe — because
orig: foo(a)
repl: "bar(a)"
seeds: 10
faults: all

id: b
file: engine/y.go
rule: §2.7 Fail closed on corruption — why
orig: "\tx := 1\n\ty := 2"
repl: "\tx := 1\n\ty := 3"
`
	ms, err := Parse("good", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 2 || ms[0].ID != "a-1" || ms[0].Repl != "bar(a)" || ms[0].Seeds != 10 || ms[0].Faults != "all" || ms[0].Line != 2 {
		t.Fatalf("first: %+v", ms)
	}
	if ms[1].Orig != "\tx := 1\n\ty := 2" || ms[1].Line != 10 {
		t.Fatalf("second: %+v", ms[1])
	}
	block := "id: a\nfile: f.go\nrule: §2.1 WAL-first — why\norig: x\nrepl: y\n"
	for _, tc := range []struct {
		name, text, want string
	}{
		{"empty", "# nothing\n", "no mutants"},
		{"unknown field", block + "colour: red\n", `unknown field "colour"`},
		{"no colon", block + "seeds 3\n", "want \"field: value\""},
		{"twice", block + "orig: z\n", "given twice"},
		{"missing repl", "id: a\nfile: f.go\nrule: §2.1 WAL-first — why\norig: x\n", "has no repl"},
		{"duplicate id", block + "\n" + block, "defined twice"},
		{"bad id", strings.Replace(block, "id: a", "id: A B", 1), "lower-case"},
		{"rule without section", strings.Replace(block, "§2.1 ", "", 1), "§2.N"},
		{"rule without why", strings.Replace(block, " — why", "", 1), "§2.N"},
		{"rule section 8", strings.Replace(block, "§2.1", "§2.8", 1), "§2.N"},
		{"same text", strings.Replace(block, "repl: y", "repl: x", 1), "repl equals orig"},
		{"two lines changed", strings.NewReplacer("orig: x", `orig: "a\nb"`, "repl: y", `repl: "c\nd"`).Replace(block), "changes 2 lines"},
		{"line counts differ", strings.Replace(block, "repl: y", `repl: "y\nz"`, 1), "orig has 1 lines, repl 2"},
		{"seeds too many", block + "seeds: 101\n", "want 1..100"},
		{"bad quote", strings.Replace(block, "repl: y", `repl: "y`, 1), "repl:"},
		{"escaping path", strings.Replace(block, "f.go", "../f.go", 1), "inside the repository"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("t", []byte(tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestApply(t *testing.T) {
	m := Mutant{ID: "m", File: "f.go", Orig: "a < b", Repl: "a <= b", Line: 3}
	got, err := m.Apply([]byte("x\nif a < b {\n"))
	if err != nil || string(got) != "x\nif a <= b {\n" {
		t.Fatalf("%q %v", got, err)
	}
	if n := m.LineNo([]byte("x\nif a < b {\n")); n != 2 {
		t.Fatalf("line %d, want 2", n)
	}
	for _, src := range []string{"nothing here", "a < b; a < b"} {
		_, err := m.Apply([]byte(src))
		if !errors.Is(err, ErrStale) || !strings.Contains(err.Error(), "mutant m") {
			t.Errorf("%q: got %v, want STALE naming the mutant", src, err)
		}
	}
	// The changed line of a multi-line orig is the one reported.
	ctx := Mutant{Orig: "p\nq", Repl: "p\nr"}
	if n := ctx.LineNo([]byte("o\np\nq\n")); n != 3 {
		t.Fatalf("line %d, want 3", n)
	}
}

func TestFirstFailure(t *testing.T) {
	out := "ok seed=1 plan=x\nFAIL seed=12 plan=swarm[crash=1e-4] steps=10\n  violation: unit 1/0/3 acked before any marker holding it landed\n  violation: more\n  reproduce: go run …\nFAIL seed=14 plan=y\n"
	seed, how, ok := firstFailure(out)
	if !ok || seed != 12 || how != "unit 1/0/3 acked before any marker holding it landed" {
		t.Fatalf("%d %q %v", seed, how, ok)
	}
	if _, _, ok := firstFailure("seeds 1..3: 3 passed, 0 failed\n"); ok {
		t.Fatal("a passing sweep has a failure")
	}
}

func TestSummary(t *testing.T) {
	rs := []Result{{Status: Killed}, {Status: KilledTimeout}, {Status: Survived}, {Status: Invalid}}
	got := Summary(rs)
	if !strings.HasPrefix(got, "kill rate: 2/4 (50%)") || !strings.Contains(got, "timeout 1") || !strings.Contains(got, "survived 1; invalid 1") {
		t.Fatal(got)
	}
}
