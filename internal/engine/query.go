package engine

import (
	"bytes"
	"context"
	"fmt"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/expr"
)

// maxPageBytes is the 1 MB of scanned data after which Query and Scan
// return a page.
const maxPageBytes = 1024 * 1024

// readSpec is what Query and Scan share once parsed.
type readSpec struct {
	t          *table
	ix         *index // nil for the table
	filter     *expr.Condition
	proj       projector
	count      bool // Select COUNT
	fetchBase  bool // LSI query asking for attributes it does not project
	limit      int  // 0 = none
	after      *backend.Cursor
	consistent bool
	rcc        string
	pageBytes  int // the page's size bound; 0 = maxPageBytes
}

func (s *readSpec) keyNames() []keyAttr {
	ks := []keyAttr{s.t.Hash}
	if s.t.Range != nil {
		ks = append(ks, *s.t.Range)
	}
	if s.ix != nil {
		for _, k := range []*keyAttr{&s.ix.Hash, s.ix.Range} {
			if k == nil {
				continue
			}
			dup := false
			for _, e := range ks {
				if e.Name == k.Name {
					dup = true
				}
			}
			if !dup {
				ks = append(ks, *k)
			}
		}
	}
	return ks
}

func checkLimit(limit *int64) (int, error) {
	if limit == nil {
		return 0, nil
	}
	if *limit < 1 {
		return 0, validationf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value greater than or equal to 1", *limit)
	}
	if *limit > 1<<31-1 {
		// Limit is a 32-bit integer member of the service's model.
		return 0, validationf("1 validation error detected: Value '%d' at 'limit' failed to satisfy constraint: Member must have value less than or equal to 2147483647", *limit)
	}
	return int(*limit), nil
}

// prepareRead validates the members Query and Scan share.
func (e *Engine) prepareRead(ctx context.Context, account string, tableName, indexName *string, sel string,
	limit *int64, filterExpr, projExpr *string, toGet []string, legacyFilterMap map[string]Condition, condOp string,
	env *expr.Env, consistent *bool, rcc string) (*readSpec, error) {
	name, err := requireTableName(tableName)
	if err != nil {
		return nil, err
	}
	switch sel {
	case "", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES", "SPECIFIC_ATTRIBUTES", "COUNT":
	default:
		return nil, validationf("1 validation error detected: Value '%s' at 'select' failed to satisfy constraint: Member must satisfy enum value set: [SPECIFIC_ATTRIBUTES, COUNT, ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES]", sel)
	}
	if err := checkReturnConsumed(rcc); err != nil {
		return nil, err
	}
	s := &readSpec{consistent: consistent != nil && *consistent, rcc: rcc}
	if s.limit, err = checkLimit(limit); err != nil {
		return nil, err
	}
	if filterExpr != nil && legacyFilterMap != nil {
		return nil, validationf("Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {QueryFilter} Expression parameters: {FilterExpression}")
	}
	if filterExpr != nil {
		if s.filter, err = expr.ParseCondition(expr.KindFilter, *filterExpr, env); err != nil {
			return nil, err
		}
	} else if legacyFilterMap != nil {
		if s.filter, err = legacyFilter(legacyFilterMap, condOp); err != nil {
			return nil, err
		}
	} else if err := checkCondOp(condOp, 0); err != nil {
		return nil, err
	}
	if s.proj, err = e.projection(projExpr, toGet, nil, env); err != nil {
		return nil, err
	}
	hasProj := projExpr != nil || toGet != nil
	switch sel {
	case "SPECIFIC_ATTRIBUTES":
		if !hasProj {
			return nil, validationf("One or more parameter values were invalid: Select type SPECIFIC_ATTRIBUTES requires AttributesToGet or ProjectionExpression")
		}
	case "COUNT", "ALL_ATTRIBUTES", "ALL_PROJECTED_ATTRIBUTES":
		if hasProj {
			// The message names the parameter the request used.
			param, what := "AttributesToGet", sel
			if projExpr != nil {
				param = "ProjectionExpression"
			}
			if sel == "COUNT" {
				what = "only the Count"
			}
			return nil, validationf("One or more parameter values were invalid: Cannot specify the %s when choosing to get %s", param, what)
		}
	}
	s.count = sel == "COUNT"
	if s.t, err = e.loadTable(ctx, account, name); err != nil {
		return nil, err
	}
	if indexName != nil {
		s.ix = s.t.index(*indexName)
		if s.ix == nil {
			return nil, validationf("The table does not have the specified index: %s", *indexName)
		}
		if s.ix.Global && s.consistent {
			return nil, validationf("Consistent reads are not supported on global secondary indexes")
		}
		if s.ix.Status != "" && s.ix.Status != "ACTIVE" {
			return nil, validationf("Cannot read from backfilling global secondary index: %s", s.ix.Name)
		}
		if s.ix.ProjType != "ALL" {
			if sel == "ALL_ATTRIBUTES" {
				if s.ix.Global {
					return nil, invalidParam("Select type ALL_ATTRIBUTES is not supported for global secondary index %s because its projection type is not ALL", s.ix.Name)
				}
				s.fetchBase = true
			}
			if hasProj && !s.ix.Global {
				s.fetchBase = true
			}
		}
	} else if sel == "ALL_PROJECTED_ATTRIBUTES" {
		return nil, validationf("One or more parameter values were invalid: ALL_PROJECTED_ATTRIBUTES can be used only when Querying using an IndexName")
	}
	return s, nil
}

