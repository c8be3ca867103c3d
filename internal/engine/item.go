package engine

import (
	"context"
	"errors"
	"math"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/expr"
	"github.com/extenddb/extenddb/internal/storage"
)

var (
	errItemTooLarge       = validationf("Item size has exceeded the maximum allowed size")
	errUpdateItemTooLarge = validationf("Item size to update has exceeded the maximum allowed size")
)

func ccfError(old attr.Item, returnOld bool) *Error {
	e := newErr(CodeConditionalCheckFailed, "The conditional request failed")
	if returnOld && old != nil {
		e.Item = old
	}
	return e
}

func checkReturnValuesOnCCF(v string) (bool, error) {
	switch v {
	case "", "NONE":
		return false, nil
	case "ALL_OLD":
		return true, nil
	}
	return false, validationf("1 validation error detected: Value '%s' at 'returnValuesOnConditionCheckFailure' failed to satisfy constraint: Member must satisfy enum value set: [ALL_OLD, NONE]", v)
}

func checkReturnConsumed(v string) error {
	switch v {
	case "", "NONE", "TOTAL", "INDEXES":
		return nil
	}
	return validationf("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", v)
}

func checkReturnMetrics(v string) error {
	switch v {
	case "", "NONE", "SIZE":
		return nil
	}
	return validationf("1 validation error detected: Value '%s' at 'returnItemCollectionMetrics' failed to satisfy constraint: Member must satisfy enum value set: [SIZE, NONE]", v)
}

// writeOptions validates the members every single-item write shares and
// tells whether a failed condition returns the old item. oldOnly limits
// ReturnValues to NONE and ALL_OLD (PutItem, DeleteItem).
func writeOptions(returnValues string, oldOnly bool, rcc, rim, onCCF string) (bool, error) {
	switch returnValues {
	case "", "NONE", "ALL_OLD":
	case "UPDATED_OLD", "ALL_NEW", "UPDATED_NEW":
		if oldOnly {
			return false, validationf("ReturnValues can only be ALL_OLD or NONE")
		}
	default:
		return false, validationf("1 validation error detected: Value '%s' at 'returnValues' failed to satisfy constraint: Member must satisfy enum value set: [ALL_NEW, UPDATED_OLD, ALL_OLD, NONE, UPDATED_NEW]", returnValues)
	}
	if err := checkReturnConsumed(rcc); err != nil {
		return false, err
	}
	if err := checkReturnMetrics(rim); err != nil {
		return false, err
	}
	return checkReturnValuesOnCCF(onCCF)
}

// capacity returns the ConsumedCapacity to report, or nil.
func capacity(mode, table string, units float64, write bool) *ConsumedCapacity {
	return consumed{table: units}.report(mode, table, splitNone)
}

// writeCapacity reports a single-item write: on the table, the units of
// the larger of the item before and after the write (newSize; 0 for a
// delete), plus what the write cost its secondary indexes.
func writeCapacity(mode string, t *table, newSize int, res *storage.WriteItemResult) (*ConsumedCapacity, error) {
	if !wantsCapacity(mode) {
		return nil, nil
	}
	c := consumed{table: writeUnits(max(newSize, oldSize(res)))}
	if err := c.addWrite(t, res, 1); err != nil {
		return nil, err
	}
	return c.report(mode, t.name(), splitNone), nil
}

// oldSize is the item size of a write's old item, 0 when absent.
func oldSize(res *storage.WriteItemResult) int {
	if res == nil || res.Old == nil {
		return 0
	}
	return int(statsSize(res.Old))
}

func writeUnits(size int) float64 {
	u := math.Ceil(float64(size) / 1024)
	if u < 1 {
		u = 1
	}
	return u
}

func readUnits(size int, consistent bool) float64 {
	u := math.Ceil(float64(size) / 4096)
	if u < 1 {
		u = 1
	}
	if !consistent {
		u /= 2
	}
	return u
}

