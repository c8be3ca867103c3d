package engine

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// Batch limits of DynamoDB.
const (
	maxBatchWrite = 25
	maxBatchGet   = 100
)

type PutRequest struct {
	Item attr.Item `json:"Item"`
}

type DeleteRequest struct {
	Key attr.Item `json:"Key"`
}

type WriteRequest struct {
	PutRequest    *PutRequest    `json:"PutRequest,omitempty"`
	DeleteRequest *DeleteRequest `json:"DeleteRequest,omitempty"`
}

type BatchWriteItemInput struct {
	RequestItems                map[string][]WriteRequest `json:"RequestItems"`
	ReturnConsumedCapacity      string                    `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics string                    `json:"ReturnItemCollectionMetrics"`
}

type BatchWriteItemOutput struct {
	UnprocessedItems map[string][]WriteRequest `json:"UnprocessedItems"`
	ConsumedCapacity []ConsumedCapacity        `json:"ConsumedCapacity,omitempty"`
}

type KeysAndAttributes struct {
	Keys                     []attr.Item       `json:"Keys"`
	ProjectionExpression     *string           `json:"ProjectionExpression,omitempty"`
	ExpressionAttributeNames map[string]string `json:"ExpressionAttributeNames,omitempty"`
	AttributesToGet          []string          `json:"AttributesToGet,omitempty"`
	ConsistentRead           *bool             `json:"ConsistentRead,omitempty"`
}

type BatchGetItemInput struct {
	RequestItems           map[string]KeysAndAttributes `json:"RequestItems"`
	ReturnConsumedCapacity string                       `json:"ReturnConsumedCapacity"`
}

type BatchGetItemOutput struct {
	Responses        map[string][]RawJSON         `json:"Responses"`
	UnprocessedKeys  map[string]KeysAndAttributes `json:"UnprocessedKeys"`
	ConsumedCapacity []ConsumedCapacity           `json:"ConsumedCapacity,omitempty"`
}

var errDuplicateKeys = validationf("Provided list of item keys contains duplicates")

// keySet holds the items (table and key) a batch or a transaction names,
// so that an item named twice is refused.
type keySet map[string]bool

// add adds an item; false when it is there already.
func (s keySet) add(t *table, pk, sk []byte) bool {
	id := t.ref.Name + "\x00" + string(pk) + "\x00" + string(sk)
	if s[id] {
		return false
	}
	s[id] = true
	return true
}

// checkRequestItems checks that a batch's RequestItems is there and not
// empty.
func checkRequestItems[V any](m map[string]V) error {
	if m == nil {
		return validationf("1 validation error detected: Value null at 'requestItems' failed to satisfy constraint: Member must not be null")
	}
	if len(m) == 0 {
		return validationf("1 validation error detected: Value '{}' at 'requestItems' failed to satisfy constraint: Member must have length greater than or equal to 1")
	}
	return nil
}

// countRequests checks each table name of a batch's RequestItems and
// that its requests (count answers how many; member names them in the
// error) are not empty, and answers the number of requests.
func countRequests[V any](m map[string]V, member string, count func(V) int) (int, error) {
	total := 0
	for name, v := range m {
		n := name
		if _, err := requireTableName(&n); err != nil {
			return 0, err
		}
		if count(v) == 0 {
			return 0, validationf("1 validation error detected: Value '[]' at 'requestItems.%s.%s' failed to satisfy constraint: Member must have length greater than or equal to 1", name, member)
		}
		total += count(v)
	}
	return total, nil
}

// batchWriteItem puts and deletes up to 25 items across tables. Every
// request is validated before anything is written; the writes are then
// applied in one backend transaction, so UnprocessedItems is always empty.
func (e *Engine) batchWriteItem(ctx context.Context, account string, in *BatchWriteItemInput) (*BatchWriteItemOutput, error) {
	if err := checkRequestItems(in.RequestItems); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := checkReturnMetrics(in.ReturnItemCollectionMetrics); err != nil {
		return nil, err
	}
	total, err := countRequests(in.RequestItems, "member", func(reqs []WriteRequest) int { return len(reqs) })
	if err != nil {
		return nil, err
	}
	if total > maxBatchWrite {
		return nil, validationf("Too many items requested for the BatchWriteItem call")
	}
	var ops []backend.WriteItemParams
	var opTables []*table // the table of each op
	var opNames []string  // and its name in the request
	var opSizes []int     // and the size of the item it puts (0 for a delete)
	wantCap := wantsCapacity(in.ReturnConsumedCapacity)
	seen := keySet{}
	units := map[string]float64{}
	for _, name := range sortedNames(in.RequestItems) {
		t, err := e.loadTable(ctx, account, name)
		if err != nil {
			if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
				return nil, newErr(CodeResourceNotFound, "Requested resource not found")
			}
			return nil, err
		}
		for _, r := range in.RequestItems[name] {
			if (r.PutRequest == nil) == (r.DeleteRequest == nil) {
				return nil, validationf("Supplied WriteRequest must contain exactly one of PutRequest or DeleteRequest")
			}
			var op backend.WriteItemParams
			size := 0
			if r.PutRequest != nil {
				op, size, err = e.batchPut(t, name, r.PutRequest.Item, wantCap, seen)
			} else {
				op, err = e.batchDelete(t, name, r.DeleteRequest.Key, seen)
			}
			if err != nil {
				return nil, err
			}
			units[name] = 0
			opTables = append(opTables, t)
			opNames = append(opNames, name)
			opSizes = append(opSizes, size)
			ops = append(ops, op)
		}
	}
	// Independent writes (BatchWriteItem is not atomic): one TransactWrite,
	// or one write each on a backend without multi-item transactions.
	res, err := e.writeEach(ctx, ops)
	if err != nil {
		if e.missing(err, account, slices.Collect(maps.Keys(in.RequestItems))...) {
			return nil, notFound("")
		}
		if se, ok := errors.AsType[*backend.Error](err); ok && se.Kind == backend.KindTransactionCanceled {
			for _, r := range se.Reasons {
				if r != nil {
					return nil, r
				}
			}
		}
		return nil, err
	}
	e.countLogged(res.Results...)
	out := &BatchWriteItemOutput{UnprocessedItems: map[string][]WriteRequest{}}
	if in.ReturnConsumedCapacity != "" && in.ReturnConsumedCapacity != "NONE" {
		if out.ConsumedCapacity, err = batchWriteCapacity(in.ReturnConsumedCapacity, units, opTables, opNames, opSizes, res.Results); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// batchPut checks one PutRequest of a BatchWriteItem on table t (name as
// the request names it) and returns its write and the item's size.
func (e *Engine) batchPut(t *table, name string, it attr.Item, wantCap bool, seen keySet) (backend.WriteItemParams, int, error) {
	if it == nil {
		return backend.WriteItemParams{}, 0, validationf("1 validation error detected: Value null at 'requestItems.%s.member.putRequest.item' failed to satisfy constraint: Member must not be null", name)
	}
	pk, sk, err := t.itemKey(it)
	if err != nil {
		return backend.WriteItemParams{}, 0, err
	}
	size := attr.ItemSize(it)
	if size > attr.MaxItemSize {
		return backend.WriteItemParams{}, 0, errItemTooLarge
	}
	if !seen.add(t, pk, sk) {
		return backend.WriteItemParams{}, 0, errDuplicateKeys
	}
	raw := attr.EncodeItem(it)
	entries, err := t.indexEntries(it, raw)
	if err != nil {
		return backend.WriteItemParams{}, 0, err
	}
	// Capacity is charged on the larger of the old and new item.
	var keys []byte
	if t.logs() {
		keys = t.keysJSON(it)
	}
	return e.streamed(t, backend.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Blind: !t.hasIndexes() && !wantCap, Fn: func(oldRaw []byte) (backend.Change, error) {
		var old attr.Item
		if t.hasIndexes() {
			var err error
			if old, err = decodeStored(oldRaw); err != nil {
				return backend.Change{}, err
			}
		}
		return backend.Change{Op: backend.Put, Item: raw, DeleteIndex: t.indexKeys(old), PutIndex: entries}, nil
	}}, keys, false), size, nil
}

// batchDelete checks one DeleteRequest of a BatchWriteItem on table t and
// returns its write.
func (e *Engine) batchDelete(t *table, name string, key attr.Item, seen keySet) (backend.WriteItemParams, error) {
	if key == nil {
		return backend.WriteItemParams{}, validationf("1 validation error detected: Value null at 'requestItems.%s.member.deleteRequest.key' failed to satisfy constraint: Member must not be null", name)
	}
	pk, sk, err := t.keyParam(key)
	if err != nil {
		return backend.WriteItemParams{}, err
	}
	if !seen.add(t, pk, sk) {
		return backend.WriteItemParams{}, errDuplicateKeys
	}
	var keys []byte
	if t.logs() {
		keys = attr.EncodeItem(key)
	}
	return e.streamed(t, backend.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Fn: func(oldRaw []byte) (backend.Change, error) {
		if oldRaw == nil {
			return backend.Change{Op: backend.Keep}, nil
		}
		old, err := decodeStored(oldRaw)
		if err != nil {
			return backend.Change{}, err
		}
		return t.deleteChange(old), nil
	}}, keys, false), nil
}

// batchWriteCapacity is the ConsumedCapacity of a BatchWriteItem, one
// entry per table in name order: op i wrote to opTables[i] (opNames[i] in
// the request) an item of opSizes[i] bytes (0 for a delete).
func batchWriteCapacity(mode string, units map[string]float64, opTables []*table, opNames []string, opSizes []int, results []backend.WriteItemResult) ([]ConsumedCapacity, error) {
	per := map[string]*consumed{}
	for name := range units {
		per[name] = &consumed{}
	}
	for i, t := range opTables {
		var r *backend.WriteItemResult
		if i < len(results) {
			r = &results[i]
		}
		c := per[opNames[i]]
		c.table += writeUnits(max(opSizes[i], oldSize(r)))
		if err := c.addWrite(t, r, 1); err != nil {
			return nil, err
		}
	}
	var out []ConsumedCapacity
	for _, name := range sortedNames(units) {
		out = append(out, *per[name].report(mode, name, splitNone))
	}
	return out, nil
}

// maxBatchGetResponse is the response size after which remaining keys go to
// UnprocessedKeys (16 MB).
const maxBatchGetResponse = 16 * 1024 * 1024

// BatchGetItem reads up to 100 items across tables from one consistent
// instant of the backend.
func (e *Engine) BatchGetItem(ctx context.Context, account string, in *BatchGetItemInput) (*BatchGetItemOutput, error) {
	if err := checkRequestItems(in.RequestItems); err != nil {
		return nil, err
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	total, err := countRequests(in.RequestItems, "member.keys", func(ka KeysAndAttributes) int { return len(ka.Keys) })
	if err != nil {
		return nil, err
	}
	if total > maxBatchGet {
		return nil, validationf("Too many items requested for the BatchGetItem call")
	}
	type want struct {
		table string
		proj  projector
		key   attr.Item
	}
	var wants []want
	var keys []backend.GetItemParams
	names := sortedNames(in.RequestItems)
	for _, name := range names {
		ka := in.RequestItems[name]
		t, err := e.loadTable(ctx, account, name)
		if err != nil {
			if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
				return nil, newErr(CodeResourceNotFound, "Requested resource not found")
			}
			return nil, err
		}
		proj, err := e.projection(ka.ProjectionExpression, ka.AttributesToGet, ka.ExpressionAttributeNames, nil)
		if err != nil {
			return nil, err
		}
		seen := keySet{}
		for _, k := range ka.Keys {
			pk, sk, err := t.keyParam(k)
			if err != nil {
				return nil, err
			}
			if !seen.add(t, pk, sk) {
				return nil, errDuplicateKeys
			}
			wants = append(wants, want{table: name, proj: proj, key: k})
			keys = append(keys, backend.GetItemParams{Table: t.ref, PK: pk, SK: sk})
		}
	}
	// Independent reads (BatchGetItem does not read from one instant):
	// one TransactGet, or one read each on a backend without it.
	res, err := e.readEach(ctx, keys)
	if err != nil {
		if e.missing(err, account, names...) {
			return nil, notFound("")
		}
		return nil, err
	}
	out := &BatchGetItemOutput{Responses: map[string][]RawJSON{}, UnprocessedKeys: map[string]KeysAndAttributes{}}
	for _, n := range names {
		out.Responses[n] = []RawJSON{}
	}
	units := map[string]float64{}
	size := 0
	for i, raw := range res.Items {
		w := wants[i]
		if size > maxBatchGetResponse {
			u := out.UnprocessedKeys[w.table]
			src := in.RequestItems[w.table]
			u.ProjectionExpression, u.ExpressionAttributeNames, u.AttributesToGet, u.ConsistentRead =
				src.ProjectionExpression, src.ExpressionAttributeNames, src.AttributesToGet, src.ConsistentRead
			u.Keys = append(u.Keys, w.key)
			out.UnprocessedKeys[w.table] = u
			continue
		}
		if raw == nil {
			units[w.table] += 0.5
			continue
		}
		if w.proj != nil {
			it, err := decodeStored(raw)
			if err != nil {
				return nil, err
			}
			raw = attr.EncodeItem(w.proj.Apply(it))
		}
		size += len(raw)
		units[w.table] += readUnits(len(raw), false)
		out.Responses[w.table] = append(out.Responses[w.table], raw)
	}
	if in.ReturnConsumedCapacity != "" && in.ReturnConsumedCapacity != "NONE" {
		for _, n := range sortedNames(units) {
			out.ConsumedCapacity = append(out.ConsumedCapacity, *capacity(in.ReturnConsumedCapacity, n, units[n], false))
		}
	}
	return out, nil
}

// BatchWriteItem puts and deletes up to 25 items across tables (see
// batchWriteItem).
func (e *Engine) BatchWriteItem(ctx context.Context, account string, in *BatchWriteItemInput) (*BatchWriteItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*BatchWriteItemOutput, error) { return e.batchWriteItem(ctx, account, in) })
}
