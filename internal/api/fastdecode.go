package api

import (
	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/engine"
)

// fastDecode decodes the common shapes of the item requests (PutItem,
// GetItem, UpdateItem, DeleteItem, ExecuteStatement) with attr's parser in one pass: each
// member's name exactly as the API spells it, each at most once, no
// nulls, nothing else. encoding/json would first validate the whole body,
// then skip over the item to find its end, then hand it to attr's parser:
// three passes over the item's bytes, about a tenth of a PutItem's server
// CPU. It returns false, leaving v to be reset and decoded by
// encoding/json, for any body it does not handle — so that the result
// and the error of every request are those encoding/json gives.
func fastDecode(body []byte, v any) bool {
	switch in := v.(type) {
	case *engine.PutItemInput:
		return decodePutItem(body, in)
	case *engine.ExecuteStatementInput:
		return decodeExecuteStatement(body, in)
	case *engine.GetItemInput:
		return decodeGetItem(body, in)
	case *engine.UpdateItemInput:
		return decodeUpdateItem(body, in)
	case *engine.DeleteItemInput:
		return decodeDeleteItem(body, in)
	}
	return false
}

// decodePutItem decodes a PutItem request's members.
func decodePutItem(body []byte, in *engine.PutItemInput) bool {
	return decodeFields(body, func(r *attr.ObjectReader, name string) bool {
		switch name {
		case "TableName":
			return strPtr(r, &in.TableName)
		case "Item":
			return item(r, &in.Item)
		case "ConditionExpression":
			return strPtr(r, &in.ConditionExpression)
		case "ExpressionAttributeNames":
			return names(r, &in.ExpressionAttributeNames)
		case "ExpressionAttributeValues":
			return values(r, &in.ExpressionAttributeValues)
		case "ReturnValues":
			return str(r, &in.ReturnValues)
		case "ReturnConsumedCapacity":
			return str(r, &in.ReturnConsumedCapacity)
		case "ReturnItemCollectionMetrics":
			return str(r, &in.ReturnItemCollectionMetrics)
		case "ReturnValuesOnConditionCheckFailure":
			return str(r, &in.ReturnValuesOnConditionCheckFailure)
		}
		return false
	})
}

// decodeExecuteStatement decodes an ExecuteStatement request's members.
func decodeExecuteStatement(body []byte, in *engine.ExecuteStatementInput) bool {
	return decodeFields(body, func(r *attr.ObjectReader, name string) bool {
		switch name {
		case "Statement":
			return strPtr(r, &in.Statement)
		case "Parameters":
			l, ok := r.ValueList()
			in.Parameters = l
			return ok
		case "ConsistentRead":
			b, ok := r.Bool()
			in.ConsistentRead = &b
			return ok
		case "NextToken":
			return strPtr(r, &in.NextToken)
		case "ReturnConsumedCapacity":
			return str(r, &in.ReturnConsumedCapacity)
		case "ReturnValuesOnConditionCheckFailure":
			return str(r, &in.ReturnValuesOnConditionCheckFailure)
		}
		return false
	})
}

// decodeGetItem decodes a GetItem request's members.
func decodeGetItem(body []byte, in *engine.GetItemInput) bool {
	return decodeFields(body, func(r *attr.ObjectReader, name string) bool {
		switch name {
		case "TableName":
			return strPtr(r, &in.TableName)
		case "Key":
			return item(r, &in.Key)
		case "ProjectionExpression":
			return strPtr(r, &in.ProjectionExpression)
		case "ExpressionAttributeNames":
			return names(r, &in.ExpressionAttributeNames)
		case "ConsistentRead":
			b, ok := r.Bool()
			in.ConsistentRead = &b
			return ok
		case "ReturnConsumedCapacity":
			return str(r, &in.ReturnConsumedCapacity)
		}
		return false
	})
}

