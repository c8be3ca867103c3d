package plan

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

func mustCompile(t *testing.T, s Spec) *Plan {
	t.Helper()
	p, err := Compile(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestCompileErrors(t *testing.T) {
	ok := Spec{Name: "nightly", Tables: []string{"orders"}, Cron: "0 3 * * *", KeepLast: 7}
	for _, tc := range []struct {
		mod  func(*Spec)
		want string
	}{
		{func(s *Spec) { s.Name = "" }, "name"},
		{func(s *Spec) { s.Name = "has space" }, "name"},
		{func(s *Spec) { s.Tables = nil }, "tables"},
		{func(s *Spec) { s.Tables = []string{"["} }, "tables"},
		{func(s *Spec) { s.Cron = "" }, "cron or every"},
		{func(s *Spec) { s.Every = time.Hour }, "cron and every"},
		{func(s *Spec) { s.Cron = "61 3 * * *" }, "cron"},
		{func(s *Spec) { s.Cron = "0 3 * *" }, "cron"},
		{func(s *Spec) { s.Cron = "CRON_TZ=Europe/Paris 0 3 * * *" }, "cron"},
		{func(s *Spec) { s.Cron = "@every 1h" }, "cron"},
		{func(s *Spec) { s.TimeZone = "Mars/Olympus" }, "timezone"},
		{func(s *Spec) { s.Cron, s.Every = "", 30*time.Second }, "every"},
		{func(s *Spec) { s.Cron, s.Every, s.TimeZone = "", time.Hour, "UTC" }, "timezone"},
		{func(s *Spec) { s.KeepLast = 0 }, "keep_last or max_age"},
		{func(s *Spec) { s.KeepLast = -1 }, "keep_last"},
		{func(s *Spec) { s.Window = -time.Second }, "window"},
	} {
		s := ok
		tc.mod(&s)
		_, err := Compile(s)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("Compile(%+v) = %v, want an error about %s", s, err, tc.want)
		}
	}
	if _, err := Compile(ok); err != nil {
		t.Fatal(err)
	}
}

func TestNextCronInAZone(t *testing.T) {
	// 03:00 in Paris is 01:00 UTC in winter and 02:00 UTC in summer; the
	// days of the spring (29 March 2026) and autumn (25 October 2026)
	// changes keep one run each.
	p := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Cron: "0 3 * * *", TimeZone: "Europe/Paris", KeepLast: 1})
	for _, tc := range []struct{ after, want string }{
		{"2026-01-10T12:00:00Z", "2026-01-11T02:00:00Z"},
		{"2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"},
		{"2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"},
		{"2026-07-01T00:00:00Z", "2026-07-01T01:00:00Z"},
		{"2026-10-24T12:00:00Z", "2026-10-25T02:00:00Z"},
		{"2026-10-25T02:00:00Z", "2026-10-26T02:00:00Z"},
	} {
		if got := p.Next(at(tc.after)); !got.Equal(at(tc.want)) {
			t.Errorf("Next(%s) = %s, want %s", tc.after, got.Format(time.RFC3339), tc.want)
		}
	}
	// 02:30 does not exist in Paris on the spring change: that day's run
	// is skipped, not run twice nor at a wrong hour; on the autumn change
	// 02:30 exists twice and runs once.
	q := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Cron: "30 2 * * *", TimeZone: "Europe/Paris", KeepLast: 1})
	var runs []string
	for s := q.Next(at("2026-03-28T00:00:00Z")); s.Before(at("2026-03-31T00:00:00Z")); s = q.Next(s) {
		runs = append(runs, s.Format(time.RFC3339))
	}
	if fmt.Sprint(runs) != "[2026-03-28T01:30:00Z 2026-03-30T00:30:00Z]" {
		t.Errorf("runs around the spring change: %v", runs)
	}
	runs = nil
	for s := q.Next(at("2026-10-24T00:00:00Z")); s.Before(at("2026-10-27T00:00:00Z")); s = q.Next(s) {
		runs = append(runs, s.Format(time.RFC3339))
	}
	if len(runs) != 3 {
		t.Errorf("runs around the autumn change: %v", runs)
	}
}

func TestNextEvery(t *testing.T) {
	p := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Every: 6 * time.Hour, KeepLast: 1})
	if got := p.Next(at("2026-12-05T07:15:00Z")); !got.Equal(at("2026-12-05T12:00:00Z")) {
		t.Errorf("Next = %s", got)
	}
	if got := p.Next(at("2026-12-05T12:00:00Z")); !got.Equal(at("2026-12-05T18:00:00Z")) {
		t.Errorf("Next from a slot = %s", got)
	}
}

