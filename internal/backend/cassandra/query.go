package cassandra

import (
	"bytes"
	"context"
	"strings"

	"github.com/gocql/gocql"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/txledger"
)

// Query reads one partition of the table (clustering order on sk) or of
// an index (clustering order on (isk, bpk, bsk) within (h, ipk)).
func (b *Backend) Query(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	if p.Index != "" {
		return b.queryIndex(ctx, p)
	}
	lo, hi := p.Lower, p.Upper
	if p.After != nil {
		c := &backend.Bound{Key: skOf(p.After.SK)}
		if p.Forward {
			lo = tighterLower(lo, c)
		} else {
			hi = tighterUpper(hi, c)
		}
	}
	var conds []string
	args := []any{p.Table.ID, skOf(p.PK)}
	if lo != nil {
		conds = append(conds, "sk "+op(">", lo.Inclusive)+" ?")
		args = append(args, skOf(lo.Key))
	}
	if hi != nil {
		conds = append(conds, "sk "+op("<", hi.Inclusive)+" ?")
		args = append(args, skOf(hi.Key))
	}
	stmt := `SELECT sk, item, txid, txch FROM items WHERE t = ? AND pk = ? AND kind = 0`
	for _, c := range conds {
		stmt += " AND " + c
	}
	if p.Forward {
		stmt += " ORDER BY kind ASC"
	} else {
		stmt += " ORDER BY kind DESC"
	}
	iter := b.query(ctx, stmt, args...).PageSize(p.Limit + 1).Iter()
	var rows []backend.Row
	more := false
	var sk, item, txch []byte
	var txid *gocql.UUID
	for iter.Scan(&sk, &item, &txid, &txch) {
		if txid != nil {
			var err error
			if item, err = b.visible(ctx, txledger.Key{Table: p.Table, PK: p.PK, SK: sk}, item, txid, txch); err != nil {
				iter.Close()
				return nil, err
			}
		}
		if item == nil {
			continue // a deleted item's ghost row
		}
		if len(rows) == p.Limit {
			more = true
			break
		}
		rows = append(rows, backend.Row{PK: p.PK, SK: sk, BasePK: p.PK, BaseSK: sk, Item: item})
		sk, item, txid, txch = nil, nil, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, mapErr(err, "query")
	}
	return &backend.QueryResult{Rows: rows, More: more}, nil
}

func op(base string, inclusive bool) string {
	if inclusive {
		return base + "="
	}
	return base
}

// tighterLower returns the tighter of a lower bound and an exclusive
// cursor c.
func tighterLower(b, c *backend.Bound) *backend.Bound {
	if b == nil {
		return c
	}
	if x := bytes.Compare(c.Key, b.Key); x > 0 || x == 0 {
		return c
	}
	return b
}

func tighterUpper(b, c *backend.Bound) *backend.Bound {
	if b == nil {
		return c
	}
	if x := bytes.Compare(c.Key, b.Key); x < 0 || x == 0 {
		return c
	}
	return b
}

