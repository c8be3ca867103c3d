package api

import (
	"bytes"
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/extenddb/extenddb/internal/engine"
)

// Large replies: BatchGetItem (up to 16 MB of items) and TransactGetItems
// (up to 100 items). Their reservation is taken once the request is
// decoded, from the number of items it asks for, and covers the items
// read plus their encoded copy; they are encoded into one buffer of the
// exact size (encoding/json would copy them twice, through buffers that
// double as they grow).

const (
	maxItemReserve    = 400<<10 + 16<<10
	maxBatchGetReply  = 16<<20 + 1<<20
	itemsAndEncodings = 2
)

type budgetKey struct{}

// reserveDecoded grows the request's reservation to what the decoded
// request can produce, waiting for room; errThrottled when there is none.
func reserveDecoded(ctx context.Context, in any) error {
	rb, _ := ctx.Value(budgetKey{}).(*decodedBudget)
	if rb == nil {
		return nil
	}
	var n int64
	switch v := in.(type) {
	case *engine.BatchGetItemInput:
		keys := 0
		for _, ka := range v.RequestItems {
			keys += len(ka.Keys)
		}
		n = min(int64(keys)*maxItemReserve, maxBatchGetReply)
	case *engine.TransactGetItemsInput:
		n = int64(len(v.TransactItems)) * maxItemReserve
	case *engine.ExecuteTransactionInput:
		n = int64(len(v.TransactStatements)) * maxItemReserve
	case *engine.BatchExecuteStatementInput:
		n = int64(len(v.Statements)) * maxItemReserve
	default:
		return nil
	}
	n *= itemsAndEncodings
	if n <= rb.res.held {
		return nil
	}
	if !rb.res.grow(ctx, n-rb.res.held, rb.wait) {
		return errThrottled
	}
	return nil
}

// decodedBudget is what reserveDecoded needs from the request.
type decodedBudget struct {
	res  *reservation
	wait time.Duration
}

// appendReply encodes the large replies; ok is false for other outputs.
func appendReply(dst []byte, out any) (b []byte, ok bool, err error) {
	switch o := out.(type) {
	case *engine.BatchGetItemOutput:
		b, err = appendBatchGet(dst, o)
		return b, true, err
	case *engine.TransactGetItemsOutput:
		b, err = appendTransactGet(dst, o)
		return b, true, err
	}
	return dst, false, nil
}

func appendBatchGet(dst []byte, o *engine.BatchGetItemOutput) ([]byte, error) {
	names := make([]string, 0, len(o.Responses))
	size := 64
	for n, items := range o.Responses {
		names = append(names, n)
		size += len(n) + 8
		for _, it := range items {
			size += len(it) + 1
		}
	}
	sort.Strings(names)
	rest, err := marshal(struct {
		UnprocessedKeys  map[string]engine.KeysAndAttributes `json:"UnprocessedKeys"`
		ConsumedCapacity []engine.ConsumedCapacity           `json:"ConsumedCapacity,omitempty"`
	}{o.UnprocessedKeys, o.ConsumedCapacity})
	if err != nil {
		return dst, err
	}
	dst = grow(dst, size+len(rest))
	dst = append(dst, `{"Responses":{`...)
	for i, n := range names {
		if i > 0 {
			dst = append(dst, ',')
		}
		nb, _ := marshal(n)
		dst = append(dst, nb...)
		dst = append(dst, ":["...)
		for j, it := range o.Responses[n] {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, it...)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, "},"...)
	return append(dst, rest[1:]...), nil // rest without its '{'
}

func appendTransactGet(dst []byte, o *engine.TransactGetItemsOutput) ([]byte, error) {
	size := 64
	for _, r := range o.Responses {
		size += len(r.Item) + 16
	}
	var cc []byte
	if len(o.ConsumedCapacity) > 0 {
		var err error
		if cc, err = marshal(o.ConsumedCapacity); err != nil {
			return dst, err
		}
	}
	dst = grow(dst, size+len(cc))
	dst = append(dst, `{"Responses":[`...)
	for i, r := range o.Responses {
		if i > 0 {
			dst = append(dst, ',')
		}
		if len(r.Item) == 0 {
			dst = append(dst, "{}"...)
			continue
		}
		dst = append(dst, `{"Item":`...)
		dst = append(dst, r.Item...)
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if cc != nil {
		dst = append(dst, `,"ConsumedCapacity":`...)
		dst = append(dst, cc...)
	}
	return append(dst, '}'), nil
}

// marshal encodes v as the responses are encoded: without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// grow makes room for n more bytes at once.
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst
	}
	out := make([]byte, len(dst), len(dst)+n)
	copy(out, dst)
	return out
}
