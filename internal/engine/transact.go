package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/expr"
)

// Transaction limits of DynamoDB.
const (
	maxTransactItems     = 100
	maxTransactBytes     = 4 * 1024 * 1024
	idempotencyWindow    = 10 * time.Minute
	maxClientTokenLength = 36
)

type ConditionCheck struct {
	TableName                           *string               `json:"TableName"`
	Key                                 attr.Item             `json:"Key"`
	ConditionExpression                 *string               `json:"ConditionExpression"`
	ExpressionAttributeNames            map[string]string     `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues           map[string]attr.Value `json:"ExpressionAttributeValues"`
	ReturnValuesOnConditionCheckFailure string                `json:"ReturnValuesOnConditionCheckFailure"`
}

type TransactPut struct {
	TableName                           *string               `json:"TableName"`
	Item                                attr.Item             `json:"Item"`
	ConditionExpression                 *string               `json:"ConditionExpression"`
	ExpressionAttributeNames            map[string]string     `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues           map[string]attr.Value `json:"ExpressionAttributeValues"`
	ReturnValuesOnConditionCheckFailure string                `json:"ReturnValuesOnConditionCheckFailure"`
}

type TransactDelete = ConditionCheck

type TransactUpdate struct {
	TableName                           *string               `json:"TableName"`
	Key                                 attr.Item             `json:"Key"`
	UpdateExpression                    *string               `json:"UpdateExpression"`
	ConditionExpression                 *string               `json:"ConditionExpression"`
	ExpressionAttributeNames            map[string]string     `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues           map[string]attr.Value `json:"ExpressionAttributeValues"`
	ReturnValuesOnConditionCheckFailure string                `json:"ReturnValuesOnConditionCheckFailure"`
}

type TransactWriteItem struct {
	ConditionCheck *ConditionCheck `json:"ConditionCheck"`
	Put            *TransactPut    `json:"Put"`
	Delete         *TransactDelete `json:"Delete"`
	Update         *TransactUpdate `json:"Update"`
}

type TransactWriteItemsInput struct {
	TransactItems               []TransactWriteItem `json:"TransactItems"`
	ClientRequestToken          *string             `json:"ClientRequestToken"`
	ReturnConsumedCapacity      string              `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics string              `json:"ReturnItemCollectionMetrics"`
}

type TransactWriteItemsOutput struct {
	ConsumedCapacity []ConsumedCapacity `json:"ConsumedCapacity,omitempty"`
}

type TransactGet struct {
	TableName                *string           `json:"TableName"`
	Key                      attr.Item         `json:"Key"`
	ProjectionExpression     *string           `json:"ProjectionExpression"`
	ExpressionAttributeNames map[string]string `json:"ExpressionAttributeNames"`
}

type TransactGetItem struct {
	Get *TransactGet `json:"Get"`
}

type TransactGetItemsInput struct {
	TransactItems          []TransactGetItem `json:"TransactItems"`
	ReturnConsumedCapacity string            `json:"ReturnConsumedCapacity"`
}

type ItemResponse struct {
	Item RawJSON `json:"Item,omitempty"`
}

type TransactGetItemsOutput struct {
	Responses        []ItemResponse     `json:"Responses"`
	ConsumedCapacity []ConsumedCapacity `json:"ConsumedCapacity,omitempty"`
}

// idempotency remembers ClientRequestTokens for ten minutes.
type idempotency struct {
	mu sync.Mutex
	m  map[string]tokenEntry
}

type tokenEntry struct {
	hash [32]byte
	at   time.Time
	out  *TransactWriteItemsOutput
}

func (c *idempotency) lookup(key string, hash [32]byte, now time.Time) (*TransactWriteItemsOutput, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]tokenEntry{}
	}
	for k, v := range c.m {
		if now.Sub(v.at) > idempotencyWindow {
			delete(c.m, k)
		}
	}
	if v, ok := c.m[key]; ok {
		if v.hash != hash {
			return nil, false, newErr(CodeIdempotentMismatch, "Request token already used with different request parameters")
		}
		if v.out == nil {
			return nil, false, newErr(CodeTransactionInProgress, "Another transaction with the same ClientRequestToken is in progress")
		}
		return v.out, true, nil
	}
	c.m[key] = tokenEntry{hash: hash, at: now}
	return nil, false, nil
}

func (c *idempotency) finish(key string, out *TransactWriteItemsOutput, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !ok {
		delete(c.m, key)
		return
	}
	if v, found := c.m[key]; found {
		v.out = out
		c.m[key] = v
	}
}

