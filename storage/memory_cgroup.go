package storage

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strconv"
)

// A container's memory limit is invisible in /proc/meminfo, which shows
// the host's: sized from MemAvailable alone, a daemon in a 2 GiB
// container on a 64 GiB host would admit far more than it may hold and
// be OOM-killed — the one outcome the memory pool exists to prevent
// (docs/DESIGN.md §10). So on Linux the hint is lowered to the headroom of the
// cgroup the process sees at the cgroup mount's root, which is where a
// container runtime mounts the container's own group:
//
//	v2: /sys/fs/cgroup/memory.max, memory.current, memory.stat (inactive_file)
//	v1: /sys/fs/cgroup/memory/memory.limit_in_bytes, memory.usage_in_bytes,
//	    memory.stat (total_inactive_file)
//
// headroom = limit − (usage − inactive file cache), the working set the
// kernel cannot simply drop (the measure kubelet evicts on). Limits set on
// a nested group (a systemd slice on a host without a container) are not
// followed; MemAvailable still bounds those. Everything here is
// best-effort: an unreadable or absent cgroup leaves MemAvailable alone.

// cgroupFileBytesMax bounds every cgroup file read (memory.stat is about
// 1.5 KiB; the others are one number).
const cgroupFileBytesMax = 16 << 10

// cgroupFiles names one cgroup version's files, relative to the root.
type cgroupFiles struct {
	limit, usage, stat string
	inactiveFileKey    string // memory.stat's key for reclaimable inactive file pages
}

var cgroupVersions = []cgroupFiles{
	{limit: "/sys/fs/cgroup/memory.max", usage: "/sys/fs/cgroup/memory.current",
		stat: "/sys/fs/cgroup/memory.stat", inactiveFileKey: "inactive_file"},
	{limit: "/sys/fs/cgroup/memory/memory.limit_in_bytes", usage: "/sys/fs/cgroup/memory/memory.usage_in_bytes",
		stat: "/sys/fs/cgroup/memory/memory.stat", inactiveFileKey: "total_inactive_file"},
}

// cgroupHeadroom computes a cgroup's headroom from its three files'
// contents. limited is false when the limit is "max" (v2) — v1's
// "unlimited" is a huge number, which the caller's min() absorbs.
func cgroupHeadroom(limit, usage, stat []byte, inactiveFileKey string) (headroom int64, limited bool, err error) {
	l := string(bytes.TrimSpace(limit))
	if l == "max" {
		return 0, false, nil
	}
	limitBytes, err := strconv.ParseInt(l, 10, 64)
	if err != nil || limitBytes < 0 {
		return 0, false, fmt.Errorf("cgroup memory limit %q", l)
	}
	usageBytes, err := strconv.ParseInt(string(bytes.TrimSpace(usage)), 10, 64)
	if err != nil || usageBytes < 0 {
		return 0, false, fmt.Errorf("cgroup memory usage %q", bytes.TrimSpace(usage))
	}
	inactive, err := statValue(bytes.NewReader(stat), inactiveFileKey)
	if err != nil {
		return 0, false, err
	}
	workingSet := max(usageBytes-inactive, 0)
	return max(limitBytes-workingSet, 0), true, nil
}

// statValue returns key's value in a memory.stat file ("key value" per
// line); a missing key counts as 0 (older kernels lack some keys).
func statValue(r io.Reader, key string) (int64, error) {
	sc := bufio.NewScanner(io.LimitReader(r, cgroupFileBytesMax))
	sc.Buffer(make([]byte, 0, meminfoLineBytesMax), meminfoLineBytesMax)
	for sc.Scan() {
		k, v, ok := bytes.Cut(sc.Bytes(), []byte(" "))
		if !ok || string(k) != key {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("cgroup memory.stat %s %q", key, v)
		}
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("cgroup memory.stat: %v", err)
	}
	return 0, nil
}
