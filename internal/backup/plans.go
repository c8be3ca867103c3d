package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backup/plan"
)

// Backup plans (docs/backup.md, "Backup plans"; ADR 0051): every tick,
// each server looks at each configured plan; when a slot is due, the
// server whose insert of the slot's run row matches (JobCatalog: one row
// per slot) runs it: one backup per covered table with bounded
// concurrency, then retention. A run whose server died (stale heartbeat)
// is taken over and finishes the tables not yet backed up for its slot.

// Job catalog kinds of plans.
const (
	// kindPlan rows remember when a plan was first seen (a new plan does
	// not run for slots before it existed).
	kindPlan = "backup-plan"
	// kindPlanRun rows are one slot's run: id "<plan>@<slot RFC 3339>".
	kindPlanRun = "backup-plan-run"
)

// Plan run statuses.
const (
	RunRunning   = "RUNNING"
	RunSucceeded = "SUCCEEDED"
	RunFailed    = "FAILED"
)

// keepRuns is how many run rows of a plan are kept (older are removed).
const keepRuns = 100

// RunPayload is a run row's payload.
type RunPayload struct {
	Plan     string       `json:"plan"`
	Slot     time.Time    `json:"slot"`
	Started  time.Time    `json:"started"`
	Ended    time.Time    `json:"ended,omitzero"`
	Tables   int          `json:"tables"`
	Backups  []string     `json:"backups,omitempty"`
	Failures []RunFailure `json:"failures,omitempty"`
	Deleted  int          `json:"deleted"`
}

// RunFailure is one table a run could not back up, and why.
type RunFailure struct {
	Table  string `json:"table"`
	Reason string `json:"reason"`
}

// PlansConfig configures the plan runner.
type PlansConfig struct {
	Plans []*plan.Plan
	// Jobs keeps the plan and run rows.
	Jobs backend.JobCatalog
	// Tables lists the table names of an account.
	Tables func(ctx context.Context, account string) ([]string, error)
	// Tick paces the runner (default 30 s); Concurrency bounds the
	// backups of one run taken at once (default the manager's
	// MaxConcurrentJobs).
	Tick        time.Duration
	Concurrency int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Plans runs backup plans over a Manager.
type Plans struct {
	m   *Manager
	cfg PlansConfig
	log *slog.Logger

	lastSuccess *prometheus.GaugeVec
	lastRun     *prometheus.GaugeVec
	lastOK      *prometheus.GaugeVec
	failures    *prometheus.CounterVec

	wg sync.WaitGroup
}

// NewPlans builds the runner; its metrics go to reg (nil: none).
func NewPlans(m *Manager, cfg PlansConfig, reg prometheus.Registerer) *Plans {
	if cfg.Tick <= 0 {
		cfg.Tick = 30 * time.Second
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = m.cfg.MaxConcurrentJobs
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	p := &Plans{m: m, cfg: cfg, log: m.log,
		lastSuccess: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_backup_plan_last_success_timestamp_seconds",
			Help: "Slot time of the plan's newest run that backed up every covered table (from the catalog: the same on every server)."}, []string{"plan"}),
		lastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_backup_plan_last_run_timestamp_seconds",
			Help: "Slot time of the plan's newest finished run (from the catalog)."}, []string{"plan"}),
		lastOK: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "extenddb_backup_plan_last_run_succeeded",
			Help: "1 when the plan's newest finished run backed up every covered table, 0 when it failed for some."}, []string{"plan"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "extenddb_backup_plan_failures_total",
			Help: "Tables a plan run of this server failed to back up."}, []string{"plan"}),
	}
	if reg != nil {
		reg.MustRegister(p.lastSuccess, p.lastRun, p.lastOK, p.failures)
	}
	return p
}

// Run runs the plans every tick until ctx ends, then waits for the runs
// it started.
func (p *Plans) Run(ctx context.Context) {
	defer p.wg.Wait()
	for {
		p.Tick(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(p.cfg.Tick):
		}
	}
}

// Tick looks at every plan once: starts the run of a due slot (in the
// background; a plan running here is not started again) and refreshes
// the plan metrics from the catalog. Errors are logged; the next tick
// retries.
func (p *Plans) Tick(ctx context.Context) {
	for _, pl := range p.cfg.Plans {
		if err := p.tickPlan(ctx, pl); err != nil && ctx.Err() == nil {
			p.log.Warn("backup plan", "plan", pl.Name, "err", err)
		}
		if err := p.refresh(ctx, pl); err != nil && ctx.Err() == nil {
			p.log.Warn("backup plan status", "plan", pl.Name, "err", err)
		}
	}
}

