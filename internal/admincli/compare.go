package admincli

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// CompareTables compares two tables, possibly on two servers: key schema,
// attribute definitions, billing mode and throughput, secondary indexes
// (names, keys, projections) and every item. It prints each difference
// and answers whether the tables are identical. It holds one hash per item
// of the first table in memory.
func CompareTables(ctx context.Context, a *Client, tableA string, b *Client, tableB string, w io.Writer) (bool, error) {
	same := true
	diff := func(format string, args ...any) {
		same = false
		fmt.Fprintf(w, "differs: "+format+"\n", args...)
	}
	da, err := describeShape(ctx, a, tableA)
	if err != nil {
		return false, err
	}
	db, err := describeShape(ctx, b, tableB)
	if err != nil {
		return false, err
	}
	for _, k := range []string{"KeySchema", "AttributeDefinitions", "BillingMode", "ProvisionedThroughput", "GlobalSecondaryIndexes", "LocalSecondaryIndexes"} {
		ja, _ := json.Marshal(da[k])
		jb, _ := json.Marshal(db[k])
		if string(ja) != string(jb) {
			diff("%s: %s vs %s", k, ja, jb)
		}
	}
	counts := map[[32]byte]int{}
	na, err := scanHashes(ctx, a, tableA, func(h [32]byte) { counts[h]++ })
	if err != nil {
		return false, err
	}
	extraB := 0
	nb, err := scanHashes(ctx, b, tableB, func(h [32]byte) {
		if counts[h] > 0 {
			counts[h]--
		} else {
			extraB++
		}
	})
	if err != nil {
		return false, err
	}
	missingB := 0
	for _, c := range counts {
		missingB += c
	}
	if missingB > 0 || extraB > 0 {
		diff("items: %d in %s, %d in %s; %d only in the first, %d only in the second", na, tableA, nb, tableB, missingB, extraB)
	}
	if same {
		fmt.Fprintf(w, "identical: %s and %s (%d items, key schema, indexes, billing)\n", tableA, tableB, na)
	}
	return same, nil
}

// describeShape is the part of a description a restore must reproduce.
func describeShape(ctx context.Context, c *Client, table string) (map[string]any, error) {
	var out struct{ Table map[string]any }
	if err := c.Call(ctx, "DescribeTable", map[string]any{"TableName": table}, &out); err != nil {
		return nil, err
	}
	t := out.Table
	shape := map[string]any{"KeySchema": t["KeySchema"]}
	defs, _ := t["AttributeDefinitions"].([]any)
	sort.Slice(defs, func(i, j int) bool {
		return fmt.Sprint(defs[i].(map[string]any)["AttributeName"]) < fmt.Sprint(defs[j].(map[string]any)["AttributeName"])
	})
	shape["AttributeDefinitions"] = defs
	billing := "PROVISIONED"
	if bm, ok := t["BillingModeSummary"].(map[string]any); ok && bm["BillingMode"] != nil {
		billing = fmt.Sprint(bm["BillingMode"])
	}
	shape["BillingMode"] = billing
	if pt, ok := t["ProvisionedThroughput"].(map[string]any); ok {
		shape["ProvisionedThroughput"] = []any{pt["ReadCapacityUnits"], pt["WriteCapacityUnits"]}
	}
	idx := func(key string) []any {
		list, _ := t[key].([]any)
		var out []any
		for _, x := range list {
			m := x.(map[string]any)
			out = append(out, []any{m["IndexName"], m["KeySchema"], m["Projection"]})
		}
		sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i].([]any)[0]) < fmt.Sprint(out[j].([]any)[0]) })
		return out
	}
	shape["GlobalSecondaryIndexes"] = idx("GlobalSecondaryIndexes")
	shape["LocalSecondaryIndexes"] = idx("LocalSecondaryIndexes")
	return shape, nil
}

// scanHashes scans a table (strongly consistent pages) and hands over the
// hash of each item's canonical JSON (object keys sorted).
func scanHashes(ctx context.Context, c *Client, table string, fn func([32]byte)) (int, error) {
	in := map[string]any{"TableName": table, "ConsistentRead": true}
	n := 0
	for {
		var out struct {
			Items            []map[string]any
			LastEvaluatedKey map[string]any
		}
		if err := c.Call(ctx, "Scan", in, &out); err != nil {
			return n, err
		}
		for _, it := range out.Items {
			b, err := json.Marshal(it)
			if err != nil {
				return n, err
			}
			fn(sha256.Sum256(b))
			n++
		}
		if len(out.LastEvaluatedKey) == 0 {
			return n, nil
		}
		in["ExclusiveStartKey"] = out.LastEvaluatedKey
	}
}