// startCursor validates ExclusiveStartKey and turns it into a cursor.
func (s *readSpec) startCursor(esk attr.Item) error {
	if esk == nil {
		return nil
	}
	bad := validationf("The provided starting key is invalid: The provided key element does not match the schema")
	names := s.keyNames()
	if len(esk) != len(names) {
		return bad
	}
	enc := func(ka keyAttr, isRange bool) ([]byte, error) {
		v, ok := esk[ka.Name]
		if !ok || v.Type != ka.Type {
			return nil, bad
		}
		// The same key limits as every other key (Query applies them
		// through its key condition; Scan has only this check).
		if err := checkKeyValue(v, ka, isRange); err != nil {
			return nil, err
		}
		b, _ := attr.KeyBytes(v)
		return b, nil
	}
	c := &backend.Cursor{}
	var err error
	if c.PK, err = enc(s.t.Hash, false); err != nil {
		return err
	}
	if s.t.Range != nil {
		if c.SK, err = enc(*s.t.Range, true); err != nil {
			return err
		}
	}
	if s.ix != nil {
		c.BasePK, c.BaseSK = c.PK, c.SK
		if c.PK, err = enc(s.ix.Hash, false); err != nil {
			return err
		}
		c.SK = nil
		if s.ix.Range != nil {
			if c.SK, err = enc(*s.ix.Range, true); err != nil {
				return err
			}
		}
	}
	s.after = c
	return nil
}

// lastKey builds LastEvaluatedKey from an item.
func (s *readSpec) lastKey(it attr.Item) attr.Item {
	out := attr.Item{}
	for _, k := range s.keyNames() {
		if v, ok := it[k.Name]; ok {
			out[k.Name] = v
		}
	}
	return out
}

// fetchFn reads the next batch of rows after a cursor.
type fetchFn func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error)