func (p *Plans) tickPlan(ctx context.Context, pl *plan.Plan) error {
	now := p.cfg.Now()
	first, err := p.cfg.Jobs.InsertJob(ctx, backend.JobRecord{Kind: kindPlan, ID: pl.Name, Account: pl.Account,
		Status: "ACTIVE", CreatedAt: now, Payload: []byte("{}"), Owner: p.m.cfg.Owner})
	if err != nil {
		return err
	}
	slot, ok := pl.Due(now, first.Record.CreatedAt)
	if !ok {
		return nil
	}
	pay, _ := json.Marshal(RunPayload{Plan: pl.Name, Slot: slot, Started: now})
	res, err := p.cfg.Jobs.InsertJob(ctx, backend.JobRecord{Kind: kindPlanRun, ID: pl.RunID(slot), Account: pl.Account,
		Status: RunRunning, CreatedAt: now, Payload: pay, Owner: p.m.cfg.Owner})
	if err != nil {
		return err
	}
	run := res.Record
	if !res.Matched {
		if run.Status != RunRunning || p.m.ownLive(kindPlanRun+"/"+run.ID, run.Owner, run.Generation) {
			return nil // done, or running here or elsewhere
		}
		claim, err := p.cfg.Jobs.ClaimJob(ctx, backend.ClaimJobParams{Kind: kindPlanRun, ID: run.ID, Owner: p.m.cfg.Owner,
			Generation: run.Generation, Status: RunRunning, StaleAfter: p.m.cfg.StaleAfter})
		if err != nil || !claim.Matched {
			return err
		}
		run = claim.Record
		p.log.Warn("backup plan: taking over a run whose server stopped", "plan", pl.Name, "slot", slot, "owner", res.Record.Owner)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := p.runSlot(ctx, pl, slot, *run); err != nil && ctx.Err() == nil {
			p.log.Warn("backup plan run", "plan", pl.Name, "slot", slot, "err", err)
		}
	}()
	return nil
}

// Wait waits for the runs started by Tick to end.
func (p *Plans) Wait() { p.wg.Wait() }

// runSlot backs up every covered table for slot under the run row's
// claim, applies retention and records the result.
func (p *Plans) runSlot(ctx context.Context, pl *plan.Plan, slot time.Time, run backend.JobRecord) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	key := kindPlanRun + "/" + run.ID
	defer p.m.runs(key, run.Generation)()
	go p.m.keepAlive(ctx, cancel, func(ctx context.Context) (bool, error) {
		res, err := p.cfg.Jobs.HeartbeatJob(ctx, backend.HeartbeatJobParams{Kind: kindPlanRun, ID: run.ID, Owner: p.m.cfg.Owner, Generation: run.Generation})
		return err == nil && res.Matched, err
	})
	var pay RunPayload
	_ = json.Unmarshal(run.Payload, &pay)
	all, err := p.cfg.Tables(ctx, pl.Account)
	if err != nil {
		return err
	}
	var tables []string
	for _, t := range all {
		if pl.Covers(t) {
			tables = append(tables, t)
		}
	}
	pay.Tables = len(tables)
	var mu sync.Mutex
	sem := make(chan struct{}, p.cfg.Concurrency)
	var wg sync.WaitGroup
	for _, t := range tables {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			arn, err := p.backupTable(ctx, pl, slot, t)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				pay.Failures = append(pay.Failures, RunFailure{Table: t, Reason: err.Error()})
				p.failures.WithLabelValues(pl.Name).Inc()
				p.log.Warn("backup plan: a table's backup failed", "plan", pl.Name, "slot", slot, "table", t, "err", err)
				return
			}
			pay.Backups = append(pay.Backups, arn)
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return err // fenced or stopped: the run is left to its new owner
	}
	for _, t := range tables {
		n, err := p.retain(ctx, pl, t)
		pay.Deleted += n
		if err != nil {
			p.log.Warn("backup plan: retention", "plan", pl.Name, "table", t, "err", err)
		}
	}
	pay.Ended = p.cfg.Now()
	status, msg := RunSucceeded, ""
	if len(pay.Failures) > 0 {
		status, msg = RunFailed, fmt.Sprintf("%d of %d tables failed; first: %s: %s", len(pay.Failures), len(tables),
			pay.Failures[0].Table, pay.Failures[0].Reason)
	}
	raw, _ := json.Marshal(pay)
	res, err := p.cfg.Jobs.UpdateJob(ctx, backend.UpdateJobParams{Kind: kindPlanRun, ID: run.ID, Generation: run.Generation,
		Status: RunRunning, NewStatus: status, Payload: raw, Message: &msg})
	if err != nil {
		return err
	}
	if !res.Matched {
		return errFenced
	}
	p.log.Info("backup plan run finished", "plan", pl.Name, "slot", slot, "status", status, "tables", len(tables),
		"failed", len(pay.Failures), "deleted", pay.Deleted)
	return nil
}

