package engine

import (
	"context"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/expr"
)

// UpdateItem updates (or creates) an item.
func (e *Engine) UpdateItem(ctx context.Context, account string, in *UpdateItemInput) (*ItemOutput, error) {
	return fenced(ctx, func(ctx context.Context) (*ItemOutput, error) { return e.updateItem(ctx, account, in) })
}

// removesOnly reports whether an update has actions and all of them remove
// attributes or set elements (REMOVE, DELETE): such an update of a missing
// item creates nothing.
func removesOnly(upd *expr.Update) bool {
	if upd == nil {
		return false
	}
	acts := upd.Actions()
	if len(acts) == 0 {
		return false
	}
	for _, a := range acts {
		if a.Kind != expr.ActionRemove && a.Kind != expr.ActionDelete {
			return false
		}
	}
	return true
}

// updateItem updates (or creates) an item.
func (e *Engine) updateItem(ctx context.Context, account string, in *UpdateItemInput) (*ItemOutput, error) {
	name, returnOldOnCCF, err := writeRequest(in.TableName, "key", in.Key != nil, in.ReturnValues, false,
		in.ReturnConsumedCapacity, in.ReturnItemCollectionMetrics, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	cond, upd, err := parseUpdateItemExprs(in)
	if err != nil {
		return nil, err
	}
	t, pk, sk, keys, err := e.keyTarget(ctx, account, name, in.Key)
	if err != nil {
		return nil, err
	}
	if upd != nil {
		for _, p := range upd.UpdatedPaths() {
			if len(p) > 0 && t.isKeyAttr(p[0].Name) {
				return nil, invalidParam("Cannot update attribute %s. This attribute is part of the key", p[0].Name)
			}
		}
	}
	res, err := e.writeItem(ctx, t, keys, backend.WriteItemParams{Table: t.ref, PK: pk, SK: sk,
		Fn: updateChange(t, attr.Item(in.Key), cond, upd, returnOldOnCCF)})
	if err != nil {
		return nil, err
	}
	return updateItemOutput(in, t, upd, res)
}

// parseUpdateItemExprs reads an UpdateItem's condition and update, from
// either the expressions or the legacy Expected and AttributeUpdates
// (never both).
func parseUpdateItemExprs(in *UpdateItemInput) (cond *expr.Condition, upd *expr.Update, err error) {
	if err := checkExprParams(
		[]param{{"UpdateExpression", in.UpdateExpression != nil}, {"ConditionExpression", in.ConditionExpression != nil}},
		[]param{{"AttributeUpdates", in.AttributeUpdates != nil}, {"Expected", in.Expected != nil}},
		in.ExpressionAttributeNames != nil, in.ExpressionAttributeValues != nil); err != nil {
		return nil, nil, err
	}
	if in.Expected == nil {
		if err := checkCondOp(in.ConditionalOperator, 0); err != nil {
			return nil, nil, err
		}
	}
	if in.AttributeUpdates != nil || in.Expected != nil {
		if in.Expected != nil {
			if cond, err = legacyExpected(in.Expected, in.ConditionalOperator); err != nil {
				return nil, nil, err
			}
		}
		if in.AttributeUpdates != nil {
			if upd, err = legacyUpdates(in.AttributeUpdates); err != nil {
				return nil, nil, err
			}
		}
		return cond, upd, nil
	}
	env, err := expr.NewEnv(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, nil, err
	}
	if in.UpdateExpression != nil {
		if upd, err = expr.ParseUpdate(*in.UpdateExpression, env); err != nil {
			return nil, nil, err
		}
	}
	if in.ConditionExpression != nil {
		if cond, err = expr.ParseCondition(expr.KindCondition, *in.ConditionExpression, env); err != nil {
			return nil, nil, err
		}
	}
	if err := env.CheckUnused(); err != nil {
		return nil, nil, err
	}
	return cond, upd, nil
}

// updateChange is an UpdateItem's pure write function: the condition on
// the stored item, then the update applied to it (or to the key alone
// when there is none).
func updateChange(t *table, keyItem attr.Item, cond *expr.Condition, upd *expr.Update, returnOldOnCCF bool) func([]byte) (backend.Change, error) {
	return func(oldRaw []byte) (backend.Change, error) {
		old, err := decodeStored(oldRaw)
		if err != nil {
			return backend.Change{}, err
		}
		if cond != nil && !cond.Eval(old) {
			return backend.Change{}, ccfError(old, returnOldOnCCF)
		}
		base := old
		if base == nil {
			base = keyItem.Clone()
		}
		n := base
		if upd != nil {
			if n, err = upd.Apply(base); err != nil {
				return backend.Change{}, err
			}
		}
		if old == nil && removesOnly(upd) {
			// DynamoDB creates no item for an update that only removes
			// (its paths are still checked, as on an empty item).
			return backend.Change{Op: backend.Keep}, nil
		}
		if attr.ItemSize(n) > attr.MaxItemSize {
			return backend.Change{}, errUpdateItemTooLarge
		}
		raw := attr.EncodeItem(n)
		return t.putChange(old, n, raw)
	}
}

// updateItemOutput is an applied UpdateItem's answer: consumed capacity
// and the ReturnValues asked for.
func updateItemOutput(in *UpdateItemInput, t *table, upd *expr.Update, res *backend.WriteItemResult) (*ItemOutput, error) {
	// The write function returns what it decided; the new item is read
	// back from the applied Change, decoded only when the answer needs it.
	var newItem attr.Item
	var err error
	newSize := 0
	if res.Change.Op == backend.Put {
		if in.ReturnValues == "ALL_NEW" || in.ReturnValues == "UPDATED_NEW" {
			if newItem, err = decodeStored(res.Change.Item); err != nil {
				return nil, err
			}
		}
		if wantsCapacity(in.ReturnConsumedCapacity) {
			newSize = int(statsSize(res.Change.Item))
		}
	}
	out := &ItemOutput{}
	if out.ConsumedCapacity, err = writeCapacity(in.ReturnConsumedCapacity, t, newSize, res); err != nil {
		return nil, err
	}
	switch in.ReturnValues {
	case "ALL_OLD":
		if res.Old != nil {
			out.Attributes, _ = decodeStored(res.Old)
		}
	case "ALL_NEW":
		out.Attributes = newItem
	case "UPDATED_OLD", "UPDATED_NEW":
		if upd == nil {
			break
		}
		src := newItem
		if in.ReturnValues == "UPDATED_OLD" {
			src, _ = decodeStored(res.Old)
		}
		if src != nil {
			if p := expr.ProjectPaths(src, upd.UpdatedPaths()); len(p) > 0 {
				out.Attributes = p
			}
		}
	}
	return out, nil
}