func TestDueCoalescesMissedRuns(t *testing.T) {
	p := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Cron: "0 * * * *", KeepLast: 1})
	since := at("2026-12-01T10:30:00Z")
	// Before the first slot after since: nothing is due.
	if _, ok := p.Due(at("2026-12-01T10:59:00Z"), since); ok {
		t.Errorf("due before the first slot")
	}
	// Three days down: one run, for the latest slot.
	slot, ok := p.Due(at("2026-12-04T09:20:00Z"), since)
	if !ok || !slot.Equal(at("2026-12-04T09:00:00Z")) {
		t.Errorf("Due = %s, %v", slot, ok)
	}
	// Exactly at a slot.
	if slot, ok := p.Due(at("2026-12-04T10:00:00Z"), since); !ok || !slot.Equal(at("2026-12-04T10:00:00Z")) {
		t.Errorf("Due at a slot = %s, %v", slot, ok)
	}
	// A weekly plan down for two months: its latest slot.
	w := mustCompile(t, Spec{Name: "w", Tables: []string{"*"}, Cron: "0 4 * * 0", KeepLast: 1})
	if slot, ok := w.Due(at("2026-12-05T09:00:00Z"), at("2026-10-01T00:00:00Z")); !ok || !slot.Equal(at("2026-11-29T04:00:00Z")) {
		t.Errorf("weekly Due = %s, %v", slot, ok)
	}
	// With a window, a slot missed by more is skipped.
	p.Window = 15 * time.Minute
	if _, ok := p.Due(at("2026-12-04T09:20:00Z"), since); ok {
		t.Errorf("due past the window")
	}
	if _, ok := p.Due(at("2026-12-04T09:10:00Z"), since); !ok {
		t.Errorf("not due within the window")
	}
}

func TestCoversAndNames(t *testing.T) {
	p := mustCompile(t, Spec{Name: "nightly", Tables: []string{"orders", "user-*"}, Every: time.Hour, KeepLast: 1})
	for table, want := range map[string]bool{"orders": true, "user-a": true, "users": false, "orders2": false} {
		if p.Covers(table) != want {
			t.Errorf("Covers(%s) = %v", table, !want)
		}
	}
	slot := at("2026-12-05T03:00:00Z")
	if n := p.BackupName("orders", slot); n != "nightly-orders-20261205T030000Z" {
		t.Errorf("BackupName = %s", n)
	}
	if n := p.BackupName(strings.Repeat("t", 255), slot); len(n) != 255 || !strings.HasSuffix(n, "-20261205T030000Z") {
		t.Errorf("long BackupName = %d chars", len(n))
	}
	if id := p.RunID(slot); id != "nightly@2026-12-05T03:00:00Z" {
		t.Errorf("RunID = %s", id)
	}
}

func TestPrune(t *testing.T) {
	now := at("2026-12-05T12:00:00Z")
	day := func(d int, available bool) Kept {
		return Kept{ID: fmt.Sprintf("d%d", d), CreatedAt: now.Add(-time.Duration(d) * 24 * time.Hour), Available: available}
	}
	var bs []Kept
	for d := range 10 {
		bs = append(bs, day(d, true))
	}
	last := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Every: time.Hour, KeepLast: 3})
	if got := fmt.Sprint(last.Prune(bs, now)); got != "[d3 d4 d5 d6 d7 d8 d9]" {
		t.Errorf("keep_last 3: %s", got)
	}
	age := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Every: time.Hour, MaxAge: 5*24*time.Hour + time.Hour})
	if got := fmt.Sprint(age.Prune(bs, now)); got != "[d6 d7 d8 d9]" {
		t.Errorf("max_age: %s", got)
	}
	both := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Every: time.Hour, KeepLast: 8, MaxAge: 3 * 24 * time.Hour})
	if got := fmt.Sprint(both.Prune(bs, now)); got != "[d4 d5 d6 d7 d8 d9]" {
		t.Errorf("keep_last and max_age: %s", got)
	}
	// Runs failing for a month: the last good backup stays, whatever
	// its age; a backup being created is never touched.
	old := []Kept{day(30, true), day(31, true), day(1, false)}
	if got := fmt.Sprint(age.Prune(old, now)); got != "[d31]" {
		t.Errorf("after failures: %s", got)
	}
}
