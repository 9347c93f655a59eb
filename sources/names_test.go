package sources

import (
	"strings"
	"testing"
)

func TestCheckNamespace(t *testing.T) {
	for _, ok := range []string{"a", "events", "web_hooks_2", strings.Repeat("a", NamespaceMax)} {
		if err := CheckNamespace(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "Events", "1st", "_x", "a-b", "a.b", "a/b", "../x", "a b", "é", strings.Repeat("a", NamespaceMax+1)} {
		if err := CheckNamespace(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
