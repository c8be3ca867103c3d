package engine

import (
	"context"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// defaultTableListTTL bounds how long the background loops reuse their
// list of parsed tables when nothing changed locally (changes made by
// other servers on a shared backend are seen after at most this long).
const defaultTableListTTL = 30 * time.Second

// tableList is the parsed tables of every known account, shared by the
// background loops (TTL sweeper, stream loop, point-in-time recovery
// shipper, backfill resumption). Reading and decoding every table
// description on each pass of each loop costs, with 10,000 tables, most
// of a second of CPU per pass; the list is instead rebuilt only when this
// server changed a table (tableCache.drop bumps the generation) or it is
// older than ttl. A rebuild reuses the parsed table of every description
// whose incarnation and version are unchanged, and concurrent callers
// wait for one rebuild instead of each doing its own.
type tableList struct {
	mu     sync.Mutex // held across a rebuild: one at a time
	ttl    time.Duration
	built  time.Time
	gen    uint64 // tableCache generation the list was built at
	valid  bool
	tables []*table
}

// listTables returns the parsed tables of the accounts, from the
// shared list when it is current.
func (e *Engine) listTables(ctx context.Context, accounts []string) []*table {
	l := &e.tableList
	l.mu.Lock()
	defer l.mu.Unlock()
	gen := e.tables.generation()
	if l.valid && l.gen == gen && time.Since(l.built) < l.ttl {
		return l.tables
	}
	old := make(map[string]*table, len(l.tables))
	for _, t := range l.tables {
		old[cacheKey(t.ref.Account, t.ref.Name)] = t
	}
	started := time.Now()
	complete := true
	var out []*table
	for _, acct := range accounts {
		res, err := e.backend.ListTables(ctx, backend.ListTablesParams{Account: acct})
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("background: listing tables", "account", acct, "err", err)
			}
			complete = false
			continue
		}
		for _, n := range res.Names {
			gt, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: acct, Name: n})
			if err != nil {
				if !backend.IsKind(err, backend.KindTableNotFound) {
					complete = false
				}
				continue
			}
			if t := old[cacheKey(acct, n)]; t != nil && t.ref.ID == gt.Table.ID && t.version == gt.Table.Version {
				out = append(out, t)
				continue
			}
			t, err := parseTable(gt.Table)
			if err != nil {
				continue
			}
			out = append(out, t)
		}
	}
	l.tables = out
	// A list built while a read failed is used once and rebuilt next time.
	l.valid = complete && ctx.Err() == nil
	l.gen = gen
	l.built = started
	return out
}
