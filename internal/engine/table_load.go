package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/backend"
)

// currentTable reads a table incarnation afresh; nil when it is gone.
func (e *Engine) currentTable(ctx context.Context, ref backend.TableRef) (*table, error) {
	gt, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: ref.Account, Name: ref.Name})
	if err != nil {
		if backend.IsKind(err, backend.KindTableNotFound) {
			return nil, nil
		}
		return nil, err
	}
	if gt.Table.ID != ref.ID {
		return nil, nil
	}
	return parseTable(gt.Table)
}

// missing reports whether err is the backend's "table not found" (the
// table, or the incarnation a cached description named, is gone); when it
// is, the cached descriptions of names are forgotten. Every place that
// meets a missing table answers through it.
func (e *Engine) missing(err error, account string, names ...string) bool {
	if !backend.IsKind(err, backend.KindTableNotFound) {
		return false
	}
	for _, n := range names {
		e.tables.drop(account, n)
	}
	return true
}

// loadTableForTableOp is loadTable with the table operations' message.
func (e *Engine) loadTableForTableOp(ctx context.Context, account, name string) (*table, error) {
	t, err := e.loadTable(ctx, account, name)
	if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
		return nil, tableNotFound(name)
	}
	return t, err
}

// loadTable returns the parsed table, from the cache when fresh (and
// always from the backend when ctx comes from a write being recomputed
// after a version refusal, see fenced).
func (e *Engine) loadTable(ctx context.Context, account, name string) (*table, error) {
	if ctx.Value(reloadTables{}) == nil {
		if t := e.tables.get(account, name); t != nil {
			return t, nil
		}
	}
	res, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: account, Name: name})
	if err != nil {
		if e.missing(err, account, name) {
			return nil, notFound(name)
		}
		return nil, err
	}
	t, err := parseTable(res.Table)
	if err != nil {
		return nil, err
	}
	e.tables.put(t)
	return t, nil
}

func (e *Engine) tableArn(account, name string) string {
	return "arn:aws:dynamodb:" + e.region + ":" + account + ":table/" + name
}

// freshTable validates a TableName member and reads the table afresh
// (not from the cache), for the table operations.
func (e *Engine) freshTable(ctx context.Context, account string, tableName *string) (*table, error) {
	name, err := requireTableName(tableName)
	if err != nil {
		return nil, err
	}
	e.tables.drop(account, name)
	return e.loadTableForTableOp(ctx, account, name)
}