// queryIndex: every relation on the clustering columns is written in
// tuple form ((h, ipk, isk, ...) op (...)), which CQL allows for a start
// and an end of different lengths.
func (b *Backend) queryIndex(ctx context.Context, p backend.QueryParams) (*backend.QueryResult, error) {
	h := backend.KeyHash(p.PK)
	H := int64(h)
	args := []any{p.Table.ID, p.Index, bucketOf(h)}
	var conds []string
	// lower side
	lower := func() {
		if p.Forward && p.After != nil && !beforeLower(p.After.SK, p.Lower) {
			conds = append(conds, "(h, ipk, isk, bpk, bsk) > (?, ?, ?, ?, ?)")
			args = append(args, H, skOf(p.PK), skOf(p.After.SK), skOf(p.After.BasePK), skOf(p.After.BaseSK))
			return
		}
		if p.Lower != nil {
			conds = append(conds, "(h, ipk, isk) "+op(">", p.Lower.Inclusive)+" (?, ?, ?)")
			args = append(args, H, skOf(p.PK), skOf(p.Lower.Key))
			return
		}
		conds = append(conds, "(h, ipk) >= (?, ?)")
		args = append(args, H, skOf(p.PK))
	}
	upper := func() {
		if !p.Forward && p.After != nil && !afterUpper(p.After.SK, p.Upper) {
			conds = append(conds, "(h, ipk, isk, bpk, bsk) < (?, ?, ?, ?, ?)")
			args = append(args, H, skOf(p.PK), skOf(p.After.SK), skOf(p.After.BasePK), skOf(p.After.BaseSK))
			return
		}
		if p.Upper != nil {
			conds = append(conds, "(h, ipk, isk) "+op("<", p.Upper.Inclusive)+" (?, ?, ?)")
			args = append(args, H, skOf(p.PK), skOf(p.Upper.Key))
			return
		}
		conds = append(conds, "(h, ipk) <= (?, ?)")
		args = append(args, H, skOf(p.PK))
	}
	lower()
	upper()
	stmt := `SELECT ipk, isk, bpk, bsk, item FROM index_entries WHERE t = ? AND idx = ? AND b = ? AND ` + strings.Join(conds, " AND ")
	if p.Forward {
		stmt += " ORDER BY h ASC"
	} else {
		stmt += " ORDER BY h DESC"
	}
	rows, more, err := b.collectIndex(b.query(ctx, stmt, args...).PageSize(p.Limit+1).Iter(), p.Limit)
	if err != nil {
		return nil, err
	}
	return &backend.QueryResult{Rows: rows, More: more}, nil
}

// beforeLower: the cursor's sort key lies below the lower bound (or on an
// exclusive one), so the bound alone starts the page.
func beforeLower(sk []byte, lo *backend.Bound) bool {
	if lo == nil {
		return false
	}
	x := bytes.Compare(skOf(sk), skOf(lo.Key))
	return x < 0 || (x == 0 && !lo.Inclusive)
}

func afterUpper(sk []byte, hi *backend.Bound) bool {
	if hi == nil {
		return false
	}
	x := bytes.Compare(skOf(sk), skOf(hi.Key))
	return x > 0 || (x == 0 && !hi.Inclusive)
}

// collectIndex reads up to limit index rows and notes whether one more
// exists.
func (b *Backend) collectIndex(iter *gocql.Iter, limit int) ([]backend.Row, bool, error) {
	var rows []backend.Row
	more := false
	var ipk, isk, bpk, bsk, item []byte
	for iter.Scan(&ipk, &isk, &bpk, &bsk, &item) {
		if len(rows) == limit {
			more = true
			break
		}
		rows = append(rows, backend.Row{PK: ipk, SK: isk, BasePK: bpk, BaseSK: bsk, Item: item})
		ipk, isk, bpk, bsk, item = nil, nil, nil, nil, nil
	}
	if err := iter.Close(); err != nil {
		return nil, false, mapErr(err, "query index")
	}
	return rows, more, nil
}

// eachPartition walks the partition directory of table t in (h, pk)
// order over hashes [lo, hi], strictly after the partition after (when
// not nil); fn returns false to stop.
func (b *Backend) eachPartition(ctx context.Context, t int64, lo, hi uint32, after []byte, fn func(pk []byte) (bool, error)) error {
	first := bucketOf(lo)
	if after != nil {
		first = bucketOf(backend.KeyHash(after))
	}
	for bk := first; bk <= bucketOf(hi); bk++ {
		var q *gocql.Query
		if after != nil && bk == bucketOf(backend.KeyHash(after)) {
			q = b.quorum(ctx, `SELECT h, pk FROM partitions WHERE t = ? AND b = ? AND (h, pk) > (?, ?) AND (h) <= (?)`,
				t, bk, int64(backend.KeyHash(after)), after, int64(hi))
		} else {
			q = b.quorum(ctx, `SELECT h, pk FROM partitions WHERE t = ? AND b = ? AND (h) >= (?) AND (h) <= (?)`, t, bk, int64(lo), int64(hi))
		}
		iter := q.PageSize(200).Iter()
		var h int64
		var pk []byte
		for iter.Scan(&h, &pk) {
			cont, err := fn(skOf(pk))
			if err != nil || !cont {
				iter.Close()
				return err
			}
			pk = nil
		}
		if err := iter.Close(); err != nil {
			return mapErr(err, "partition directory")
		}
	}
	return nil
}

