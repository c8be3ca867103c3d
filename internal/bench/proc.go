package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat. The
// kernel exports it as 100 on every Linux architecture Go supports
// (sysconf(_SC_CLK_TCK) is a constant there), so the resolution of a CPU
// figure is 10 ms over the whole measured window.
const clockTicks = 100

// ProcSample is one reading of a process's CPU and memory counters.
type ProcSample struct {
	At       time.Time
	CPU      time.Duration // utime + stime
	RSSBytes int64         // VmRSS
	HWMBytes int64         // VmHWM: peak resident set size
}

// ReadProc reads /proc/PID/stat and /proc/PID/status.
func ReadProc(pid int) (ProcSample, error) {
	return readProcFrom("/proc", pid)
}

func readProcFrom(root string, pid int) (ProcSample, error) {
	s := ProcSample{At: time.Now()}
	stat, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", root, pid))
	if err != nil {
		return s, fmt.Errorf("server process %d: %w", pid, err)
	}
	utime, stime, err := parseStatCPU(stat)
	if err != nil {
		return s, fmt.Errorf("server process %d: %w", pid, err)
	}
	s.CPU = ticksToDuration(utime + stime)
	status, err := os.ReadFile(fmt.Sprintf("%s/%d/status", root, pid))
	if err != nil {
		return s, fmt.Errorf("server process %d: %w", pid, err)
	}
	s.RSSBytes, s.HWMBytes, err = parseStatusMem(status)
	if err != nil {
		return s, fmt.Errorf("server process %d: %w", pid, err)
	}
	return s, nil
}

// SumProcCPU sums utime+stime of the processes whose /proc/PID/cmdline
// (arguments joined by spaces) contains match, and counts them. The
// calling process is never counted: its own command line carries match
// (--backend-procs), and counting it would add the load tool's CPU to the
// database's.
func SumProcCPU(match string) (time.Duration, int) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, 0
	}
	self := os.Getpid()
	var sum uint64
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !strings.Contains(strings.ReplaceAll(string(cmd), "\x00", " "), match) {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		if u, s, err := parseStatCPU(stat); err == nil {
			sum += u + s
			n++
		}
	}
	return ticksToDuration(sum), n
}

func ticksToDuration(t uint64) time.Duration {
	return time.Duration(t) * (time.Second / clockTicks)
}

// parseStatCPU returns utime and stime (fields 14 and 15, in clock ticks)
// from the contents of /proc/PID/stat. The second field, the command name in
// parentheses, may itself hold spaces and parentheses, so fields are counted
// from the last ')'.
func parseStatCPU(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed stat: no ')'")
	}
	// After ") " come field 3 (state) onwards; utime is field 14, i.e. index 11.
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("malformed stat: %d fields after command", len(f))
	}
	if utime, err = strconv.ParseUint(f[11], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("malformed stat utime %q", f[11])
	}
	if stime, err = strconv.ParseUint(f[12], 10, 64); err != nil {
		return 0, 0, fmt.Errorf("malformed stat stime %q", f[12])
	}
	return utime, stime, nil
}

// parseStatusMem returns VmRSS and VmHWM in bytes from the contents of
// /proc/PID/status (where they are given in kB).
func parseStatusMem(b []byte) (rss, hwm int64, err error) {
	var haveRSS, haveHWM bool
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "VmRSS" && key != "VmHWM") {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			return 0, 0, fmt.Errorf("malformed status line %q", line)
		}
		n, perr := strconv.ParseInt(f[0], 10, 64)
		if perr != nil {
			return 0, 0, fmt.Errorf("malformed status line %q", line)
		}
		mult := int64(1)
		if len(f) > 1 {
			switch strings.ToLower(f[1]) {
			case "kb":
				mult = 1024
			case "mb":
				mult = 1024 * 1024
			}
		}
		if key == "VmRSS" {
			rss, haveRSS = n*mult, true
		} else {
			hwm, haveHWM = n*mult, true
		}
	}
	if !haveRSS || !haveHWM {
		// Kernel threads and zombies have no Vm* lines.
		return 0, 0, fmt.Errorf("status has no VmRSS/VmHWM (zombie or kernel thread?)")
	}
	return rss, hwm, nil
}
