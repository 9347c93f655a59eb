package sources

import (
	"fmt"
	"regexp"
)

// NamespaceMax is the longest namespace name.
const NamespaceMax = 63

// namespacePattern: a lower-case letter, then lower-case letters, digits
// and underscores. A namespace names a table in every sink (a folder in
// the Parquet sinks, a table in Postgres) and part of object keys, so no
// character that could escape a prefix or need quoting is allowed.
var namespacePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckNamespace returns an error naming what is wrong with ns, or nil.
func CheckNamespace(ns string) error {
	switch {
	case ns == "":
		return fmt.Errorf("namespace is empty")
	case len(ns) > NamespaceMax:
		return fmt.Errorf("namespace %.20q… is %d bytes long; at most %d", ns, len(ns), NamespaceMax)
	case !namespacePattern.MatchString(ns):
		return fmt.Errorf("namespace %q: only a lower-case letter followed by lower-case letters, digits and underscores", ns)
	}
	return nil
}
