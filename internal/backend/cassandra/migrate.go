package cassandra

import (
	"context"
	"crypto/sha256"
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

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
)

// The CQL migrations: migrations/NNNN_name.cql, versions contiguous from
// 1, never edited once shipped (the runner records each one's SHA-256 in
// schema_migrations and refuses a keyspace whose record differs, or that
// has a version this build does not know). Statements are separated by a
// ';' at the end of a line and must be idempotent (IF NOT EXISTS): CQL
// has no transactional DDL, so a migrator that dies half way, or two that
// run at once, simply run the statements again.
//
//go:embed migrations/*.cql
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sum     string
	stmts   []string
}

func loadMigrations() ([]migration, error) {
	ents, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	for _, e := range ents {
		n := e.Name()
		if !strings.HasSuffix(n, ".cql") {
			continue
		}
		v, err := strconv.Atoi(strings.SplitN(n, "_", 2)[0])
		if err != nil {
			return nil, fmt.Errorf("migration %s: no version prefix", n)
		}
		data, err := migrationFiles.ReadFile(path.Join("migrations", n))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		ms = append(ms, migration{version: v, name: strings.TrimSuffix(n, ".cql"), sum: hex.EncodeToString(sum[:]), stmts: splitCQL(string(data))})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i, m := range ms {
		if m.version != i+1 {
			return nil, fmt.Errorf("migration %s: versions must be contiguous from 1", m.name)
		}
	}
	return ms, nil
}

// splitCQL splits a file into statements at ';' ending a line, dropping
// '--' comment lines.
func splitCQL(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(t, ";") {
			out = append(out, strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"))
			cur.Reset()
		}
	}
	if strings.TrimSpace(cur.String()) != "" {
		out = append(out, strings.TrimSpace(cur.String()))
	}
	return out
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, name text, sha256 text, applied_at timestamp)`

type applied struct {
	version int
	name    string
	sum     string
}

func (b *Backend) appliedMigrations(ctx context.Context) ([]applied, error) {
	iter := b.query(ctx, `SELECT version, name, sha256 FROM schema_migrations`).Iter()
	var out []applied
	var a applied
	for iter.Scan(&a.version, &a.name, &a.sum) {
		out = append(out, a)
	}
	if err := iter.Close(); err != nil {
		var re gocql.RequestError
		if errors.As(err, &re) && re.Code() == gocql.ErrCodeInvalid && strings.Contains(strings.ToLower(err.Error()), "schema_migrations") {
			return nil, nil // no table yet: nothing applied
		}
		return nil, mapErr(err, "schema_migrations")
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	return out, nil
}

// pending compares the keyspace's record with the shipped migrations.
func pendingOf(shipped []migration, done []applied) ([]migration, error) {
	byV := map[int]applied{}
	for _, a := range done {
		byV[a.version] = a
		if a.version > len(shipped) {
			return nil, backend.Errorf(backend.KindSchema, "cassandra keyspace has migration %d (%s), newer than this build knows (%d): upgrade extenddb", a.version, a.name, len(shipped))
		}
	}
	var out []migration
	for _, m := range shipped {
		a, ok := byV[m.version]
		if !ok {
			out = append(out, m)
			continue
		}
		if a.sum != m.sum {
			return nil, backend.Errorf(backend.KindSchema, "cassandra migration %s: the applied one differs from the shipped file (sha256 %s, shipped %s)", m.name, a.sum, m.sum)
		}
	}
	return out, nil
}

// migrate applies pending migrations and returns their names.
func (b *Backend) migrate(ctx context.Context) ([]string, error) {
	shipped, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	if err := b.query(ctx, createMigrationsTable).Exec(); err != nil {
		return nil, mapErr(err, "create schema_migrations")
	}
	done, err := b.appliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	todo, err := pendingOf(shipped, done)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range todo {
		for _, st := range m.stmts {
			// Statements are idempotent: one that timed out (schema
			// changes are slow on a loaded node) is simply run again.
			var err error
			for attempt := 0; attempt < 6; attempt++ {
				if err = mapErr(b.query(ctx, st).Exec(), "migration "+m.name); !backend.IsKind(err, backend.KindUnavailable) || ctx.Err() != nil {
					break
				}
				time.Sleep(time.Second)
			}
			if err != nil {
				return names, err
			}
		}
		if _, err := b.query(ctx, `INSERT INTO schema_migrations (version, name, sha256, applied_at) VALUES (?, ?, ?, ?) IF NOT EXISTS`,
			m.version, m.name, m.sum, time.Now()).MapScanCAS(map[string]any{}); err != nil {
			return names, mapErr(err, "record migration "+m.name)
		}
		names = append(names, m.name)
	}
	return names, nil
}

// checkSchema refuses pending, edited or newer migrations.
func (b *Backend) checkSchema(ctx context.Context) error {
	shipped, err := loadMigrations()
	if err != nil {
		return err
	}
	done, err := b.appliedMigrations(ctx)
	if err != nil {
		return err
	}
	todo, err := pendingOf(shipped, done)
	if err != nil {
		return err
	}
	if len(todo) > 0 {
		return backend.Errorf(backend.KindSchema, "cassandra keyspace %q has %d pending migrations (%s): run `extenddb migrate`", b.opt.Keyspace, len(todo), todo[0].name)
	}
	return nil
}

// status lists applied and pending migrations.
func (b *Backend) status(ctx context.Context) (*backend.SchemaStatus, error) {
	shipped, err := loadMigrations()
	if err != nil {
		return nil, err
	}
	done, err := b.appliedMigrations(ctx)
	if err != nil {
		return nil, err
	}
	todo, err := pendingOf(shipped, done)
	if err != nil {
		return nil, err
	}
	st := &backend.SchemaStatus{}
	for _, a := range done {
		st.Applied = append(st.Applied, a.name)
	}
	for _, m := range todo {
		st.Pending = append(st.Pending, m.name)
	}
	return st, nil
}
