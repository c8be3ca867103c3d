package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// PutItem writes an item.
func (e *Engine) PutItem(ctx context.Context, account string, in *PutItemInput) (*ItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*ItemOutput, error) { return e.putItem(ctx, account, in) })
}

// putItem writes an item.
func (e *Engine) putItem(ctx context.Context, account string, in *PutItemInput) (*ItemOutput, error) {
	name, returnOldOnCCF, cond, err := e.writePrologue(in.TableName, "item", in.Item != nil, in.ReturnValues,
		in.ReturnConsumedCapacity, in.ReturnItemCollectionMetrics, in.ReturnValuesOnConditionCheckFailure,
		in.ConditionExpression, in.Expected, in.ConditionalOperator, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	t, err := e.loadTable(ctx, account, name)
	if err != nil {
		return nil, err
	}
	pk, sk, err := t.itemKey(in.Item)
	if err != nil {
		return nil, err
	}
	size := attr.ItemSize(in.Item)
	if size > attr.MaxItemSize {
		return nil, errItemTooLarge
	}
	raw := attr.EncodeItem(in.Item)
	entries, err := t.indexEntries(in.Item, raw)
	if err != nil {
		return nil, err
	}
	needOld := cond != nil || t.hasIndexes() || in.ReturnValues == "ALL_OLD"
	// Capacity is charged on the larger of the old and new item.
	readOld := needOld || wantsCapacity(in.ReturnConsumedCapacity)
	var keys []byte
	if t.logs() {
		keys = t.keysJSON(in.Item)
	}
	res, err := e.writeItem(ctx, t, keys, backend.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Blind: !readOld, Fn: func(oldRaw []byte) (backend.Change, error) {
		var old attr.Item
		if needOld && oldRaw != nil {
			var err error
			if old, err = decodeStored(oldRaw); err != nil {
				return backend.Change{}, err
			}
		}
		if cond != nil && !cond.Eval(old) {
			return backend.Change{}, ccfError(old, returnOldOnCCF)
		}
		return backend.Change{Op: backend.Put, Item: raw, DeleteIndex: t.indexKeys(old), PutIndex: entries}, nil
	}})
	if err != nil {
		return nil, err
	}
	out := &ItemOutput{}
	if out.ConsumedCapacity, err = writeCapacity(in.ReturnConsumedCapacity, t, size, res); err != nil {
		return nil, err
	}
	if in.ReturnValues == "ALL_OLD" && res.Old != nil {
		if out.Attributes, err = decodeStored(res.Old); err != nil {
			return nil, err
		}
	}
	return out, nil
}
