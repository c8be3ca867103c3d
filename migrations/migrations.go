// Package migrations holds the numbered, checksummed, append-only schema
// migrations of every SQL backend and the small runner that applies them.
//
// Layout: one directory per dialect (sqlite/, later postgres/), files named
// NNNN_name.sql, versions contiguous from 1. A shipped file is never edited:
// the runner records each applied migration's SHA-256 in
// schema_migrations(version, name, sha256, applied_at) and Check refuses a
// database whose recorded checksum differs from the shipped file. A database
// that has a version this build does not know (written by a newer build) is
// refused too. Whether pending migrations are applied automatically is the
// caller's decision: embedded SQLite applies them on open, a server
// configured to require explicit `extenddb migrate` calls Check.
//
// The runner is dialect-agnostic: it takes a Dialect that names the
// directory, the placeholder style and an optional lock statement.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// files holds every dialect's migrations (one pattern per dialect).
//
//go:embed sqlite/*.sql postgres/*.sql
var files embed.FS

// Dialect describes what differs between SQL databases for the runner.
type Dialect struct {
	// Name is the directory of the dialect's migrations ("sqlite").
	Name string
	// Placeholder returns the n-th (1-based) bind placeholder.
	Placeholder func(n int) string
	// Lock, when not empty, runs first in every migration transaction to
	// serialize concurrent migrators (e.g. a PostgreSQL advisory lock).
	Lock string
	// FS overrides the embedded files (tests); nil means the shipped ones.
	FS fs.FS
}

// SQLite is the dialect of modernc.org/sqlite. Concurrent migrators are
// serialized by SQLite's single writer lock: the loser of a race fails on
// the schema_migrations primary key and its transaction rolls back.
var SQLite = Dialect{Name: "sqlite", Placeholder: func(int) string { return "?" }}

// Postgres is the dialect of PostgreSQL (pgx stdlib).
var Postgres = Dialect{
	Name:        "postgres",
	Placeholder: func(n int) string { return "$" + strconv.Itoa(n) },
	Lock:        "SELECT pg_advisory_xact_lock(7340851208526215001)",
}

// Migration is one shipped migration.
type Migration struct {
	Version int
	Name    string
	SQL     string
	// SHA256 is the hex SHA-256 of the file's bytes.
	SHA256 string
}

// Applied is one row of schema_migrations.
type Applied struct {
	Version   int
	Name      string
	SHA256    string
	AppliedAt time.Time
}

const createTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT    NOT NULL,
    sha256     TEXT    NOT NULL,
    applied_at BIGINT  NOT NULL
)`

// Load returns the dialect's shipped migrations in version order. It fails
// when a file name is malformed or the versions are not 1, 2, 3, ...
func Load(d Dialect) ([]Migration, error) {
	fsys := d.FS
	if fsys == nil {
		fsys = files
	}
	entries, err := fs.ReadDir(fsys, d.Name)
	if err != nil {
		// A dialect without a directory has no migrations yet.
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		base := strings.TrimSuffix(e.Name(), ".sql")
		num, name, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 || name == "" {
			return nil, fmt.Errorf("migrations: malformed file name %s/%s (want NNNN_name.sql)", d.Name, e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(d.Name, e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, Migration{Version: v, Name: name, SQL: string(b), SHA256: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migrations: %s versions are not contiguous: expected %d, found %d (%s)", d.Name, i+1, m.Version, m.Name)
		}
	}
	return out, nil
}

// AppliedList reads schema_migrations (creating it when missing) in
// version order.
func AppliedList(ctx context.Context, db *sql.DB) ([]Applied, error) {
	if _, err := db.ExecContext(ctx, createTable); err != nil {
		return nil, &Error{Msg: "migrations: create schema_migrations", Cause: err}
	}
	rows, err := db.QueryContext(ctx, `SELECT version, name, sha256, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, &Error{Msg: "migrations: read schema_migrations", Cause: err}
	}
	defer rows.Close()
	var out []Applied
	for rows.Next() {
		var a Applied
		var at int64
		if err := rows.Scan(&a.Version, &a.Name, &a.SHA256, &at); err != nil {
			return nil, &Error{Internal: true, Msg: "migrations: read schema_migrations", Cause: err}
		}
		a.AppliedAt = time.Unix(0, at).UTC()
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, &Error{Msg: "migrations: read schema_migrations", Cause: err}
	}
	return out, nil
}

