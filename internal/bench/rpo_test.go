package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRPOCompare(t *testing.T) {
	kill := time.Date(2026, 12, 5, 12, 0, 10, 0, time.UTC)
	at := func(before time.Duration) time.Time { return kill.Add(-before) }
	// Writer 0: writes 0-2 acknowledged 5 s, 1.5 s and 0.5 s before the
	// kill, write 3 in flight. Writer 1: write 0 acknowledged 4 s before.
	writers := []*rpoWriter{
		{sent: 4, acked: []time.Time{at(5 * time.Second), at(1500 * time.Millisecond), at(500 * time.Millisecond), {}}},
		{sent: 1, acked: []time.Time{at(4 * time.Second)}},
	}
	point := at(time.Second)
	bound := 3 * time.Second

	// Everything older than the restored instant restored, the last
	// acknowledged write lost, the in-flight write restored: no violation.
	r := RPORun{Killed: kill}
	r.compare(writers, map[string]bool{rpoKey(0, 0): true, rpoKey(0, 1): true, rpoKey(0, 3): true, rpoKey(1, 0): true}, point, bound)
	if r.Missing != 1 || r.LostWindowMS != 500 || r.InFlightKept != 1 || r.Phantoms != 0 || r.MissingBefore != 0 || len(r.Violations) != 0 {
		t.Fatalf("clean run: %+v", r)
	}

	// A write acknowledged 4 s before the kill missing, one never
	// written restored, one acknowledged before the restored instant
	// missing: three violations.
	r = RPORun{Killed: kill}
	r.compare(writers, map[string]bool{rpoKey(0, 0): true, rpoKey(0, 2): true, rpoKey(0, 4): true}, point, bound)
	if r.Missing != 2 || r.LostWindowMS != 4000 || r.Phantoms != 1 || r.MissingBefore != 2 || len(r.Violations) != 3 {
		t.Fatalf("violating run: %+v", r)
	}
	for _, want := range []string{"older than 3s", "before the restored instant", "never written (e.g. w0-000000004)"} {
		if !strings.Contains(strings.Join(r.Violations, "\n"), want) {
			t.Errorf("violations %q lack %q", r.Violations, want)
		}
	}
}

func TestRPOSummary(t *testing.T) {
	rep := &RPOReport{ShipIntervalMS: 1000, Writers: 4, CPUs: 2}
	for i := 1; i <= 20; i++ {
		rep.Runs = append(rep.Runs, RPORun{Run: i, Missing: i * 10, LostWindowMS: float64(i * 50), RestorePointLag: float64(i * 40)})
	}
	var b bytes.Buffer
	WriteRPOSummary(&b, rep)
	got := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"ship interval 1s, 20 runs", "missing acknowledged writes 100 200 200", "lost window (ms) 500 1000 1000"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}
