package postgrescdc

import (
	"strings"
	"testing"
	"time"
)

func validConfig() Config {
	return Config{URL: "postgres://u:secret@h:5432/db", Publication: "pub", Slot: "slot_1", SinkRef: "lake",
		Tables: []string{"public.items", "sales.orders"}}
}

func TestConfigCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string // "" valid; else a part of the error
	}{
		{"valid", func(*Config) {}, ""},
		{"defaults are consistent", func(c *Config) { c.Tables = nil }, ""},
		{"no URL", func(c *Config) { c.URL = "" }, "no URL"},
		{"slot with a capital", func(c *Config) { c.Slot = "Slot" }, "slot"},
		{"slot too long", func(c *Config) { c.Slot = strings.Repeat("s", 64) }, "slot"},
		{"publication with a dash", func(c *Config) { c.Publication = "my-pub" }, "publication"},
		{"no sink", func(c *Config) { c.SinkRef = "" }, "sink"},
		{"table without schema", func(c *Config) { c.Tables = []string{"items"} }, "schema.table"},
		{"table with a capital", func(c *Config) { c.Tables = []string{"public.Items"} }, "namespace"},
		{"schema with a dot", func(c *Config) { c.Tables = []string{"a.b.c"} }, "namespace"},
		{"two tables, one namespace", func(c *Config) { c.Tables = []string{"a.items", "b.items"} }, "both go to namespace"},
		{"chunk over the unit", func(c *Config) { c.UnitRows, c.ChunkRows = 100, 101 }, "chunk of 101 rows"},
		{"chunk bytes over the unit", func(c *Config) { c.UnitBytes, c.ChunkBytes = 1000, 1001 }, "chunk of 1001 bytes"},
		{"unit too large", func(c *Config) { c.UnitBytes = UnitBytesMax + 1 }, "units of"},
		{"buffer below a unit", func(c *Config) { c.BufferRows = 10 }, "buffer"},
		{"status too often", func(c *Config) { c.StatusInterval = time.Millisecond }, "status interval"},
		{"no concurrency", func(c *Config) { c.IngestConcurrency = -1 }, "concurrency"},
		{"message limit too small", func(c *Config) { c.MessageBytesMax = 10 }, "message limit"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := validConfig()
			c.edit(&cfg)
			_, err := New(cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("error %v; want one saying %q", err, c.want)
			case err != nil && strings.Contains(err.Error(), "secret"):
				t.Fatalf("error %q shows the password", err)
			}
		})
	}
}

// A URL that does not parse is refused without being quoted.
func TestCheckURL(t *testing.T) {
	if err := checkURL("postgres://u:secret@h:bad port/db"); err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("a URL that does not parse: %v", err)
	}
	if err := checkURL(""); err == nil {
		t.Fatal("an empty URL was accepted")
	}
	for _, u := range []string{"postgres://user:secret@host:5432/db", "host=h user=u password=secret"} {
		if err := checkURL(u); err != nil {
			t.Errorf("checkURL(%q): %v", u, err)
		}
	}
}
