package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const sampleStat = "12345 (node (dyn) x) S 1 12345 12345 0 -1 4194560 51334 0 0 0 1234 567 0 0 20 0 11 0 8245 1178132480 27566 18446744073709551615 1 1 0 0 0 0 0 16781312 134235650 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n"

const sampleStatus = `Name:	node
Umask:	0022
State:	S (sleeping)
Tgid:	12345
VmPeak:	 1178132 kB
VmSize:	 1150520 kB
VmHWM:	  407712 kB
VmRSS:	  371596 kB
RssAnon:	  330000 kB
Threads:	11
`

func TestParseStatCPU(t *testing.T) {
	u, s, err := parseStatCPU([]byte(sampleStat))
	if err != nil || u != 1234 || s != 567 {
		t.Fatalf("got %d %d %v, want 1234 567", u, s, err)
	}
	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 abc 5 6"} {
		if _, _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q) succeeded", bad)
		}
	}
}

func TestParseStatusMem(t *testing.T) {
	rss, hwm, err := parseStatusMem([]byte(sampleStatus))
	if err != nil || rss != 371596*1024 || hwm != 407712*1024 {
		t.Fatalf("got %d %d %v", rss, hwm, err)
	}
	if _, _, err := parseStatusMem([]byte("Name:\tkthreadd\nState:\tS\n")); err == nil {
		t.Error("status without Vm lines accepted")
	}
	if _, _, err := parseStatusMem([]byte("VmRSS:\tx kB\nVmHWM:\t1 kB\n")); err == nil {
		t.Error("malformed VmRSS accepted")
	}
}

func TestReadProcFromFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "stat"), []byte(sampleStat), 0o644)
	os.WriteFile(filepath.Join(dir, "status"), []byte(sampleStatus), 0o644)
	s, err := readProcFrom(root, 42)
	if err != nil {
		t.Fatal(err)
	}
	if s.CPU != 18010*time.Millisecond || s.RSSBytes != 371596*1024 || s.HWMBytes != 407712*1024 {
		t.Errorf("got %+v", s)
	}
	if _, err := readProcFrom(root, 43); err == nil {
		t.Error("missing process accepted")
	}
}

func TestReadProcSelf(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSBytes <= 0 || s.HWMBytes < s.RSSBytes {
		t.Errorf("self: rss %d hwm %d", s.RSSBytes, s.HWMBytes)
	}
	if _, err := ReadProc(1 << 30); err == nil {
		t.Error("ReadProc of a nonexistent pid " + strconv.Itoa(1<<30) + " succeeded")
	}
}

func TestServerStats(t *testing.T) {
	s0 := ProcSample{CPU: 2 * time.Second}
	s1 := ProcSample{CPU: 7 * time.Second, RSSBytes: 100 << 20, HWMBytes: 120 << 20}
	ss := serverStats(9, s0, s1, 10*time.Second, 20000, 500000)
	if ss.CPUSec != 5 || ss.CPUMicrosPerOp != 250 || ss.CPUMicrosPerItem != 10 || ss.CPUCores != 0.5 {
		t.Errorf("got %+v", ss)
	}
	if ss.PeakRSSBytes != 120<<20 || ss.RSSBytes != 100<<20 || ss.CPUResolutionMsec != 10 {
		t.Errorf("got %+v", ss)
	}
}

// TestSumProcCPU: the sum covers the processes whose command line
// contains the text, never the calling process, whose own command line
// (--backend-procs TEXT) contains it too: the load tool counted its own
// CPU as the database's before that rule.
func TestSumProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/cmdline"); err != nil {
		t.Skip("no /proc")
	}
	const arg = "-c"
	mark := fmt.Sprintf("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 30 # %d", os.Getpid())
	child := exec.Command("sh", arg, mark)
	if err := child.Start(); err != nil {
		t.Skip("no sh: ", err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		cpu, n := SumProcCPU(mark)
		if n == 1 && cpu > 0 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("SumProcCPU = %v over %d processes, want the child's CPU", cpu, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	self := strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " ")
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
	}
	if cpu, n := SumProcCPU(self); n != 0 {
		t.Fatalf("SumProcCPU(this process's command line) = %v over %d processes, want none: the caller is not counted", cpu, n)
	}
	if _, n := SumProcCPU("no process has this \x01 in its command line"); n != 0 {
		t.Fatalf("matched %d processes", n)
	}
}