// decodeStored decodes an item the backend returned.
func decodeStored(b []byte) (attr.Item, error) {
	if b == nil {
		return nil, nil
	}
	it, err := attr.DecodeItem(b)
	if err != nil {
		return nil, errors.New("stored item is not valid DynamoDB-JSON: " + err.Error())
	}
	return it, nil
}

// writeRequest checks what PutItem, DeleteItem and UpdateItem check
// first, in DynamoDB's order: the table name, the item or key (member,
// given when not null), then the return and metrics options (oldOnly:
// ReturnValues allows only NONE and ALL_OLD). It answers the table name
// and whether a failed condition returns the old item.
func writeRequest(tableName *string, member string, given bool, returnValues string, oldOnly bool, rcc, rim, onCCF string) (string, bool, error) {
	name, err := requireTableName(tableName)
	if err != nil {
		return "", false, err
	}
	if !given {
		return "", false, validationf("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
	}
	returnOldOnCCF, err := writeOptions(returnValues, oldOnly, rcc, rim, onCCF)
	if err != nil {
		return "", false, err
	}
	return name, returnOldOnCCF, nil
}

// keyTarget loads the table a DeleteItem or UpdateItem names and encodes
// the key it is given; streamKeys is the key's JSON for the change record
// (nil when the table logs none: no stream, point-in-time recovery off).
func (e *Engine) keyTarget(ctx context.Context, account, name string, key attr.Item) (t *table, pk, sk, streamKeys []byte, err error) {
	if t, err = e.loadTable(ctx, account, name); err != nil {
		return nil, nil, nil, nil, err
	}
	if pk, sk, err = t.keyParam(key); err != nil {
		return nil, nil, nil, nil, err
	}
	if t.logs() {
		streamKeys = attr.EncodeItem(key)
	}
	return t, pk, sk, streamKeys, nil
}

// putItem writes an item.
func (e *Engine) putItem(ctx context.Context, account string, in *PutItemInput) (*ItemOutput, error) {
	name, returnOldOnCCF, err := writeRequest(in.TableName, "item", in.Item != nil, in.ReturnValues, true,
		in.ReturnConsumedCapacity, in.ReturnItemCollectionMetrics, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	cond, err := e.writeCondition(in.ConditionExpression, in.Expected, in.ConditionalOperator, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
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
	res, err := e.writeItem(ctx, t, keys, storage.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Blind: !readOld, Fn: func(oldRaw []byte) (storage.Change, error) {
		var old attr.Item
		if needOld && oldRaw != nil {
			var err error
			if old, err = decodeStored(oldRaw); err != nil {
				return storage.Change{}, err
			}
		}
		if cond != nil && !cond.Eval(old) {
			return storage.Change{}, ccfError(old, returnOldOnCCF)
		}
		return storage.Change{Op: storage.Put, Item: raw, DeleteIndex: t.indexKeys(old), PutIndex: entries}, nil
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

// writeItem runs a storage write and retries once with a fresh table when
// the cached table incarnation was deleted meanwhile.
// With a stream on the table, the write also stores its record (keys is
// the item's keys JSON, see streamed).
func (e *Engine) writeItem(ctx context.Context, t *table, keys []byte, p storage.WriteItemParams) (*storage.WriteItemResult, error) {
	res, err := e.backend.WriteItem(ctx, e.streamed(t, p, keys, false))
	if e.missing(err, t.ref.Account, t.ref.Name) {
		return nil, notFound(t.ref.Name)
	}
	if err == nil && t.stream != nil {
		e.countLogged(*res)
	}
	return res, err
}

// writeCondition parses a write's condition (expression or legacy).
func (e *Engine) writeCondition(condExpr *string, expected map[string]ExpectedAttributeValue, condOp string,
	names map[string]string, values map[string]attr.Value) (*expr.Condition, error) {
	if err := checkExprParams([]param{{"ConditionExpression", condExpr != nil}}, []param{{"Expected", expected != nil}},
		names != nil, values != nil); err != nil {
		return nil, err
	}
	if expected != nil {
		return legacyExpected(expected, condOp)
	}
	if condOp != "" {
		return nil, validationf("ConditionalOperator can only be used when Expected is specified")
	}
	env, err := expr.NewEnv(names, values)
	if err != nil {
		return nil, err
	}
	var cond *expr.Condition
	if condExpr != nil {
		if cond, err = expr.ParseCondition(expr.KindCondition, *condExpr, env); err != nil {
			return nil, err
		}
	}
	if err := env.CheckUnused(); err != nil {
		return nil, err
	}
	return cond, nil
}

// GetItem reads an item.
func (e *Engine) GetItem(ctx context.Context, account string, in *GetItemInput) (*GetItemOutput, error) {
	name, err := requireTableName(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.Key == nil {
		return nil, validationf("1 validation error detected: Value null at 'key' failed to satisfy constraint: Member must not be null")
	}
	if err := checkReturnConsumed(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	proj, err := e.projection(in.ProjectionExpression, in.AttributesToGet, in.ExpressionAttributeNames, nil)
	if err != nil {
		return nil, err
	}
	t, err := e.loadTable(ctx, account, name)
	if err != nil {
		return nil, err
	}
	pk, sk, err := t.keyParam(in.Key)
	if err != nil {
		return nil, err
	}
	consistent := in.ConsistentRead != nil && *in.ConsistentRead
	res, err := e.backend.GetItem(ctx, storage.GetItemParams{Table: t.ref, PK: pk, SK: sk, Eventual: !consistent})
	if err != nil {
		if e.missing(err, account, name) {
			return nil, notFound(name)
		}
		return nil, err
	}
	out := &GetItemOutput{}
	size := 0
	if res.Item != nil {
		if proj == nil {
			out.Item = res.Item
			if in.ReturnConsumedCapacity != "" && in.ReturnConsumedCapacity != "NONE" {
				it, err := decodeStored(res.Item)
				if err != nil {
					return nil, err
				}
				size = attr.ItemSize(it)
			}
		} else {
			it, err := decodeStored(res.Item)
			if err != nil {
				return nil, err
			}
			size = attr.ItemSize(it)
			out.Item = attr.EncodeItem(proj.Apply(it))
		}
	}
	out.ConsumedCapacity = capacity(in.ReturnConsumedCapacity, name, readUnits(size, consistent), false)
	return out, nil
}

// projection parses a ProjectionExpression or legacy AttributesToGet;
// nil means the whole item. With env nil a fresh environment over names
// is used and checked for unused names.
func (e *Engine) projection(pe *string, toGet []string, names map[string]string, env *expr.Env) (projector, error) {
	if err := checkExprParams([]param{{"ProjectionExpression", pe != nil}}, []param{{"AttributesToGet", toGet != nil}},
		env == nil && names != nil, false); err != nil {
		return nil, err
	}
	if toGet != nil {
		if len(toGet) == 0 {
			return nil, validationf("1 validation error detected: Value '[]' at 'attributesToGet' failed to satisfy constraint: Member must have length greater than or equal to 1")
		}
		seen := map[string]bool{}
		for _, n := range toGet {
			if err := attr.CheckName(n); err != nil {
				return nil, err
			}
			if seen[n] {
				return nil, validationf("One or more parameter values were invalid: Duplicate value in attribute name: %s", n)
			}
			seen[n] = true
		}
		return namesProjection(toGet), nil
	}
	own := env == nil
	if own && pe == nil && names != nil {
		return nil, validationf("ExpressionAttributeNames can only be specified when using expressions")
	}
	if own {
		var err error
		if env, err = expr.NewEnv(names, nil); err != nil {
			return nil, err
		}
	}
	var p projector
	if pe != nil {
		pp, err := expr.ParseProjection(*pe, env)
		if err != nil {
			return nil, err
		}
		p = pp
	}
	if own {
		if err := env.CheckUnused(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// deleteItem deletes an item.
func (e *Engine) deleteItem(ctx context.Context, account string, in *DeleteItemInput) (*ItemOutput, error) {
	name, returnOldOnCCF, err := writeRequest(in.TableName, "key", in.Key != nil, in.ReturnValues, true,
		in.ReturnConsumedCapacity, in.ReturnItemCollectionMetrics, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	cond, err := e.writeCondition(in.ConditionExpression, in.Expected, in.ConditionalOperator, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	t, pk, sk, keys, err := e.keyTarget(ctx, account, name, in.Key)
	if err != nil {
		return nil, err
	}
	res, err := e.writeItem(ctx, t, keys, storage.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Fn: func(oldRaw []byte) (storage.Change, error) {
		old, err := decodeStored(oldRaw)
		if err != nil {
			return storage.Change{}, err
		}
		if cond != nil && !cond.Eval(old) {
			return storage.Change{}, ccfError(old, returnOldOnCCF)
		}
		if old == nil {
			return storage.Change{Op: storage.Keep}, nil
		}
		return t.deleteChange(old), nil
	}})
	if err != nil {
		return nil, err
	}
	out := &ItemOutput{}
	if res.Old != nil && in.ReturnValues == "ALL_OLD" {
		if out.Attributes, err = decodeStored(res.Old); err != nil {
			return nil, err
		}
	}
	if out.ConsumedCapacity, err = writeCapacity(in.ReturnConsumedCapacity, t, 0, res); err != nil {
		return nil, err
	}
	return out, nil
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
	var cond *expr.Condition
	var upd *expr.Update
	if err := checkExprParams(
		[]param{{"UpdateExpression", in.UpdateExpression != nil}, {"ConditionExpression", in.ConditionExpression != nil}},
		[]param{{"AttributeUpdates", in.AttributeUpdates != nil}, {"Expected", in.Expected != nil}},
		in.ExpressionAttributeNames != nil, in.ExpressionAttributeValues != nil); err != nil {
		return nil, err
	}
	if in.AttributeUpdates != nil || in.Expected != nil {
		if in.Expected != nil {
			if cond, err = legacyExpected(in.Expected, in.ConditionalOperator); err != nil {
				return nil, err
			}
		}
		if in.AttributeUpdates != nil {
			if upd, err = legacyUpdates(in.AttributeUpdates); err != nil {
				return nil, err
			}
		}
	} else {
		if in.ConditionalOperator != "" {
			return nil, validationf("ConditionalOperator can only be used when Expected is specified")
		}
		env, err := expr.NewEnv(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
		if err != nil {
			return nil, err
		}
		if in.UpdateExpression != nil {
			if upd, err = expr.ParseUpdate(*in.UpdateExpression, env); err != nil {
				return nil, err
			}
		}
		if in.ConditionExpression != nil {
			if cond, err = expr.ParseCondition(expr.KindCondition, *in.ConditionExpression, env); err != nil {
				return nil, err
			}
		}
		if err := env.CheckUnused(); err != nil {
			return nil, err
		}
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
	keyItem := attr.Item(in.Key)
	res, err := e.writeItem(ctx, t, keys, storage.WriteItemParams{Table: t.ref, PK: pk, SK: sk, Fn: func(oldRaw []byte) (storage.Change, error) {
		old, err := decodeStored(oldRaw)
		if err != nil {
			return storage.Change{}, err
		}
		if cond != nil && !cond.Eval(old) {
			return storage.Change{}, ccfError(old, returnOldOnCCF)
		}
		base := old
		if base == nil {
			base = keyItem.Clone()
		}
		n := base
		if upd != nil {
			if n, err = upd.Apply(base); err != nil {
				return storage.Change{}, err
			}
		}
		if old == nil && removesOnly(upd) {
			// DynamoDB creates no item for an update that only removes
			// (its paths are still checked, as on an empty item).
			return storage.Change{Op: storage.Keep}, nil
		}
		if attr.ItemSize(n) > attr.MaxItemSize {
			return storage.Change{}, errUpdateItemTooLarge
		}
		raw := attr.EncodeItem(n)
		return t.putChange(old, n, raw)
	}})
	if err != nil {
		return nil, err
	}
	// The write function returns what it decided; the new item is read
	// back from the applied Change, decoded only when the answer needs it.
	var newItem attr.Item
	newSize := 0
	if res.Change.Op == storage.Put {
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
