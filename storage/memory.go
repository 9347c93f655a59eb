package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/skipprd/skipprd/engine"
)

// ErrMemoryUnknown: the machine's memory figure could not be read or made
// no sense. The caller picks a conservative figure instead (SystemMemory
// does, with the fallback it was given); it never guesses a large one.
var ErrMemoryUnknown = errors.New("storage: memory size unknown")

// Limits of the memory probe.
const (
	// MemoryFallbackBytes is the conservative figure cmd/skipprd gives
	// SystemMemory for when the platform cannot say: the engine's own
	// hint when it has no Memory port, so an unreadable probe behaves
	// like no probe at all.
	MemoryFallbackBytes = 1 << 30
	// meminfoBytesMax bounds how much of /proc/meminfo is read. The file
	// is about 1.5 KiB with MemAvailable on its third line; a file that
	// goes on for 64 KiB without it is not meminfo.
	meminfoBytesMax = 64 << 10
	// meminfoLineBytesMax bounds one line; real lines are under 40 bytes.
	meminfoLineBytesMax = 256
	// memoryRefreshInterval: the engine may ask on every admission
	// decision, and it runs on the loop; re-reading procfs at most once a
	// second keeps that cheap while still following the machine.
	memoryRefreshInterval = time.Second
)

// SystemMemory is engine.Memory for the machine the process runs on: on
// Linux MemAvailable from /proc/meminfo (lowered to the headroom of a
// cgroup v2 memory.max when one applies, so a container is not sized by
// its host), on macOS total RAM (sysctl hw.memsize), elsewhere the
// fallback. A failed read never yields a guess: it yields the fallback the
// caller chose, and is logged once per change between failing and
// working. Safe for concurrent use.
type SystemMemory struct {
	fallbackBytes int64
	log           *slog.Logger
	read          func() (int64, error) // the platform probe; tests replace it
	now           func() time.Time

	mu      sync.Mutex
	value   int64     // last answer
	readAt  time.Time // zero: never read
	failing bool      // the last read failed (and that was logged)
}

var _ engine.Memory = (*SystemMemory)(nil)

// NewSystemMemory returns the machine's memory hint, answering
// fallbackBytes whenever the platform probe fails. logger nil:
// slog.Default().
//
// REQUIRES: fallbackBytes > 0.
func NewSystemMemory(fallbackBytes int64, logger *slog.Logger) *SystemMemory {
	if fallbackBytes <= 0 {
		panic(fmt.Sprintf("storage: NewSystemMemory(fallback=%d)", fallbackBytes))
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &SystemMemory{fallbackBytes: fallbackBytes, log: logger, read: ReadMemory, now: time.Now}
}

// AvailableBytes implements engine.Memory. It re-reads the platform at
// most once per memoryRefreshInterval.
func (m *SystemMemory) AvailableBytes() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	if !m.readAt.IsZero() && now.Sub(m.readAt) < memoryRefreshInterval {
		return m.value
	}
	m.readAt = now
	v, err := m.read()
	switch {
	case err != nil:
		if !m.failing {
			m.log.Warn("memory probe failed; sizing the memory pool from a conservative fallback",
				"err", err, "fallback_bytes", m.fallbackBytes)
		}
		m.failing, m.value = true, m.fallbackBytes
	default:
		if m.failing {
			m.log.Info("memory probe works again", "available_bytes", v)
		}
		m.failing, m.value = false, v
	}
	return m.value
}

// ParseMemAvailable returns MemAvailable, in bytes, from /proc/meminfo
// content. It reads at most meminfoBytesMax bytes and lines of at most
// meminfoLineBytesMax, and fails (ErrMemoryUnknown) when the line is
// missing, repeated, not in kB, or its number is malformed or overflows.
// Kernels before 3.14 have no MemAvailable; they fail too rather than be
// estimated.
func ParseMemAvailable(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(io.LimitReader(r, meminfoBytesMax))
	sc.Buffer(make([]byte, 0, meminfoLineBytesMax), meminfoLineBytesMax)
	found := false
	var bytesAvailable int64
	for line := 1; sc.Scan(); line++ {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(name) != "MemAvailable" {
			continue
		}
		if found {
			return 0, fmt.Errorf("%w: meminfo line %d: MemAvailable repeated", ErrMemoryUnknown, line)
		}
		v, err := parseKB(rest)
		if err != nil {
			return 0, fmt.Errorf("%w: meminfo line %d: MemAvailable: %v", ErrMemoryUnknown, line, err)
		}
		found, bytesAvailable = true, v
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%w: meminfo: %v", ErrMemoryUnknown, err)
	}
	if !found {
		return 0, fmt.Errorf("%w: meminfo has no MemAvailable line (in the first %d bytes)", ErrMemoryUnknown, meminfoBytesMax)
	}
	return bytesAvailable, nil
}

// parseKB parses "   12345 kB" into bytes.
func parseKB(field []byte) (int64, error) {
	parts := bytes.Fields(field)
	if len(parts) != 2 || string(parts[1]) != "kB" {
		return 0, fmt.Errorf("want \"<number> kB\", got %q", bytes.TrimSpace(field))
	}
	kb, err := strconv.ParseInt(string(parts[0]), 10, 64)
	if err != nil || kb < 0 {
		return 0, fmt.Errorf("bad number %q", parts[0])
	}
	if kb > math.MaxInt64/1024 {
		return 0, fmt.Errorf("%d kB overflows", kb)
	}
	return kb * 1024, nil
}