// txOp is one parsed transaction action.
type txOp struct {
	t      *table
	kind   string
	pk, sk []byte
	cond   *expr.Condition
	upd    *expr.Update
	item   attr.Item
	raw    []byte
	key    attr.Item
	retOld bool
}

func parseEnvCond(kind expr.Kind, s *string, names map[string]string, values map[string]attr.Value, upd *string) (*expr.Condition, *expr.Update, error) {
	env, err := expr.NewEnv(names, values)
	if err != nil {
		return nil, nil, err
	}
	var u *expr.Update
	if upd != nil {
		if u, err = expr.ParseUpdate(*upd, env); err != nil {
			return nil, nil, err
		}
	}
	var c *expr.Condition
	if s != nil {
		if c, err = expr.ParseCondition(kind, *s, env); err != nil {
			return nil, nil, err
		}
	}
	if err := env.CheckUnused(); err != nil {
		return nil, nil, err
	}
	return c, u, nil
}

// TransactWriteItems applies up to 100 actions all-or-nothing.
func (e *Engine) TransactWriteItems(ctx context.Context, account string, in *TransactWriteItemsInput) (*TransactWriteItemsOutput, error) {
	if in.TransactItems == nil {
		return nil, validationf("1 validation error detected: Value null at 'transactItems' failed to satisfy constraint: Member must not be null")
	}
	if len(in.TransactItems) == 0 || len(in.TransactItems) > maxTransactItems {
		return nil, validationf("1 validation error detected: Value '%s' at 'transactItems' failed to satisfy constraint: Member must have length %s",
			"[...]", map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 100"}[len(in.TransactItems) == 0])
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := checkReturnMetrics(in.ReturnItemCollectionMetrics); err != nil {
		return nil, err
	}
	var tokenKey string
	if in.ClientRequestToken != nil {
		tok := *in.ClientRequestToken
		if len(tok) < 1 || len(tok) > maxClientTokenLength {
			return nil, validationf("1 validation error detected: Value '%s' at 'clientRequestToken' failed to satisfy constraint: Member must have length less than or equal to 36", tok)
		}
		body, _ := json.Marshal(in.TransactItems)
		h := sha256.Sum256(body)
		tokenKey = account + "\x00" + tok
		out, done, err := e.idem.lookup(tokenKey, h, e.now())
		if err != nil {
			return nil, err
		}
		if done {
			return out, nil
		}
	}
	out, err := fenced(ctx, func(ctx context.Context) (*TransactWriteItemsOutput, error) { return e.transactWrite(ctx, account, in) })
	if tokenKey != "" {
		e.idem.finish(tokenKey, out, err == nil)
	}
	return out, err
}

func (e *Engine) transactWrite(ctx context.Context, account string, in *TransactWriteItemsInput) (*TransactWriteItemsOutput, error) {
	ops, err := e.prepareTxOps(ctx, account, in.TransactItems)
	if err != nil {
		return nil, err
	}
	params := make([]backend.WriteItemParams, len(ops))
	marks := txnMarks(ops)
	for i, op := range ops {
		params[i] = e.txWriteParams(op, marks)
	}
	res, err := e.backend.TransactWrite(ctx, backend.TransactWriteParams{Ops: params})
	if err != nil {
		return nil, e.txWriteError(err, account, ops)
	}
	e.countLogged(res.Results...)
	out := &TransactWriteItemsOutput{}
	if in.ReturnConsumedCapacity != "" && in.ReturnConsumedCapacity != "NONE" {
		if out.ConsumedCapacity, err = txConsumed(in.ReturnConsumedCapacity, ops, res.Results); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// prepareTxOps checks each of a transaction's items and binds it to its
// table and key; no two may name one item, and the items put may total
// at most 4 MB.
func (e *Engine) prepareTxOps(ctx context.Context, account string, items []TransactWriteItem) ([]*txOp, error) {
	ops := make([]*txOp, len(items))
	seen := keySet{}
	totalSize := 0
	for i, ti := range items {
		op, tableName, err := parseTxItem(i, ti)
		if err != nil {
			return nil, err
		}
		size, err := e.bindTxOp(ctx, account, i, op, tableName)
		if err != nil {
			return nil, err
		}
		totalSize += size
		if !seen.add(op.t, op.pk, op.sk) {
			return nil, validationf("Transaction request cannot include multiple operations on one item")
		}
		ops[i] = op
	}
	if totalSize > maxTransactBytes {
		return nil, validationf("Transaction request size exceeded the maximum allowed size of 4 MB")
	}
	return ops, nil
}

// parseTxItem reads the i-th (from 0) transaction item: exactly one of
// check, put, delete or update, with its expressions parsed. It returns
// the table name the item gives.
func parseTxItem(i int, ti TransactWriteItem) (*txOp, *string, error) {
	n := 0
	for _, set := range []bool{ti.ConditionCheck != nil, ti.Put != nil, ti.Delete != nil, ti.Update != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, nil, validationf("TransactItems can only contain one of Check, Put, Update or Delete")
	}
	op := &txOp{}
	var tableName *string
	var err error
	var retCCF string
	switch {
	case ti.ConditionCheck != nil:
		x := ti.ConditionCheck
		op.kind, tableName, op.key, retCCF = "check", x.TableName, x.Key, x.ReturnValuesOnConditionCheckFailure
		if x.ConditionExpression == nil {
			return nil, nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.conditionCheck.conditionExpression' failed to satisfy constraint: Member must not be null", i+1)
		}
		op.cond, _, err = parseEnvCond(expr.KindCondition, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, nil)
	case ti.Put != nil:
		x := ti.Put
		op.kind, tableName, op.item, retCCF = "put", x.TableName, x.Item, x.ReturnValuesOnConditionCheckFailure
		if x.Item == nil {
			return nil, nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.put.item' failed to satisfy constraint: Member must not be null", i+1)
		}
		op.cond, _, err = parseEnvCond(expr.KindCondition, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, nil)
	case ti.Delete != nil:
		x := ti.Delete
		op.kind, tableName, op.key, retCCF = "delete", x.TableName, x.Key, x.ReturnValuesOnConditionCheckFailure
		op.cond, _, err = parseEnvCond(expr.KindCondition, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, nil)
	case ti.Update != nil:
		x := ti.Update
		op.kind, tableName, op.key, retCCF = "update", x.TableName, x.Key, x.ReturnValuesOnConditionCheckFailure
		if x.UpdateExpression == nil {
			return nil, nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.update.updateExpression' failed to satisfy constraint: Member must not be null", i+1)
		}
		op.cond, op.upd, err = parseEnvCond(expr.KindCondition, x.ConditionExpression, x.ExpressionAttributeNames, x.ExpressionAttributeValues, x.UpdateExpression)
	}
	if err != nil {
		return nil, nil, err
	}
	if op.retOld, err = checkReturnValuesOnCCF(retCCF); err != nil {
		return nil, nil, err
	}
	return op, tableName, nil
}

// bindTxOp loads the i-th op's table and computes its key (and, for a
// put, the encoded item and its index entries). It returns the size of
// the item put, 0 for the other kinds.
func (e *Engine) bindTxOp(ctx context.Context, account string, i int, op *txOp, tableName *string) (int, error) {
	name, err := requireTableName(tableName)
	if err != nil {
		return 0, err
	}
	if op.t, err = e.loadTable(ctx, account, name); err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
			return 0, newErr(CodeResourceNotFound, "Requested resource not found")
		}
		return 0, err
	}
	size := 0
	if op.kind == "put" {
		if op.pk, op.sk, err = op.t.itemKey(op.item); err != nil {
			return 0, err
		}
		size = attr.ItemSize(op.item)
		if size > attr.MaxItemSize {
			return 0, errItemTooLarge
		}
		op.raw = attr.EncodeItem(op.item)
		if _, err := op.t.indexEntries(op.item, op.raw); err != nil {
			return 0, err
		}
	} else {
		if op.key == nil {
			return 0, validationf("1 validation error detected: Value null at 'transactItems.%d.member.key' failed to satisfy constraint: Member must not be null", i+1)
		}
		if op.pk, op.sk, err = op.t.keyParam(op.key); err != nil {
			return 0, err
		}
	}
	if op.upd != nil {
		for _, p := range op.upd.UpdatedPaths() {
			if len(p) > 0 && op.t.isKeyAttr(p[0].Name) {
				return 0, invalidParam("Cannot update attribute %s. This attribute is part of the key", p[0].Name)
			}
		}
	}
	return size, nil
}

// txWriteParams is the storage write of one transaction op, logged to
// the table's change log (a check is not) under the transaction's mark.
func (e *Engine) txWriteParams(op *txOp, marks map[int64]*txnMark) backend.WriteItemParams {
	var keys []byte
	if op.t.logs() && op.kind != "check" {
		if op.kind == "put" {
			keys = op.t.keysJSON(op.item)
		} else {
			keys = attr.EncodeItem(op.key)
		}
	}
	mark := marks[op.t.ref.ID]
	if op.kind == "check" {
		mark = nil
	}
	return e.logged(op.t, backend.WriteItemParams{Table: op.t.ref, PK: op.pk, SK: op.sk, Fn: op.change}, keys, false, mark)
}

// change is the op's pure function from the stored item to the change
// it makes: the condition first, then the check, put, delete or update.
func (op *txOp) change(oldRaw []byte) (backend.Change, error) {
	old, err := decodeStored(oldRaw)
	if err != nil {
		return backend.Change{}, err
	}
	if op.cond != nil && !op.cond.Eval(old) {
		return backend.Change{}, ccfError(old, op.retOld)
	}
	switch op.kind {
	case "check":
		return backend.Change{Op: backend.Keep}, nil
	case "put":
		return op.t.putChange(old, op.item, op.raw)
	case "delete":
		if old == nil {
			return backend.Change{Op: backend.Keep}, nil
		}
		return op.t.deleteChange(old), nil
	default:
		base := old
		if base == nil {
			base = op.key.Clone()
		}
		n, err := op.upd.Apply(base)
		if err != nil {
			return backend.Change{}, err
		}
		if old == nil && removesOnly(op.upd) {
			return backend.Change{Op: backend.Keep}, nil
		}
		if attr.ItemSize(n) > attr.MaxItemSize {
			return backend.Change{}, errItemTooLarge
		}
		return op.t.putChange(old, n, attr.EncodeItem(n))
	}
}

// txWriteError is the answer to a transaction the backend refused: a
// table gone, a cancellation with its reasons, or a conflict with
// another transaction.
func (e *Engine) txWriteError(err error, account string, ops []*txOp) error {
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.t.ref.Name
	}
	if e.missing(err, account, names...) {
		return notFound("")
	}
	var se *backend.Error
	if errors.As(err, &se) {
		switch se.Kind {
		case backend.KindTransactionCanceled:
			return cancellation(se.Reasons)
		case backend.KindTransactionConflict:
			return conflictCancellation(len(ops), se.Reasons)
		}
	}
	return err
}

// txConsumed is a committed transaction's consumed capacity per table. A
// transactional write costs twice a plain one, on the table and on each
// index it changes.
func txConsumed(mode string, ops []*txOp, results []backend.WriteItemResult) ([]ConsumedCapacity, error) {
	units := map[string]*consumed{}
	for i, op := range ops {
		c := units[op.t.ref.Name]
		if c == nil {
			c = &consumed{}
			units[op.t.ref.Name] = c
		}
		size := attr.ItemSize(op.item)
		if i < len(results) && op.kind != "check" {
			// the larger of the item before and after the write
			r := &results[i]
			if r.Change.Op == backend.Put {
				size = max(size, int(statsSize(r.Change.Item)))
			}
			size = max(size, oldSize(r))
			if err := c.addWrite(op.t, r, 2); err != nil {
				return nil, err
			}
		}
		c.table += 2 * writeUnits(size)
	}
	var out []ConsumedCapacity
	for _, n := range sortedNames(units) {
		out = append(out, *units[n].report(mode, n, splitWrite))
	}
	return out, nil
}

// conflictCancellation answers a transaction that met another one in
// progress: DynamoDB cancels it (TransactionCanceledException) with the
// reason TransactionConflict, not TransactionConflictException (that one
// is for a single-item write that meets a transaction). When the backend
// says which operations met the other transaction (reasons of kind
// KindTransactionConflict), those carry the reason and the others None;
// when it cannot tell (a serialization failure of the whole transaction),
// every operation carries it.
func conflictCancellation(n int, reasons []error) error {
	known := false
	for _, r := range reasons {
		if backend.IsKind(r, backend.KindTransactionConflict) {
			known = true
		}
	}
	rs := make([]CancellationReason, n)
	codes := make([]string, n)
	for i := range rs {
		rs[i] = CancellationReason{Code: "None"}
		if !known || (i < len(reasons) && backend.IsKind(reasons[i], backend.KindTransactionConflict)) {
			rs[i] = CancellationReason{Code: "TransactionConflict", Message: "Transaction is ongoing for the item"}
		}
		codes[i] = rs[i].Code
	}
	e := newErr(CodeTransactionCanceled, "Transaction cancelled, please refer cancellation reasons for specific reasons [%s]", strings.Join(codes, ", "))
	e.Reasons = rs
	return e
}

// cancellation builds TransactionCanceledException from per-op errors.
func cancellation(reasons []error) error {
	rs := make([]CancellationReason, len(reasons))
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		switch x := r.(type) {
		case nil:
			rs[i] = CancellationReason{Code: "None"}
		case *Error:
			switch x.Code {
			case CodeConditionalCheckFailed:
				rs[i] = CancellationReason{Code: "ConditionalCheckFailed", Message: x.Message, Item: x.Item}
			case CodeValidation:
				rs[i] = CancellationReason{Code: "ValidationError", Message: x.Message}
			default:
				rs[i] = CancellationReason{Code: string(x.Code), Message: x.Message}
			}
		case *attr.Error:
			rs[i] = CancellationReason{Code: "ValidationError", Message: x.Message}
		default:
			return r
		}
		codes[i] = rs[i].Code
	}
	e := newErr(CodeTransactionCanceled, "Transaction cancelled, please refer cancellation reasons for specific reasons [%s]", strings.Join(codes, ", "))
	e.Reasons = rs
	return e
}

