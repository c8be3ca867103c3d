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
		{func(s *Spec) { s.KeepDaily = -1 }, "keep_daily"},
		{func(s *Spec) { s.KeepWeekly = -2 }, "keep_weekly"},
		{func(s *Spec) { s.KeepMonthly = -3 }, "keep_monthly"},
		{func(s *Spec) { s.MaxAge = -time.Hour }, "max_age"},
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

func TestPruneBuckets(t *testing.T) {
	now := at("2026-12-05T16:00:00Z") // a Saturday
	// Two backups a day (03:00 and 15:00 UTC) for 70 days.
	var bs []Kept
	for d := range 70 {
		day := now.Truncate(24*time.Hour).AddDate(0, 0, -d)
		for _, h := range []int{3, 15} {
			ts := day.Add(time.Duration(h) * time.Hour)
			bs = append(bs, Kept{ID: ts.Format("01-02T15"), CreatedAt: ts, Available: true})
		}
	}
	kept := func(p *Plan, bs []Kept) string {
		del := map[string]bool{}
		for _, id := range p.Prune(bs, now) {
			del[id] = true
		}
		var out []string
		for _, b := range bs {
			if !del[b.ID] {
				out = append(out, b.ID)
			}
		}
		return fmt.Sprint(out)
	}
	spec := func(mod func(*Spec)) *Plan {
		s := Spec{Name: "n", Tables: []string{"*"}, Every: 12 * time.Hour}
		mod(&s)
		return mustCompile(t, s)
	}
	for _, tc := range []struct {
		name string
		p    *Plan
		want string
	}{
		{"keep_daily 3", spec(func(s *Spec) { s.KeepDaily = 3 }), "[12-05T15 12-04T15 12-03T15]"},
		// ISO weeks start on Monday: this week (Nov 30 - Dec 5), the
		// week before (its Sunday is Nov 29), and the one before that.
		{"keep_weekly 3", spec(func(s *Spec) { s.KeepWeekly = 3 }), "[12-05T15 11-29T15 11-22T15]"},
		{"keep_monthly 3", spec(func(s *Spec) { s.KeepMonthly = 3 }), "[12-05T15 11-30T15 10-31T15]"},
		// The rules add up; a backup two of them keep is kept once.
		{"keep_last 3, keep_daily 2, keep_monthly 2", spec(func(s *Spec) { s.KeepLast, s.KeepDaily, s.KeepMonthly = 3, 2, 2 }),
			"[12-05T03 12-05T15 12-04T15 11-30T15]"},
		// max_age bounds every rule.
		{"keep_monthly 3, max_age 30d", spec(func(s *Spec) { s.KeepMonthly, s.MaxAge = 3, 30*24*time.Hour }), "[12-05T15 11-30T15]"},
		// Fewer buckets with a backup than K: every one is kept.
		{"keep_monthly 12", spec(func(s *Spec) { s.KeepMonthly = 12 }), "[12-05T15 11-30T15 10-31T15 09-30T15]"},
	} {
		if got := kept(tc.p, bs); got != tc.want {
			t.Errorf("%s: kept %s, want %s", tc.name, got, tc.want)
		}
	}

	// Buckets are read in the plan's time zone: 23:30 UTC on Nov 30 is
	// already December in Paris.
	edge := []Kept{
		{ID: "dec1-noon", CreatedAt: at("2026-12-01T12:00:00Z"), Available: true},
		{ID: "nov30-2330", CreatedAt: at("2026-11-30T23:30:00Z"), Available: true},
		{ID: "nov30-noon", CreatedAt: at("2026-11-30T12:00:00Z"), Available: true},
	}
	paris := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Cron: "0 * * * *", TimeZone: "Europe/Paris", KeepMonthly: 2})
	if got := kept(paris, edge); got != "[dec1-noon nov30-noon]" {
		t.Errorf("keep_monthly in Europe/Paris: kept %s", got)
	}
	utc := mustCompile(t, Spec{Name: "n", Tables: []string{"*"}, Cron: "0 * * * *", KeepMonthly: 2})
	if got := kept(utc, edge); got != "[dec1-noon nov30-2330]" {
		t.Errorf("keep_monthly in UTC: kept %s", got)
	}

	// Runs failing for months: the newest good backup stays even when no
	// bucket rule reaches it; backups being created are not counted.
	stale := []Kept{
		{ID: "creating", CreatedAt: now.Add(-time.Hour)},
		{ID: "old", CreatedAt: now.AddDate(0, -5, 0), Available: true},
		{ID: "older", CreatedAt: now.AddDate(0, -6, 0), Available: true},
	}
	daily := spec(func(s *Spec) { s.KeepDaily, s.MaxAge = 7, 30*24*time.Hour })
	if got := fmt.Sprint(daily.Prune(stale, now)); got != "[older]" {
		t.Errorf("after months of failures: deleted %s", got)
	}
}

func TestRetention(t *testing.T) {
	for _, tc := range []struct {
		s    Spec
		want string
	}{
		{Spec{KeepLast: 7, MaxAge: 30 * 24 * time.Hour}, "keep_last 7, max_age 30d"},
		{Spec{KeepWeekly: 8, KeepMonthly: 12}, "keep_weekly 8, keep_monthly 12"},
		{Spec{KeepDaily: 1, MaxAge: 36 * time.Hour}, "keep_daily 1, max_age 36h0m0s"},
	} {
		tc.s.Name, tc.s.Tables, tc.s.Every = "n", []string{"*"}, time.Hour
		if got := mustCompile(t, tc.s).Retention(); got != tc.want {
			t.Errorf("Retention() = %q, want %q", got, tc.want)
		}
	}
}