// run pages through rows, applying Limit, the 1 MB page size, the filter
// and the projection.
func (e *Engine) run(ctx context.Context, s *readSpec, fetch fetchFn) (*QueryOutput, error) {
	out := &QueryOutput{}
	items := []RawJSON{}
	scannedBytes := 0
	entryBytes, fetchedBytes := 0, 0 // index entries read; table items fetched for an LSI
	fetched := false
	after := s.after
	var last attr.Item
	stopped := false
	// Without a filter or projection an item is returned as stored, and
	// its size is read off its canonical bytes without decoding it.
	needDecode := s.filter != nil || s.proj != nil || s.fetchBase
	pageBytes := s.pageBytes
	if pageBytes <= 0 {
		pageBytes = maxPageBytes
	}
	var lastRaw []byte
	for !stopped {
		// A client that went away cancels ctx: stop between pages.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		want := 256
		if s.limit > 0 && s.limit-out.ScannedCount < want {
			want = s.limit - out.ScannedCount
		}
		rows, more, err := fetch(ctx, after, want)
		if err != nil {
			if e.missing(err, s.t.ref.Account, s.t.ref.Name) {
				return nil, notFound(s.t.ref.Name)
			}
			return nil, err
		}
		for i := range rows {
			r := &rows[i]
			raw := r.Item
			var it attr.Item
			size := -1
			if !needDecode {
				if n, err := attr.RawItemSize(raw); err == nil {
					size = n
				}
			}
			if size < 0 {
				if it, err = decodeStored(raw); err != nil {
					return nil, err
				}
				if s.fetchBase {
					entryBytes += attr.ItemSize(it)
					fetched = true
					res, err := e.backend.GetItem(ctx, backend.GetItemParams{Table: s.t.ref, PK: r.BasePK, SK: r.BaseSK})
					if err != nil {
						return nil, err
					}
					if res.Item != nil {
						if it, err = decodeStored(res.Item); err != nil {
							return nil, err
						}
						raw = res.Item
					}
				}
				size = attr.ItemSize(it)
			}
			if fetched {
				fetchedBytes += size
				fetched = false
			} else {
				entryBytes += size
			}
			out.ScannedCount++
			scannedBytes += size
			last, lastRaw = it, r.Item
			after = &backend.Cursor{PK: r.PK, SK: r.SK, BasePK: r.BasePK, BaseSK: r.BaseSK}
			if s.filter == nil || s.filter.Eval(it) {
				out.Count++
				if !s.count {
					if s.proj != nil {
						items = append(items, attr.EncodeItem(s.proj.Apply(it)))
					} else {
						items = append(items, raw)
					}
				}
			}
			if (s.limit > 0 && out.ScannedCount >= s.limit) || scannedBytes >= pageBytes {
				// Like the service, a page that stops at Limit or at the
				// size bound carries LastEvaluatedKey without looking ahead.
				stopped = true
				if last == nil {
					if last, err = decodeStored(lastRaw); err != nil {
						return nil, err
					}
				}
				out.LastEvaluatedKey = s.lastKey(last)
				break
			}
		}
		if !more {
			break
		}
	}
	if !s.count {
		out.Items = &items
	}
	out.scannedBytes = scannedBytes
	if wantsCapacity(s.rcc) {
		var c consumed
		if s.ix == nil {
			c.table = readUnits(scannedBytes, s.consistent)
		} else {
			// An index read costs the index; fetching attributes an LSI
			// does not project costs the table.
			c.addIndex(s.ix, readUnits(entryBytes, s.consistent))
			if fetchedBytes > 0 {
				c.table = readUnits(fetchedBytes, s.consistent)
			}
		}
		out.ConsumedCapacity = c.report(s.rcc, s.t.name(), splitNone)
	}
	return out, nil
}