// TransactGetItems reads up to 100 items from one consistent instant.
func (e *Engine) TransactGetItems(ctx context.Context, account string, in *TransactGetItemsInput) (*TransactGetItemsOutput, error) {
	if in.TransactItems == nil {
		return nil, validationf("1 validation error detected: Value null at 'transactItems' failed to satisfy constraint: Member must not be null")
	}
	if len(in.TransactItems) == 0 || len(in.TransactItems) > maxTransactItems {
		return nil, validationf("1 validation error detected: Value '[...]' at 'transactItems' failed to satisfy constraint: Member must have length %s",
			map[bool]string{true: "greater than or equal to 1", false: "less than or equal to 100"}[len(in.TransactItems) == 0])
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	keys := make([]backend.GetItemParams, len(in.TransactItems))
	projs := make([]projector, len(in.TransactItems))
	tables := make([]string, len(in.TransactItems))
	seen := keySet{}
	for i, ti := range in.TransactItems {
		g := ti.Get
		if g == nil {
			return nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.get' failed to satisfy constraint: Member must not be null", i+1)
		}
		name, err := requireTableName(g.TableName)
		if err != nil {
			return nil, err
		}
		if g.Key == nil {
			return nil, validationf("1 validation error detected: Value null at 'transactItems.%d.member.get.key' failed to satisfy constraint: Member must not be null", i+1)
		}
		t, err := e.loadTable(ctx, account, name)
		if err != nil {
			if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
				return nil, newErr(CodeResourceNotFound, "Requested resource not found")
			}
			return nil, err
		}
		pk, sk, err := t.keyParam(g.Key)
		if err != nil {
			return nil, err
		}
		if !seen.add(t, pk, sk) {
			return nil, validationf("Transaction request cannot include multiple operations on one item")
		}
		if projs[i], err = e.projection(g.ProjectionExpression, nil, g.ExpressionAttributeNames, nil); err != nil {
			return nil, err
		}
		keys[i] = backend.GetItemParams{Table: t.ref, PK: pk, SK: sk}
		tables[i] = name
	}
	res, err := e.backend.TransactGet(ctx, backend.TransactGetParams{Keys: keys})
	if err != nil {
		if e.missing(err, account, tables...) {
			return nil, notFound("")
		}
		if backend.IsKind(err, backend.KindTransactionConflict) {
			var se *backend.Error
			errors.As(err, &se)
			return nil, conflictCancellation(len(keys), se.Reasons)
		}
		return nil, err
	}
	out := &TransactGetItemsOutput{Responses: make([]ItemResponse, len(res.Items))}
	units := map[string]float64{}
	for i, raw := range res.Items {
		units[tables[i]] += 2 * readUnits(len(raw), true)
		if raw == nil {
			continue
		}
		if projs[i] != nil {
			it, err := decodeStored(raw)
			if err != nil {
				return nil, err
			}
			raw = attr.EncodeItem(projs[i].Apply(it))
		}
		out.Responses[i].Item = raw
	}
	if in.ReturnConsumedCapacity != "" && in.ReturnConsumedCapacity != "NONE" {
		for _, n := range sortedNames(units) {
			out.ConsumedCapacity = append(out.ConsumedCapacity, *consumed{table: units[n]}.report(in.ReturnConsumedCapacity, n, splitRead))
		}
	}
	return out, nil
}

// txnMarks gives each PITR table of a transaction its marker: one
// transaction id, and the number of its write operations on the table
// (each writes exactly one record, see Engine.logged).
func txnMarks(ops []*txOp) map[int64]*txnMark {
	var marks map[int64]*txnMark
	var id [16]byte
	for _, op := range ops {
		if !op.t.pitr || op.kind == "check" {
			continue
		}
		if marks == nil {
			marks = map[int64]*txnMark{}
			_, _ = rand.Read(id[:])
		}
		m := marks[op.t.ref.ID]
		if m == nil {
			m = &txnMark{id: id}
			marks[op.t.ref.ID] = m
		}
		m.count++
	}
	return marks
}
