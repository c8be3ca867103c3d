package backendtest

import (
	"fmt"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// testBackupExpiry: a backup row keeps its expiry instant and its plan
// (and a row without them reads back without them), through inserts,
// reads, listings and conditional writes.
func testBackupExpiry(e *env) {
	bc := e.b.Capabilities().Backups
	if bc == nil {
		msg := fmt.Sprintf("storage backup expiry NOT exercised: backend %s declares no backup catalog", e.b.Name())
		fmt.Println(msg)
		e.t.Log(msg)
		return
	}
	t, ctx := e.t, e.ctx
	tbl := e.tableName("exp")
	created := time.UnixMilli(1732908000123).UTC()
	expires := created.Add(35 * 24 * time.Hour)
	plain := e.backupRecord(tbl, 0, created)
	system := e.backupRecord(tbl, 1, created.Add(time.Second))
	system.Type, system.ExpiresAt, system.Plan = "SYSTEM", expires, ""
	planned := e.backupRecord(tbl, 2, created.Add(2*time.Second))
	planned.Type, planned.ExpiresAt, planned.Plan = "AWS_BACKUP", expires.Add(time.Hour), "nightly"
	for _, r := range []backend.BackupRecord{plain, system, planned} {
		got, err := bc.InsertBackup(ctx, backend.InsertBackupParams{Record: r})
		if err != nil {
			t.Fatalf("InsertBackup: %v", err)
		}
		if got.Type != r.Type || !got.ExpiresAt.Equal(r.ExpiresAt) || got.Plan != r.Plan {
			t.Fatalf("InsertBackup answered type %q expiry %v plan %q, want %q %v %q", got.Type, got.ExpiresAt, got.Plan, r.Type, r.ExpiresAt, r.Plan)
		}
	}
	check := func(what string, r *backend.BackupRecord, want backend.BackupRecord) {
		t.Helper()
		if r == nil || r.Type != want.Type || !r.ExpiresAt.Equal(want.ExpiresAt) || r.Plan != want.Plan {
			t.Fatalf("%s: %+v, want type %q expiry %v plan %q", what, r, want.Type, want.ExpiresAt, want.Plan)
		}
	}
	for _, want := range []backend.BackupRecord{plain, system, planned} {
		got, err := bc.GetBackup(ctx, backend.GetBackupParams{ARN: want.ARN})
		if err != nil {
			t.Fatalf("GetBackup: %v", err)
		}
		check("GetBackup", got, want)
	}
	if !plain.ExpiresAt.IsZero() {
		t.Fatalf("a USER backup record has an expiry")
	}
	rows, err := bc.ListBackups(ctx, backend.ListBackupsParams{Account: e.account, TableName: tbl})
	if err != nil || len(rows) != 3 {
		t.Fatalf("ListBackups = %d rows, %v", len(rows), err)
	}
	check("ListBackups", &rows[2], planned)
	res, err := bc.UpdateBackup(ctx, backend.UpdateBackupParams{ARN: planned.ARN, Generation: 1, Status: backend.BackupCreating, NewStatus: backend.BackupAvailable})
	if err != nil || !res.Matched {
		t.Fatalf("UpdateBackup = %+v, %v", res, err)
	}
	check("UpdateBackup", res.Record, planned)
}
