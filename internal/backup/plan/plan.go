// Package plan holds backup plans' pure rules (docs/backup.md, "Backup
// plans"; ADR 0051): when a plan is due, which slot a run is for, the
// name of its backups, and which of a table's plan backups retention
// deletes. It reads no clock and touches no catalog: the runner
// (internal/backup/planrun) passes the time in.
package plan

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Spec is one [[backup.plans]] entry as configured.
type Spec struct {
	// Name identifies the plan (1-64 of [a-zA-Z0-9_.-]); it prefixes
	// its backups' names.
	Name string
	// Account whose tables the plan covers.
	Account string
	// Tables are table names and glob patterns (path.Match syntax: *, ?,
	// [...]); a table is covered when one matches.
	Tables []string
	// Cron is a five-field cron expression (minute hour day-of-month
	// month day-of-week) or a descriptor (@daily, @hourly, @weekly,
	// @monthly); TimeZone (an IANA name, default UTC) is the zone it
	// reads in. Every is the plain interval form instead: slots at
	// whole multiples of it in UTC (every = "6h": 00:00, 06:00, 12:00
	// and 18:00 UTC). Exactly one of Cron and Every.
	Cron     string
	TimeZone string
	Every    time.Duration
	// Window, when not zero, is how late after its slot a run may still
	// start; a slot missed by more is skipped (the next one runs).
	Window time.Duration
	// KeepLast keeps the newest N backups of each table (0: no count
	// rule). KeepDaily, KeepWeekly and KeepMonthly keep the newest
	// backup of each of the last K days, ISO weeks and months that have
	// one, read in the plan's time zone (UTC for an interval plan). A
	// backup is kept when any of these rules keeps it; with one of them
	// set, a backup none keeps is deleted. MaxAge deletes backups older
	// than it whatever the other rules say (0: no age rule). At least one
	// rule is required.
	KeepLast    int
	KeepDaily   int
	KeepWeekly  int
	KeepMonthly int
	MaxAge      time.Duration
}

// Plan is a validated Spec.
type Plan struct {
	Spec
	sched cron.Schedule
	loc   *time.Location
}

var nameRE = regexp.MustCompile(`^[a-zA-Z0-9_.-]{1,64}$`)

// Compile validates s. The errors name the offending key.
func Compile(s Spec) (*Plan, error) {
	if !nameRE.MatchString(s.Name) {
		return nil, fmt.Errorf("name %q: 1 to 64 of letters, digits, '_', '.', '-'", s.Name)
	}
	if len(s.Tables) == 0 {
		return nil, errors.New("tables: at least one table name or pattern")
	}
	for _, t := range s.Tables {
		if _, err := path.Match(t, ""); err != nil || t == "" {
			return nil, fmt.Errorf("tables: %q is not a table name or glob pattern", t)
		}
	}
	p := &Plan{Spec: s}
	switch {
	case s.Cron != "" && s.Every != 0:
		return nil, errors.New("cron and every: set one, not both")
	case s.Cron == "" && s.Every == 0:
		return nil, errors.New("cron or every: a schedule is required")
	case s.Every < 0 || (s.Every > 0 && s.Every < time.Minute):
		return nil, fmt.Errorf("every %v: at least one minute", s.Every)
	case s.Every > 0 && s.TimeZone != "":
		return nil, errors.New("timezone: only with cron")
	case s.Cron != "":
		if strings.HasPrefix(s.Cron, "TZ=") || strings.HasPrefix(s.Cron, "CRON_TZ=") {
			return nil, errors.New("cron: give the zone in timezone, not in the expression")
		}
		loc := time.UTC
		if s.TimeZone != "" {
			var err error
			if loc, err = time.LoadLocation(s.TimeZone); err != nil {
				return nil, fmt.Errorf("timezone %q: %v", s.TimeZone, err)
			}
		}
		sched, err := cron.ParseStandard(s.Cron)
		if err != nil {
			return nil, fmt.Errorf("cron %q: %v", s.Cron, err)
		}
		if spec, ok := sched.(*cron.SpecSchedule); ok {
			spec.Location = loc
		} else {
			return nil, fmt.Errorf("cron %q: use every for an interval", s.Cron)
		}
		p.sched, p.loc = sched, loc
	}
	if s.Window < 0 {
		return nil, fmt.Errorf("window %v: not negative", s.Window)
	}
	for _, k := range []struct {
		key string
		n   int
	}{{"keep_last", s.KeepLast}, {"keep_daily", s.KeepDaily}, {"keep_weekly", s.KeepWeekly}, {"keep_monthly", s.KeepMonthly}} {
		if k.n < 0 {
			return nil, fmt.Errorf("%s %d: not negative", k.key, k.n)
		}
	}
	if s.MaxAge < 0 {
		return nil, fmt.Errorf("max_age %v: not negative", s.MaxAge)
	}
	if !p.counts() && s.MaxAge == 0 {
		return nil, errors.New("keep_last or max_age: a retention rule is required (keep_last, keep_daily, keep_weekly, keep_monthly or max_age)")
	}
	if p.loc == nil {
		p.loc = time.UTC
	}
	return p, nil
}

// Next is the first slot strictly after t.
func (p *Plan) Next(t time.Time) time.Time {
	if p.sched == nil {
		return t.UTC().Truncate(p.Every).Add(p.Every)
	}
	s := p.sched.Next(t)
	// When clocks go back, a wall-clock time happens twice; the slot is
	// the first of the two, as cron runs it once.
	for wall(s.Add(-time.Hour), p.loc) == wall(s, p.loc) {
		s = p.sched.Next(s)
	}
	return s.UTC()
}