// backupTable takes the slot's backup of one table (or finds it, after a
// takeover) and waits until it is AVAILABLE.
func (p *Plans) backupTable(ctx context.Context, pl *plan.Plan, slot time.Time, table string) (string, error) {
	name := pl.BackupName(table, slot)
	have, err := p.m.ListBackups(ctx, backend.ListBackupsParams{Account: pl.Account, TableName: table, Types: []string{planBackupType},
		Statuses: []string{backend.BackupCreating, backend.BackupAvailable}})
	if err != nil {
		return "", err
	}
	var rec *backend.BackupRecord
	for i := range have {
		if have[i].Plan == pl.Name && have[i].Name == name {
			rec = &have[i]
		}
	}
	for attempt := 0; rec == nil; attempt++ {
		rec, err = p.m.CreateBackupAs(ctx, pl.Account, table, name, Origin{Type: planBackupType, Plan: pl.Name,
			ExpiresAt: pl.ExpiresAt(p.cfg.Now())})
		if backend.IsKind(err, backend.KindLimitExceeded) {
			// Every job slot is busy (backups and restores of clients
			// too): wait for one.
			if err := backend.Backoff(ctx, attempt, 5*time.Second); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return "", err
		}
	}
	// Poll soon, then less often: a plan's tables are often small, and
	// with bounded concurrency a fixed long pause would pace the run.
	pause := 10 * time.Millisecond
	for {
		r, err := p.m.GetBackup(ctx, rec.ARN)
		if err != nil {
			return "", err
		}
		switch {
		case r == nil:
			return "", errors.New("the backup vanished")
		case r.Status == backend.BackupAvailable:
			return r.ARN, nil
		case r.Status != backend.BackupCreating:
			return "", fmt.Errorf("backup %s ended %s: %s", r.ARN, r.Status, r.Message)
		}
		select {
		case <-ctx.Done():
			return "", context.Cause(ctx)
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// planBackupType is the BackupType of plan backups: DynamoDB's
// AWS_BACKUP, the type of backups a managed schedule takes.
const planBackupType = "AWS_BACKUP"

// retain deletes the table's plan backups retention no longer keeps.
func (p *Plans) retain(ctx context.Context, pl *plan.Plan, table string) (int, error) {
	rows, err := p.m.ListBackups(ctx, backend.ListBackupsParams{Account: pl.Account, TableName: table, Types: []string{planBackupType},
		Statuses: []string{backend.BackupCreating, backend.BackupAvailable}})
	if err != nil {
		return 0, err
	}
	byID := map[string]backend.BackupRecord{}
	var kept []plan.Kept
	for _, r := range rows {
		if r.Plan != pl.Name {
			continue
		}
		byID[r.ARN] = r
		kept = append(kept, plan.Kept{ID: r.ARN, CreatedAt: r.CreatedAt, Available: r.Status == backend.BackupAvailable})
	}
	n := 0
	var errs []error
	for _, arn := range pl.Prune(kept, p.cfg.Now()) {
		if p.m.RestoringFrom(arn) {
			continue
		}
		res, err := p.m.DeleteBackup(ctx, byID[arn])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Matched {
			n++
		}
	}
	return n, errors.Join(errs...)
}

// PlanStatus is what the catalog says of one plan.
type PlanStatus struct {
	Plan        string
	LastRun     *RunPayload
	LastStatus  string
	LastMessage string
	LastSuccess time.Time
	Running     bool
}

// Status reads a plan's runs from the catalog.
func (p *Plans) Status(ctx context.Context, pl *plan.Plan) (PlanStatus, error) {
	st := PlanStatus{Plan: pl.Name}
	rows, err := p.cfg.Jobs.ListJobs(ctx, backend.ListJobsParams{Kind: kindPlanRun, StartAfter: pl.Name + "@"})
	if err != nil {
		return st, err
	}
	var runs []backend.JobRecord
	for _, r := range rows {
		if strings.HasPrefix(r.ID, pl.Name+"@") {
			runs = append(runs, r)
		}
	}
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		var pay RunPayload
		_ = json.Unmarshal(r.Payload, &pay)
		switch {
		case r.Status == RunRunning:
			st.Running = true
		case st.LastRun == nil:
			st.LastRun, st.LastStatus, st.LastMessage = &pay, r.Status, r.Message
		}
		if r.Status == RunSucceeded && st.LastSuccess.IsZero() {
			st.LastSuccess = pay.Slot
		}
	}
	// Old run rows go: the catalog keeps the newest keepRuns of a plan.
	if len(runs) > keepRuns {
		for _, r := range runs[:len(runs)-keepRuns] {
			if r.Status != RunRunning {
				_, _ = p.cfg.Jobs.RemoveJob(ctx, backend.RemoveJobParams{Kind: kindPlanRun, ID: r.ID, Generation: r.Generation, Status: r.Status})
			}
		}
	}
	return st, nil
}

// refresh sets the plan's gauges from the catalog.
func (p *Plans) refresh(ctx context.Context, pl *plan.Plan) error {
	st, err := p.Status(ctx, pl)
	if err != nil {
		return err
	}
	if !st.LastSuccess.IsZero() {
		p.lastSuccess.WithLabelValues(pl.Name).Set(float64(st.LastSuccess.Unix()))
	}
	if st.LastRun != nil {
		p.lastRun.WithLabelValues(pl.Name).Set(float64(st.LastRun.Slot.Unix()))
		ok := 0.0
		if st.LastStatus == RunSucceeded {
			ok = 1
		}
		p.lastOK.WithLabelValues(pl.Name).Set(ok)
	}
	return nil
}