// Query reads items of one partition.
func (e *Engine) Query(ctx context.Context, account string, in *QueryInput) (*QueryOutput, error) {
	if err := checkExprParams(
		[]param{{"ProjectionExpression", in.ProjectionExpression != nil}, {"FilterExpression", in.FilterExpression != nil},
			{"KeyConditionExpression", in.KeyConditionExpression != nil}},
		[]param{{"AttributesToGet", in.AttributesToGet != nil}, {"QueryFilter", in.QueryFilter != nil},
			{"ConditionalOperator", in.ConditionalOperator != ""}, {"KeyConditions", in.KeyConditions != nil}},
		in.ExpressionAttributeNames != nil, in.ExpressionAttributeValues != nil); err != nil {
		return nil, err
	}
	env, err := expr.NewEnv(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	var kc *expr.KeyCondition
	switch {
	case in.KeyConditionExpression != nil:
		if kc, err = expr.ParseKeyCondition(*in.KeyConditionExpression, env); err != nil {
			return nil, err
		}
	case in.KeyConditions != nil:
		if kc, err = legacyKeyConditions(in.KeyConditions); err != nil {
			return nil, err
		}
	default:
		if _, err := requireTableName(in.TableName); err != nil {
			return nil, err
		}
		if err := checkCondOp(in.ConditionalOperator, len(in.QueryFilter)); err != nil {
			return nil, err
		}
		return nil, validationf("Either the KeyConditions or KeyConditionExpression parameter must be specified in the request.")
	}
	s, err := e.prepareRead(ctx, account, in.TableName, in.IndexName, in.Select, in.Limit, in.FilterExpression,
		in.ProjectionExpression, in.AttributesToGet, in.QueryFilter, in.ConditionalOperator, env, in.ConsistentRead, in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if err := env.CheckUnused(); err != nil {
		return nil, err
	}
	s.pageBytes = in.pageBytes
	hash, rng := s.t.Hash, s.t.Range
	if s.ix != nil {
		hash, rng = s.ix.Hash, s.ix.Range
	}
	for _, n := range s.filter.TopLevelNames() {
		if n == hash.Name || (rng != nil && n == rng.Name) {
			return nil, validationf("Filter Expression can only contain non-primary key attributes: Primary key attribute: %s", n)
		}
	}
	var pk []byte
	var lower, upper *backend.Bound
	var hashSeen bool
	for _, term := range kc.Terms {
		switch {
		case term.Name == hash.Name:
			if term.Op != expr.EQ {
				return nil, validationf("Query key condition not supported")
			}
			if term.Values[0].Type != hash.Type {
				return nil, invalidParam("Condition parameter type does not match schema type")
			}
			if err := checkKeyValue(term.Values[0], hash, false); err != nil {
				return nil, err
			}
			pk, _ = attr.KeyBytes(term.Values[0])
			hashSeen = true
		case rng != nil && term.Name == rng.Name:
			for _, v := range term.Values {
				if v.Type != rng.Type {
					return nil, invalidParam("Condition parameter type does not match schema type")
				}
			}
			lower, upper, err = sortKeyRange(term, *rng)
			if err != nil {
				return nil, err
			}
		default:
			return nil, validationf("Query condition missed key schema element: %s", missingKeyName(kc, hash, rng))
		}
	}
	if !hashSeen {
		return nil, validationf("Query condition missed key schema element: %s", hash.Name)
	}
	if err := s.startCursor(in.ExclusiveStartKey); err != nil {
		return nil, err
	}
	if s.after != nil && !bytes.Equal(s.after.PK, pk) {
		return nil, validationf("The provided starting key is outside query boundaries based on provided conditions")
	}
	forward := in.ScanIndexForward == nil || *in.ScanIndexForward
	index := ""
	if s.ix != nil {
		index = s.ix.Name
	}
	return e.run(ctx, s, func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		res, err := e.backend.Query(ctx, backend.QueryParams{Table: s.t.ref, Index: index, PK: pk, Lower: lower, Upper: upper,
			Forward: forward, After: after, Limit: limit})
		if err != nil {
			return nil, false, err
		}
		return res.Rows, res.More, nil
	})
}

func missingKeyName(kc *expr.KeyCondition, hash keyAttr, rng *keyAttr) string {
	for _, t := range kc.Terms {
		if t.Name == hash.Name {
			if rng != nil {
				return rng.Name
			}
		}
	}
	return hash.Name
}

// sortKeyRange turns a sort key condition into byte bounds.
func sortKeyRange(term expr.KeyTerm, ka keyAttr) (lower, upper *backend.Bound, err error) {
	enc := func(v attr.Value) ([]byte, error) {
		if err := checkKeyValue(v, ka, true); err != nil {
			return nil, err
		}
		b, _ := attr.KeyBytes(v)
		return b, nil
	}
	b0, err := enc(term.Values[0])
	if err != nil {
		return nil, nil, err
	}
	switch term.Op {
	case expr.EQ:
		return &backend.Bound{Key: b0, Inclusive: true}, &backend.Bound{Key: b0, Inclusive: true}, nil
	case expr.LT:
		return nil, &backend.Bound{Key: b0}, nil
	case expr.LE:
		return nil, &backend.Bound{Key: b0, Inclusive: true}, nil
	case expr.GT:
		return &backend.Bound{Key: b0}, nil, nil
	case expr.GE:
		return &backend.Bound{Key: b0, Inclusive: true}, nil, nil
	case expr.BETWEEN:
		b1, err := enc(term.Values[1])
		if err != nil {
			return nil, nil, err
		}
		if bytes.Compare(b0, b1) > 0 {
			return nil, nil, validationf("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: {%s:%s}, upper bound operand: AttributeValue: {%s:%s}",
				term.Values[0].Type, valueText(term.Values[0]), term.Values[1].Type, valueText(term.Values[1]))
		}
		return &backend.Bound{Key: b0, Inclusive: true}, &backend.Bound{Key: b1, Inclusive: true}, nil
	case expr.BEGINS_WITH:
		if ka.Type == attr.N {
			return nil, nil, validationf("Invalid KeyConditionExpression: Incorrect operand type for operator or function; operator or function: begins_with, operand type: N")
		}
		lower = &backend.Bound{Key: b0, Inclusive: true}
		if succ := attr.PrefixSuccessor(b0); succ != nil {
			upper = &backend.Bound{Key: succ}
		}
		return lower, upper, nil
	}
	return nil, nil, validationf("Query key condition not supported")
}

func valueText(v attr.Value) string {
	switch v.Type {
	case attr.S, attr.N:
		return v.Str
	default:
		return fmt.Sprint(string(attr.AppendValue(nil, v)))
	}
}

// Scan reads a table or index, optionally one segment of it.
func (e *Engine) Scan(ctx context.Context, account string, in *ScanInput) (*QueryOutput, error) {
	if err := checkExprParams(
		[]param{{"ProjectionExpression", in.ProjectionExpression != nil}, {"FilterExpression", in.FilterExpression != nil}},
		[]param{{"AttributesToGet", in.AttributesToGet != nil}, {"ScanFilter", in.ScanFilter != nil},
			{"ConditionalOperator", in.ConditionalOperator != ""}},
		in.ExpressionAttributeNames != nil, in.ExpressionAttributeValues != nil); err != nil {
		return nil, err
	}
	seg, total := 0, 0
	if in.Segment != nil || in.TotalSegments != nil {
		if in.TotalSegments == nil {
			return nil, validationf("The TotalSegments parameter is required but was not present in the request when Segment parameter is present")
		}
		if in.Segment == nil {
			return nil, validationf("The Segment parameter is required but was not present in the request when parameter TotalSegments is present")
		}
		if *in.TotalSegments < 1 || *in.TotalSegments > 1000000 {
			return nil, validationf("1 validation error detected: Value '%d' at 'totalSegments' failed to satisfy constraint: Member must have value %s", *in.TotalSegments,
				map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 1000000"}[*in.TotalSegments < 1])
		}
		if *in.Segment < 0 {
			return nil, validationf("1 validation error detected: Value '%d' at 'segment' failed to satisfy constraint: Member must have value greater than or equal to 0", *in.Segment)
		}
		if *in.Segment >= *in.TotalSegments {
			return nil, validationf("The Segment parameter is zero-based and must be less than parameter TotalSegments: Segment: %d is not less than TotalSegments: %d", *in.Segment, *in.TotalSegments)
		}
		seg, total = int(*in.Segment), int(*in.TotalSegments)
	}
	env, err := expr.NewEnv(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	s, err := e.prepareRead(ctx, account, in.TableName, in.IndexName, in.Select, in.Limit, in.FilterExpression,
		in.ProjectionExpression, in.AttributesToGet, in.ScanFilter, in.ConditionalOperator, env, in.ConsistentRead, in.ReturnConsumedCapacity)
	if err != nil {
		return nil, err
	}
	if err := env.CheckUnused(); err != nil {
		return nil, err
	}
	if err := s.startCursor(in.ExclusiveStartKey); err != nil {
		return nil, err
	}
	if s.after != nil && total > 1 {
		lo, hi := backend.SegmentRange(seg, total)
		if h := backend.KeyHash(s.after.PK); h < lo || h > hi {
			return nil, validationf("The provided Exclusive start key does not map to the provided segment")
		}
	}
	index := ""
	if s.ix != nil {
		index = s.ix.Name
	}
	return e.run(ctx, s, func(ctx context.Context, after *backend.Cursor, limit int) ([]backend.Row, bool, error) {
		res, err := e.backend.Scan(ctx, backend.ScanParams{Table: s.t.ref, Index: index, Segment: seg, TotalSegments: total, After: after, Limit: limit})
		if err != nil {
			return nil, false, err
		}
		return res.Rows, res.More, nil
	})
}