// wall is t's wall-clock minute in loc.
func wall(t time.Time, loc *time.Location) string { return t.In(loc).Format("2006-01-02T15:04") }

// Due answers the slot a run is for at now: the latest slot at or before
// now and at or after since (when the plan was first seen, so a new plan
// does not run for slots before it existed). Missed slots coalesce: only
// the latest is due, so a server back from downtime runs once. ok is
// false when no slot is due, or the latest is later than Window ago.
func (p *Plan) Due(now, since time.Time) (slot time.Time, ok bool) {
	// The latest slot <= now: step from a point before since (slots are
	// at most a year apart in a five-field cron) without walking every
	// slot of a long downtime: jump to a day before now first.
	from := since.Add(-time.Nanosecond)
	if d := now.Add(-48 * time.Hour); d.After(from) && p.Next(d).Before(now) {
		from = d
	}
	var last time.Time
	for s := p.Next(from); !s.After(now); s = p.Next(s) {
		last = s
	}
	if last.IsZero() {
		return time.Time{}, false
	}
	if p.Window > 0 && now.Sub(last) > p.Window {
		return last, false
	}
	return last, true
}

// Covers tells whether the plan covers table (of its account).
func (p *Plan) Covers(table string) bool {
	for _, pat := range p.Tables {
		if ok, _ := path.Match(pat, table); ok {
			return true
		}
	}
	return false
}

// BackupName is the name of the plan's backup of table for slot:
// <plan>-<table>-<UTC timestamp>, shortened to the 255 characters a
// backup name may have by cutting the table name.
func (p *Plan) BackupName(table string, slot time.Time) string {
	ts := slot.UTC().Format("20060102T150405Z")
	if over := len(p.Name) + len(table) + len(ts) + 2 - 255; over > 0 {
		table = table[:len(table)-over]
	}
	return p.Name + "-" + table + "-" + ts
}

// RunID is the job catalog id of the plan's run for slot: one per slot,
// so that of the servers that find it due one runs it.
func (p *Plan) RunID(slot time.Time) string {
	return p.Name + "@" + slot.UTC().Format(time.RFC3339)
}

// ExpiresAt is the expiry a backup created at created carries (zero
// without an age rule).
func (p *Plan) ExpiresAt(created time.Time) time.Time {
	if p.MaxAge == 0 {
		return time.Time{}
	}
	return created.Add(p.MaxAge)
}

// Kept is one of a table's plan backups as retention sees it.
type Kept struct {
	ID        string
	CreatedAt time.Time
	// Available is false for a backup still being created.
	Available bool
}

// counts tells whether a count rule (keep_last, keep_daily, keep_weekly,
// keep_monthly) is set.
func (p *Plan) counts() bool {
	return p.KeepLast > 0 || p.KeepDaily > 0 || p.KeepWeekly > 0 || p.KeepMonthly > 0
}

// Prune answers the ids of backups (one table's, of this plan) that
// retention deletes at now: those no count rule keeps (when one is set)
// and those older than MaxAge. The newest available backup is never
// deleted, so a table whose runs keep failing keeps its last good
// backup; backups being created are never deleted nor counted.
func (p *Plan) Prune(backups []Kept, now time.Time) []string {
	var bs []Kept
	for _, b := range backups {
		if b.Available {
			bs = append(bs, b)
		}
	}
	slices.SortStableFunc(bs, func(a, b Kept) int { return b.CreatedAt.Compare(a.CreatedAt) })
	keep := make([]bool, len(bs))
	for i := range bs {
		keep[i] = i < p.KeepLast
	}
	// Each bucket rule keeps the newest backup of each of its last K
	// buckets (walking newest first, the first backup of a new bucket).
	for _, r := range []struct {
		k   int
		key func(time.Time) string
	}{
		{p.KeepDaily, func(t time.Time) string { return t.Format("2006-01-02") }},
		{p.KeepWeekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{p.KeepMonthly, func(t time.Time) string { return t.Format("2006-01") }},
	} {
		prev, n := "", 0
		for i := 0; i < len(bs) && n < r.k; i++ {
			if key := r.key(bs[i].CreatedAt.In(p.loc)); key != prev {
				prev, n, keep[i] = key, n+1, true
			}
		}
	}
	var out []string
	for i, b := range bs {
		if i == 0 {
			continue // the newest good backup stays, whatever its age
		}
		if (p.counts() && !keep[i]) || (p.MaxAge > 0 && now.Sub(b.CreatedAt) > p.MaxAge) {
			out = append(out, b.ID)
		}
	}
	return out
}

// Retention describes the plan's retention rules in their config keys'
// words ("keep_last 7, max_age 30d").
func (p *Plan) Retention() string {
	var out []string
	for _, k := range []struct {
		key string
		n   int
	}{{"keep_last", p.KeepLast}, {"keep_daily", p.KeepDaily}, {"keep_weekly", p.KeepWeekly}, {"keep_monthly", p.KeepMonthly}} {
		if k.n > 0 {
			out = append(out, fmt.Sprintf("%s %d", k.key, k.n))
		}
	}
	if p.MaxAge > 0 {
		age := p.MaxAge.String()
		if p.MaxAge%(24*time.Hour) == 0 {
			age = fmt.Sprintf("%dd", p.MaxAge/(24*time.Hour))
		}
		out = append(out, "max_age "+age)
	}
	return strings.Join(out, ", ")
}
