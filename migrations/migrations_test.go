package migrations

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	_ "modernc.org/sqlite"
)

func openDB(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "m.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func dialect(files map[string]string) Dialect {
	fs := fstest.MapFS{}
	for name, body := range files {
		fs["sqlite/"+name] = &fstest.MapFile{Data: []byte(body)}
	}
	d := SQLite
	d.FS = fs
	return d
}

func TestShippedSQLiteMigrationsApply(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	ms, err := Load(SQLite)
	if err != nil || len(ms) == 0 {
		t.Fatalf("Load: %v %v", ms, err)
	}
	if err := Check(ctx, db, SQLite); !isSchema(err) {
		t.Fatalf("Check on a fresh database: %v", err)
	}
	done, err := Apply(ctx, db, SQLite)
	if err != nil || len(done) != len(ms) {
		t.Fatalf("Apply: %d %v", len(done), err)
	}
	if err := Check(ctx, db, SQLite); err != nil {
		t.Fatal(err)
	}
	done, err = Apply(ctx, db, SQLite)
	if err != nil || len(done) != 0 {
		t.Fatalf("second Apply: %d %v", len(done), err)
	}
	applied, err := AppliedList(ctx, db)
	if err != nil || len(applied) != len(ms) || applied[0].SHA256 != ms[0].SHA256 || applied[0].AppliedAt.IsZero() {
		t.Fatalf("applied %+v %v", applied, err)
	}
}

func TestRunner(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	v1 := dialect(map[string]string{"0001_a.sql": "CREATE TABLE a(x);"})
	if _, err := Apply(ctx, db, v1); err != nil {
		t.Fatal(err)
	}
	// A newer build adds 0002: pending until applied.
	v2 := dialect(map[string]string{"0001_a.sql": "CREATE TABLE a(x);", "0002_b.sql": "CREATE TABLE b(y); CREATE TABLE c(z);"})
	p, err := Pending(ctx, db, v2)
	if err != nil || len(p) != 1 || p[0].Version != 2 || p[0].Name != "b" {
		t.Fatalf("Pending %+v %v", p, err)
	}
	err = Check(ctx, db, v2)
	if !isSchema(err) || !strings.Contains(err.Error(), "0002_b") {
		t.Fatalf("Check with pending: %v", err)
	}
	if _, err := Apply(ctx, db, v2); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("INSERT INTO c VALUES (1)"); err != nil {
		t.Fatalf("multi-statement migration not applied: %v", err)
	}
	// The old build meets a newer database.
	err = Check(ctx, db, v1)
	if !isSchema(err) || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("old build on newer database: %v", err)
	}
	if _, err := Apply(ctx, db, v1); !isSchema(err) {
		t.Fatalf("Apply of old build on newer database: %v", err)
	}
	// An edited migration is refused.
	edited := dialect(map[string]string{"0001_a.sql": "CREATE TABLE a(x, w);", "0002_b.sql": "CREATE TABLE b(y); CREATE TABLE c(z);"})
	err = Check(ctx, db, edited)
	if !isSchema(err) || !strings.Contains(err.Error(), "never be edited") {
		t.Fatalf("edited migration: %v", err)
	}
}

func TestFailedMigrationRollsBack(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	d := dialect(map[string]string{"0001_a.sql": "CREATE TABLE a(x);", "0002_bad.sql": "CREATE TABLE b(y); SELECT nope FROM nowhere;"})
	done, err := Apply(ctx, db, d)
	if !isSchema(err) || len(done) != 1 {
		t.Fatalf("Apply: %d %v", len(done), err)
	}
	if _, err := db.Exec("SELECT * FROM b"); err == nil {
		t.Fatal("failed migration left table b")
	}
	p, err := Pending(ctx, db, d)
	if err != nil || len(p) != 1 || p[0].Version != 2 {
		t.Fatalf("Pending after failure: %+v %v", p, err)
	}
}

func TestLoadRejectsBadNames(t *testing.T) {
	for _, files := range []map[string]string{
		{"0001_a.sql": "", "0003_c.sql": ""},
		{"init.sql": ""},
		{"0002_b.sql": ""},
		{"0001_.sql": ""},
	} {
		if _, err := Load(dialect(files)); err == nil {
			t.Errorf("Load accepted %v", files)
		}
	}
	none := Postgres
	none.Name = "nosuchdialect"
	ms, err := Load(none)
	if err != nil || len(ms) != 0 {
		t.Fatalf("dialect without files: %v %v", ms, err)
	}
	if ms, err := Load(Postgres); err != nil || len(ms) == 0 || ms[0].Name != "init" {
		t.Fatalf("shipped postgres migrations: %d %v", len(ms), err)
	}
}

// TestInspectChangesNothing: Inspect on a database never migrated reports
// every migration pending and creates no table; after Apply it agrees.
func TestInspectChangesNothing(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	ms, _ := Load(SQLite)
	applied, pending, err := Inspect(ctx, db, SQLite)
	if err != nil || len(applied) != 0 || len(pending) != len(ms) {
		t.Fatalf("fresh: applied %d pending %d err %v", len(applied), len(pending), err)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM sqlite_master`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("Inspect created %d objects (%v)", n, err)
	}
	if _, err := Apply(ctx, db, SQLite); err != nil {
		t.Fatal(err)
	}
	applied, pending, err = Inspect(ctx, db, SQLite)
	if err != nil || len(applied) != len(ms) || len(pending) != 0 {
		t.Fatalf("migrated: applied %d pending %d err %v", len(applied), len(pending), err)
	}
}

func isSchema(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Schema
}