// verify compares the applied rows with the shipped migrations and returns
// the pending ones, or a KindSchema error for an edited migration or a
// database newer than this build.
func verify(d Dialect, shipped []Migration, applied []Applied) ([]Migration, error) {
	byVersion := make(map[int]Migration, len(shipped))
	for _, m := range shipped {
		byVersion[m.Version] = m
	}
	done := make(map[int]bool, len(applied))
	for _, a := range applied {
		m, ok := byVersion[a.Version]
		if !ok {
			return nil, schemaErrorf(
				"the %s database has schema version %d (%s), newer than this build knows (latest %d); upgrade extenddb",
				d.Name, a.Version, a.Name, len(shipped))
		}
		if m.SHA256 != a.SHA256 {
			return nil, schemaErrorf(
				"%s migration %04d_%s differs from the one applied to this database (sha256 %s, applied %s); shipped migrations must never be edited",
				d.Name, m.Version, m.Name, m.SHA256, a.SHA256)
		}
		done[a.Version] = true
	}
	var pending []Migration
	for _, m := range shipped {
		if !done[m.Version] {
			pending = append(pending, m)
		}
	}
	return pending, nil
}

// Pending returns the migrations not yet applied, after checking the
// applied ones (see Check).
func Pending(ctx context.Context, db *sql.DB, d Dialect) ([]Migration, error) {
	shipped, err := Load(d)
	if err != nil {
		return nil, &Error{Schema: true, Msg: "", Cause: err}
	}
	applied, err := AppliedList(ctx, db)
	if err != nil {
		return nil, err
	}
	return verify(d, shipped, applied)
}

// Check refuses (KindSchema) a database with an edited migration, with a
// version newer than this build, or with pending migrations. It changes
// nothing (see Inspect).
func Check(ctx context.Context, db *sql.DB, d Dialect) error {
	_, pending, err := Inspect(ctx, db, d)
	if err != nil {
		return err
	}
	if len(pending) > 0 {
		names := make([]string, len(pending))
		for i, m := range pending {
			names[i] = fmt.Sprintf("%04d_%s", m.Version, m.Name)
		}
		return schemaErrorf(
			"the %s database has %d pending migration(s) (%s); run `extenddb migrate`",
			d.Name, len(pending), strings.Join(names, ", "))
	}
	return nil
}

// Apply applies the pending migrations in order, each in its own
// transaction together with its schema_migrations row, and returns the
// ones it applied. It refuses like Check for an edited migration or a newer
// database.
func Apply(ctx context.Context, db *sql.DB, d Dialect) ([]Migration, error) {
	pending, err := Pending(ctx, db, d)
	if err != nil {
		return nil, err
	}
	insert := fmt.Sprintf(`INSERT INTO schema_migrations(version, name, sha256, applied_at) VALUES (%s, %s, %s, %s)`,
		d.Placeholder(1), d.Placeholder(2), d.Placeholder(3), d.Placeholder(4))
	var done []Migration
	for _, m := range pending {
		if err := applyOne(ctx, db, d, m, insert); err != nil {
			return done, err
		}
		done = append(done, m)
	}
	return done, nil
}

