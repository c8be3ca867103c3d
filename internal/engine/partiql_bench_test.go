package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend/sqlite"
)

// BenchmarkPartiQL compares a PartiQL SELECT by key and UPDATE with the
// GetItem and UpdateItem they lower to, in process on an in-memory SQLite
// database (no HTTP, no JSON): the CPU the statement layer adds.
func BenchmarkPartiQL(b *testing.B) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, sqlite.Options{Memory: true, ItemSize: ItemSize})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	e := New(db, Options{})
	name := "bench"
	_, err = e.CreateTable(ctx, "a", &CreateTableInput{TableName: &name, BillingMode: "PAY_PER_REQUEST",
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}, {AttributeName: "sk", KeyType: "RANGE"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}, {AttributeName: "sk", AttributeType: "S"}}})
	if err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("x", 1000)
	for i := 0; i < 100; i++ {
		if _, err := e.PutItem(ctx, "a", &PutItemInput{TableName: &name, Item: attr.Item{"pk": attr.StrValue("p"),
			"sk": attr.StrValue(strconv.Itoa(i)), "payload": attr.StrValue(payload), "ver": attr.MustNum("0")}}); err != nil {
			b.Fatal(err)
		}
	}
	key := func(i int) attr.Item {
		return attr.Item{"pk": attr.StrValue("p"), "sk": attr.StrValue(strconv.Itoa(i % 100))}
	}
	sel := `SELECT * FROM "bench" WHERE pk = ? AND sk = ?`
	upd := `UPDATE "bench" SET payload = ? SET ver = ver + 1 WHERE pk = ? AND sk = ?`
	updExpr, names := "SET #p = :p ADD #v :one", map[string]string{"#p": "payload", "#v": "ver"}
	b.Run("getitem", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := e.GetItem(ctx, "a", &GetItemInput{TableName: &name, Key: key(i)}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("partiql-select", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			k := key(i)
			out, err := e.ExecuteStatement(ctx, "a", &ExecuteStatementInput{Statement: &sel, Parameters: []attr.Value{k["pk"], k["sk"]}})
			if err != nil || len(out.Items) != 1 {
				b.Fatal(err)
			}
		}
	})
	b.Run("updateitem", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if _, err := e.UpdateItem(ctx, "a", &UpdateItemInput{TableName: &name, Key: key(i), UpdateExpression: &updExpr,
				ExpressionAttributeNames: names, ExpressionAttributeValues: map[string]attr.Value{":p": attr.StrValue(payload), ":one": attr.MustNum("1")}}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("partiql-update", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			k := key(i)
			if _, err := e.ExecuteStatement(ctx, "a", &ExecuteStatementInput{Statement: &upd,
				Parameters: []attr.Value{attr.StrValue(payload), k["pk"], k["sk"]}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