// decodeUpdateItem decodes an UpdateItem request's members.
func decodeUpdateItem(body []byte, in *engine.UpdateItemInput) bool {
	return decodeFields(body, func(r *attr.ObjectReader, name string) bool {
		switch name {
		case "TableName":
			return strPtr(r, &in.TableName)
		case "Key":
			return item(r, &in.Key)
		case "UpdateExpression":
			return strPtr(r, &in.UpdateExpression)
		case "ConditionExpression":
			return strPtr(r, &in.ConditionExpression)
		case "ExpressionAttributeNames":
			return names(r, &in.ExpressionAttributeNames)
		case "ExpressionAttributeValues":
			return values(r, &in.ExpressionAttributeValues)
		case "ReturnValues":
			return str(r, &in.ReturnValues)
		case "ReturnConsumedCapacity":
			return str(r, &in.ReturnConsumedCapacity)
		case "ReturnItemCollectionMetrics":
			return str(r, &in.ReturnItemCollectionMetrics)
		case "ReturnValuesOnConditionCheckFailure":
			return str(r, &in.ReturnValuesOnConditionCheckFailure)
		}
		return false
	})
}

// decodeDeleteItem decodes a DeleteItem request's members.
func decodeDeleteItem(body []byte, in *engine.DeleteItemInput) bool {
	return decodeFields(body, func(r *attr.ObjectReader, name string) bool {
		switch name {
		case "TableName":
			return strPtr(r, &in.TableName)
		case "Key":
			return item(r, &in.Key)
		case "ConditionExpression":
			return strPtr(r, &in.ConditionExpression)
		case "ExpressionAttributeNames":
			return names(r, &in.ExpressionAttributeNames)
		case "ExpressionAttributeValues":
			return values(r, &in.ExpressionAttributeValues)
		case "ReturnValues":
			return str(r, &in.ReturnValues)
		case "ReturnConsumedCapacity":
			return str(r, &in.ReturnConsumedCapacity)
		case "ReturnItemCollectionMetrics":
			return str(r, &in.ReturnItemCollectionMetrics)
		case "ReturnValuesOnConditionCheckFailure":
			return str(r, &in.ReturnValuesOnConditionCheckFailure)
		}
		return false
	})
}

// maxFastMembers bounds the members a fast-path body may have (each
// handled name at most once: a repeated one goes to encoding/json).
const maxFastMembers = 16

// decodeFields reads the members of body's object with field, which
// returns false for a member it does not handle.
func decodeFields(body []byte, field func(*attr.ObjectReader, string) bool) bool {
	r, ok := attr.NewObjectReader(body)
	if !ok {
		return false
	}
	var seen [maxFastMembers]string
	n := 0
	for {
		name, more, ok := r.Next()
		if !ok {
			return false
		}
		if !more {
			break
		}
		if n == maxFastMembers || r.Null() {
			return false
		}
		for _, s := range seen[:n] {
			if s == name {
				return false
			}
		}
		seen[n] = name
		n++
		if !field(r, name) {
			return false
		}
	}
	return r.End()
}

func str(r *attr.ObjectReader, dst *string) bool {
	s, ok := r.String()
	*dst = s
	return ok
}

func strPtr(r *attr.ObjectReader, dst **string) bool {
	s, ok := r.String()
	*dst = &s
	return ok
}

func item(r *attr.ObjectReader, dst *attr.Item) bool {
	it, ok := r.Item()
	*dst = it
	return ok
}

func names(r *attr.ObjectReader, dst *map[string]string) bool {
	m, ok := r.Strings()
	*dst = m
	return ok
}

func values(r *attr.ObjectReader, dst *map[string]attr.Value) bool {
	m, ok := r.Values()
	*dst = m
	return ok
}

// resetInput zeroes what a fast decode that gave up may have filled.
func resetInput(v any) {
	switch in := v.(type) {
	case *engine.PutItemInput:
		*in = engine.PutItemInput{}
	case *engine.GetItemInput:
		*in = engine.GetItemInput{}
	case *engine.ExecuteStatementInput:
		*in = engine.ExecuteStatementInput{}
	case *engine.UpdateItemInput:
		*in = engine.UpdateItemInput{}
	case *engine.DeleteItemInput:
		*in = engine.DeleteItemInput{}
	}
}