func applyOne(ctx context.Context, db *sql.DB, d Dialect, m Migration, insert string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return &Error{Msg: "migrations: begin", Cause: err}
	}
	defer tx.Rollback()
	if d.Lock != "" {
		if _, err := tx.ExecContext(ctx, d.Lock); err != nil {
			return &Error{Msg: "migrations: lock", Cause: err}
		}
		// Another migrator may have applied it while we waited.
		var n int
		q := fmt.Sprintf(`SELECT COUNT(*) FROM schema_migrations WHERE version = %s`, d.Placeholder(1))
		if err := tx.QueryRowContext(ctx, q, m.Version).Scan(&n); err != nil {
			return &Error{Msg: "migrations: recheck", Cause: err}
		}
		if n > 0 {
			return nil
		}
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return &Error{Schema: true, Msg: fmt.Sprintf("migrations: apply %s %04d_%s", d.Name, m.Version, m.Name), Cause: err}
	}
	if _, err := tx.ExecContext(ctx, insert, m.Version, m.Name, m.SHA256, time.Now().UnixNano()); err != nil {
		return &Error{Msg: fmt.Sprintf("migrations: record %s %04d_%s", d.Name, m.Version, m.Name), Cause: err}
	}
	if err := tx.Commit(); err != nil {
		return &Error{Msg: fmt.Sprintf("migrations: commit %s %04d_%s", d.Name, m.Version, m.Name), Cause: err}
	}
	return nil
}

// Inspect returns the applied and pending migrations without changing the
// database: unlike Pending it does not create schema_migrations, so a
// database never migrated reports every shipped migration as pending.
func Inspect(ctx context.Context, db *sql.DB, d Dialect) ([]Applied, []Migration, error) {
	shipped, err := Load(d)
	if err != nil {
		return nil, nil, &Error{Schema: true, Msg: "", Cause: err}
	}
	q := `SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'`
	if d.Name == "postgres" {
		q = `SELECT COUNT(*) FROM pg_catalog.pg_tables WHERE tablename = 'schema_migrations' AND schemaname = ANY(current_schemas(false))`
	}
	var n int
	if err := db.QueryRowContext(ctx, q).Scan(&n); err != nil {
		return nil, nil, &Error{Msg: "migrations: look for schema_migrations", Cause: err}
	}
	if n == 0 {
		return nil, shipped, nil
	}
	rows, err := db.QueryContext(ctx, `SELECT version, name, sha256, applied_at FROM schema_migrations ORDER BY version`)
	if err != nil {
		return nil, nil, &Error{Msg: "migrations: read schema_migrations", Cause: err}
	}
	defer rows.Close()
	var applied []Applied
	for rows.Next() {
		var a Applied
		var at int64
		if err := rows.Scan(&a.Version, &a.Name, &a.SHA256, &at); err != nil {
			return nil, nil, &Error{Internal: true, Msg: "migrations: read schema_migrations", Cause: err}
		}
		a.AppliedAt = time.Unix(0, at).UTC()
		applied = append(applied, a)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, &Error{Msg: "migrations: read schema_migrations", Cause: err}
	}
	pending, err := verify(d, shipped, applied)
	return applied, pending, err
}

// Names formats migrations as "0001_name".
func Names(ms []Migration) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = fmt.Sprintf("%04d_%s", m.Version, m.Name)
	}
	return out
}

// Status reports a database's applied and pending migrations without
// changing anything (see Inspect).
func Status(ctx context.Context, db *sql.DB, d Dialect) (applied, pending []string, err error) {
	done, todo, err := Inspect(ctx, db, d)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range done {
		applied = append(applied, fmt.Sprintf("%04d_%s", a.Version, a.Name))
	}
	return applied, Names(todo), nil
}

// Error is a migration error. Schema: the database's schema is the
// problem (an edited or unknown migration, a newer schema, a failing
// migration statement); Internal: the bookkeeping table is unreadable;
// otherwise the database could not be reached. Backends translate it to
// their storage error kinds at their edge (this package knows nothing of
// storage).
type Error struct {
	Schema   bool
	Internal bool
	Msg      string
	Cause    error
}

func (e *Error) Error() string {
	msg := e.Msg
	if e.Cause != nil {
		if msg != "" {
			msg += ": "
		}
		msg += e.Cause.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Cause }

func schemaErrorf(format string, args ...any) *Error {
	return &Error{Schema: true, Msg: fmt.Sprintf(format, args...)}
}
