package soak

// Where the machine's CPU goes: every process on the machine, classed
// by what it is, so that a run that does not reach its load says what
// stopped it (the node, Redis, the pipelines, the harness itself, or
// something else running on the machine).

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuGroups are the classes, in the order the report shows them.
var cpuGroups = []string{"nodes", "redis", "pipelines", "bridges", "ngircd", "harness", "other"}

// cpuMeter keeps each process's CPU time at the last reading, so that
// the next reading charges each class only what its processes used in
// between (a process that started in between is charged all its time, a
// process that ended is not charged its last moments).
type cpuMeter struct {
	self      int
	bin       string // the node binary's name (SOAK_BIN may name it otherwise)
	last      map[int]float64
	lastBusy  float64
	lastTotal float64
	lastAt    time.Time
}

func newCPUMeter(bin string) *cpuMeter {
	return &cpuMeter{self: os.Getpid(), bin: filepath.Base(bin), last: map[int]float64{}}
}

// class names the class of pid from its command line.
func (m *cpuMeter) class(pid int, cmdline []string) string {
	if pid == m.self {
		return "harness"
	}
	if len(cmdline) == 0 {
		return "other"
	}
	base := filepath.Base(cmdline[0])
	switch {
	case strings.HasPrefix(base, "redis-"):
		return "redis"
	case base == "ngircd":
		return "ngircd"
	case base == "archivebot" || base == m.bin:
		for _, a := range cmdline[1:] {
			switch a {
			case "simulate-pipeline":
				return "pipelines"
			case "bridge":
				return "bridges"
			}
		}
		return "nodes"
	}
	return "other"
}

// read returns the cores each class used since the last reading (1 =
// one core busy the whole time), the machine's busy cores over the same
// time, and its number of cores; ok is false on the first reading.
func (m *cpuMeter) read() (by map[string]float64, busy, cores float64, ok bool) {
	now := time.Now()
	cur := map[int]float64{}
	used := map[string]float64{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		secs, ok := procCPU(pid)
		if !ok {
			continue
		}
		cur[pid] = secs
		prev, seen := m.last[pid]
		if !m.lastAt.IsZero() && (!seen || secs < prev) {
			prev = 0 // new since the last reading (or a reused pid)
		}
		if m.lastAt.IsZero() {
			continue
		}
		raw, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if len(raw) == 0 {
			args = nil
		}
		used[m.class(pid, args)] += secs - prev
	}
	b, t, n := machineCPU()
	wall := now.Sub(m.lastAt).Seconds()
	first := m.lastAt.IsZero()
	dBusy, dTotal := b-m.lastBusy, t-m.lastTotal
	m.last, m.lastBusy, m.lastTotal, m.lastAt = cur, b, t, now
	if first || wall <= 0 || dTotal <= 0 {
		return nil, 0, n, false
	}
	by = map[string]float64{}
	for _, g := range cpuGroups {
		by[g] = used[g] / wall
	}
	return by, dBusy / dTotal * n, n, true
}

// procCPU is a process's user+system CPU seconds.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b)[i+1:])
	if len(f) <= 13 {
		return 0, false
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100, true // USER_HZ
}

// machineCPU reads /proc/stat's first line: busy and total jiffies, and
// the number of cores.
func machineCPU() (busy, total, cores float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 1
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if f[0] == "cpu" && len(f) > 5 {
			for i, v := range f[1:] {
				x, _ := strconv.ParseFloat(v, 64)
				if i >= 8 { // guest time is counted in user already
					break
				}
				total += x
				if i != 3 && i != 4 { // idle, iowait
					busy += x
				}
			}
		} else if strings.HasPrefix(f[0], "cpu") {
			cores++
		}
	}
	if cores == 0 {
		cores = 1
	}
	return busy, total, cores
}
