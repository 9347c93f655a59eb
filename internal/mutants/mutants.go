package mutants

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// SeedsMax bounds one mutant's sweep: the harness is a bounded check, and
// 100 seeds × 1e5 steps is its budget per mutant.
const SeedsMax = 100

// Mutant is one one-line bug.
type Mutant struct {
	ID     string
	File   string // from the repository root, slash-separated
	Rule   string // the §2 rule it breaks, and why it is realistic
	Orig   string // exact text to replace; occurs exactly once in File
	Repl   string
	Faults string // simulate profile; "" means the default
	Seeds  int    // seeds to sweep; 0 means the default
	Line   int    // line of the data file where the block starts
}

// ruleRef is how a rule line starts: a README guarantee, §2.1 to §2.7.
var ruleRef = regexp.MustCompile(`^§2\.[1-7] `)

var idSyntax = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// ErrStale: a mutant's original text does not occur exactly once.
var ErrStale = errors.New("mutants: STALE")

// Load reads and parses a data file.
func Load(path string) ([]Mutant, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(path, b)
}

// Parse parses a data file (see the package comment). name is used in
// errors.
func Parse(name string, data []byte) ([]Mutant, error) {
	var out []Mutant
	var cur *Mutant
	var given map[string]bool
	seen := map[string]bool{}
	finish := func() error {
		if cur == nil {
			return nil
		}
		m := *cur
		cur = nil
		for _, f := range []string{"id", "file", "rule", "orig", "repl"} {
			if !given[f] {
				return fmt.Errorf("%s:%d: mutant %q has no %s", name, m.Line, m.ID, f)
			}
		}
		if err := m.validate(); err != nil {
			return fmt.Errorf("%s:%d: %w", name, m.Line, err)
		}
		if seen[m.ID] {
			return fmt.Errorf("%s:%d: mutant %q defined twice", name, m.Line, m.ID)
		}
		seen[m.ID] = true
		out = append(out, m)
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.TrimSpace(line) == "":
			if err := finish(); err != nil {
				return nil, err
			}
			continue
		case strings.HasPrefix(line, "#"):
			continue
		}
		if cur == nil {
			cur, given = &Mutant{Line: n}, map[string]bool{}
		}
		if err := cur.set(line, given); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := finish(); err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no mutants", name)
	}
	return out, nil
}

// set parses one "field: value" line into m.
// given records the fields seen so far in the block.
func (m *Mutant) set(line string, given map[string]bool) error {
	field, value, ok := strings.Cut(line, ": ")
	if !ok {
		field, value, ok = strings.TrimSuffix(line, ":"), "", strings.HasSuffix(line, ":") // "repl:" deletes
	}
	if !ok {
		return fmt.Errorf("want \"field: value\", got %q", line)
	}
	if given[field] {
		return fmt.Errorf("field %s given twice", field)
	}
	given[field] = true
	if field == "seeds" {
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > SeedsMax {
			return fmt.Errorf("seeds %q: want 1..%d", value, SeedsMax)
		}
		m.Seeds = n
		return nil
	}
	fields := map[string]*string{"id": &m.ID, "file": &m.File, "rule": &m.Rule, "faults": &m.Faults, "orig": &m.Orig, "repl": &m.Repl}
	dst, ok := fields[field]
	if !ok {
		return fmt.Errorf("unknown field %q", field)
	}
	if field == "orig" || field == "repl" {
		v, err := unquote(value)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		value = v
	}
	*dst = value
	return nil
}

func unquote(v string) (string, error) {
	if !strings.HasPrefix(v, `"`) {
		return v, nil
	}
	return strconv.Unquote(v)
}

func (m *Mutant) validate() error {
	switch {
	case !idSyntax.MatchString(m.ID):
		return fmt.Errorf("id %q: want lower-case letters, digits and dashes", m.ID)
	case m.File == "" || strings.HasPrefix(m.File, "/") || strings.Contains(m.File, ".."):
		return fmt.Errorf("mutant %s: file %q: want a path inside the repository", m.ID, m.File)
	case !ruleRef.MatchString(m.Rule) || !strings.Contains(m.Rule, " — "):
		return fmt.Errorf("mutant %s: rule %q: want \"§2.N <guarantee> — <why the slip is realistic>\"", m.ID, m.Rule)
	case m.Orig == "":
		return fmt.Errorf("mutant %s: no orig", m.ID)
	case m.Orig == m.Repl:
		return fmt.Errorf("mutant %s: repl equals orig", m.ID)
	}
	a, b := strings.Split(m.Orig, "\n"), strings.Split(m.Repl, "\n")
	if len(a) != len(b) {
		return fmt.Errorf("mutant %s: orig has %d lines, repl %d: a mutant changes one line", m.ID, len(a), len(b))
	}
	changed := 0
	for i := range a {
		if a[i] != b[i] {
			changed++
		}
	}
	if changed != 1 {
		return fmt.Errorf("mutant %s: changes %d lines, want one", m.ID, changed)
	}
	return nil
}

// Apply returns src with the mutant applied. If Orig does not occur
// exactly once the error wraps ErrStale and names the mutant.
func (m Mutant) Apply(src []byte) ([]byte, error) {
	if n := bytes.Count(src, []byte(m.Orig)); n != 1 {
		return nil, fmt.Errorf("%w: mutant %s: its original text occurs %d times in %s, want exactly once (defined at line %d): %q",
			ErrStale, m.ID, n, m.File, m.Line, m.Orig)
	}
	return bytes.Replace(src, []byte(m.Orig), []byte(m.Repl), 1), nil
}

// LineNo is the line of src where the mutant changes text (1-based), or 0
// if Orig does not occur.
func (m Mutant) LineNo(src []byte) int {
	i := bytes.Index(src, []byte(m.Orig))
	if i < 0 {
		return 0
	}
	a, b := strings.Split(m.Orig, "\n"), strings.Split(m.Repl, "\n")
	first := 0
	for first < len(a) && a[first] == b[first] {
		first++
	}
	return bytes.Count(src[:i], []byte("\n")) + 1 + first
}