// Scan reads the table in (KeyHash(pk), pk, sk) order through the
// partition directory, or an index in (KeyHash(ipk), ipk, isk, bpk, bsk)
// order bucket by bucket.
func (b *Backend) Scan(ctx context.Context, p backend.ScanParams) (*backend.ScanResult, error) {
	if err := b.live(ctx, p.Table); err != nil {
		return nil, err
	}
	lo, hi := backend.SegmentRange(p.Segment, p.TotalSegments)
	if p.Index != "" {
		return b.scanIndex(ctx, p, lo, hi)
	}
	sp := &scanPage{b: b, p: p, t: p.Table.ID}
	var after []byte
	if p.After != nil {
		switch ch := backend.KeyHash(p.After.PK); {
		case ch > hi:
			return &backend.ScanResult{}, nil
		case ch >= lo:
			after = skOf(p.After.PK)
			if err := sp.readPart(ctx, after, skOf(p.After.SK)); err != nil {
				return nil, err
			}
		}
	}
	if !sp.more {
		err := b.eachPartition(ctx, sp.t, lo, hi, after, func(pk []byte) (bool, error) {
			sp.batch = append(sp.batch, pk)
			if len(sp.batch) == scanBatch {
				if err := sp.flush(ctx); err != nil {
					return false, err
				}
			}
			return !sp.more, nil
		})
		if err == nil {
			err = sp.flush(ctx)
		}
		if err != nil {
			return nil, err
		}
	}
	return &backend.ScanResult{Rows: sp.rows, More: sp.more}, nil
}

// scanPage is one Scan page being read: the rows found so far, whether
// the table has more past them, and the partitions waiting to be read
// in one query.
type scanPage struct {
	b     *Backend
	p     backend.ScanParams
	t     int64
	rows  []backend.Row
	more  bool
	batch [][]byte
}

// readPart appends rows of one partition after sk (nil: from the start).
func (sp *scanPage) readPart(ctx context.Context, pk, after []byte) error {
	stmt := `SELECT sk, item, txid, txch FROM items WHERE t = ? AND pk = ? AND kind = 0`
	args := []any{sp.t, pk}
	if after != nil {
		stmt += ` AND sk > ?`
		args = append(args, after)
	}
	iter := sp.b.query(ctx, stmt, args...).PageSize(sp.p.Limit + 1 - len(sp.rows)).Iter()
	var sk, item, txch []byte
	var txid *gocql.UUID
	for iter.Scan(&sk, &item, &txid, &txch) {
		if txid != nil {
			var err error
			if item, err = sp.b.visible(ctx, txledger.Key{Table: sp.p.Table, PK: pk, SK: sk}, item, txid, txch); err != nil {
				iter.Close()
				return err
			}
		}
		if item == nil {
			continue
		}
		if len(sp.rows) == sp.p.Limit {
			sp.more = true
			break
		}
		sp.rows = append(sp.rows, backend.Row{PK: pk, SK: sk, BasePK: pk, BaseSK: sk, Item: item})
		sk, item, txid, txch = nil, nil, nil, nil
	}
	return mapErr(iter.Close(), "scan")
}

// flush reads the batched partitions scanBatch at a time with one IN
// query (rows ordered here by the directory's order), at most as many
// rows per partition as the page still needs; a partition that filled
// that quota (ghost rows count towards it) is read on by itself.
func (sp *scanPage) flush(ctx context.Context) error {
	if len(sp.batch) == 0 || sp.more {
		return nil
	}
	need := sp.p.Limit + 1 - len(sp.rows)
	iter := sp.b.query(ctx, `SELECT pk, sk, item, txid, txch FROM items WHERE t = ? AND pk IN ? AND kind = 0 PER PARTITION LIMIT ?`, sp.t, sp.batch, need).Iter()
	type kv struct{ sk, item []byte }
	byPK := map[string][]kv{}
	var pk, sk, item, txch []byte
	var txid *gocql.UUID
	for iter.Scan(&pk, &sk, &item, &txid, &txch) {
		if txid != nil {
			var err error
			if item, err = sp.b.visible(ctx, txledger.Key{Table: sp.p.Table, PK: pk, SK: sk}, item, txid, txch); err != nil {
				iter.Close()
				return err
			}
		}
		byPK[string(pk)] = append(byPK[string(pk)], kv{sk, item})
		pk, sk, item, txid, txch = nil, nil, nil, nil, nil
	}
	if err := iter.Close(); err != nil {
		return mapErr(err, "scan")
	}
	for _, pk := range sp.batch {
		got := byPK[string(pk)]
		for _, r := range got {
			if r.item == nil {
				continue
			}
			if len(sp.rows) == sp.p.Limit {
				sp.more = true
				return nil
			}
			sp.rows = append(sp.rows, backend.Row{PK: pk, SK: skOf(r.sk), BasePK: pk, BaseSK: skOf(r.sk), Item: r.item})
		}
		if len(got) == need {
			if err := sp.readPart(ctx, pk, skOf(got[len(got)-1].sk)); err != nil || sp.more {
				return err
			}
		}
	}
	sp.batch = sp.batch[:0]
	return nil
}

// scanBatch is how many partitions one Scan query reads.
const scanBatch = 32

func (b *Backend) scanIndex(ctx context.Context, p backend.ScanParams, lo, hi uint32) (*backend.ScanResult, error) {
	t := p.Table.ID
	first := bucketOf(lo)
	var ch uint32
	after := p.After
	if after != nil {
		ch = backend.KeyHash(after.PK)
		if ch > hi {
			return &backend.ScanResult{}, nil
		}
		if ch < lo {
			after = nil // a cursor before the segment: start at its beginning
		} else {
			first = bucketOf(ch)
		}
	}
	var rows []backend.Row
	for bk := first; bk <= bucketOf(hi); bk++ {
		var q *gocql.Query
		if after != nil && bk == bucketOf(ch) {
			q = b.query(ctx, `SELECT ipk, isk, bpk, bsk, item FROM index_entries WHERE t = ? AND idx = ? AND b = ? AND (h, ipk, isk, bpk, bsk) > (?, ?, ?, ?, ?) AND (h) <= (?)`,
				t, p.Index, bk, int64(ch), skOf(after.PK), skOf(after.SK), skOf(after.BasePK), skOf(after.BaseSK), int64(hi))
		} else {
			q = b.query(ctx, `SELECT ipk, isk, bpk, bsk, item FROM index_entries WHERE t = ? AND idx = ? AND b = ? AND (h) >= (?) AND (h) <= (?)`,
				t, p.Index, bk, int64(lo), int64(hi))
		}
		got, more, err := b.collectIndex(q.PageSize(p.Limit+1-len(rows)).Iter(), p.Limit-len(rows))
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
		if more {
			return &backend.ScanResult{Rows: rows, More: true}, nil
		}
		if len(rows) == p.Limit {
			// More may remain in later buckets.
			return &backend.ScanResult{Rows: rows, More: bk < bucketOf(hi)}, nil
		}
	}
	return &backend.ScanResult{Rows: rows}, nil
}
