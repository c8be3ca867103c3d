package engine

import (
	"context"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

// TestPartiQLLowering runs each statement kind through the engine and
// checks the item operations saw what the statement meant.
func TestPartiQLLowering(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t)
	name := "music"
	if _, err := e.CreateTable(ctx, "a", &CreateTableInput{TableName: &name, BillingMode: "PAY_PER_REQUEST",
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}, {AttributeName: "sk", KeyType: "RANGE"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}, {AttributeName: "sk", AttributeType: "N"}}}); err != nil {
		t.Fatal(err)
	}
	run := func(stmt string, params ...attr.Value) (*ExecuteStatementOutput, error) {
		return e.ExecuteStatement(ctx, "a", &ExecuteStatementInput{Statement: &stmt, Parameters: params})
	}
	must := func(stmt string, params ...attr.Value) *ExecuteStatementOutput {
		t.Helper()
		out, err := run(stmt, params...)
		if err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
		return out
	}
	for i := 1; i <= 3; i++ {
		must(`INSERT INTO music VALUE {'pk': 'a', 'sk': ?, 'tags': <<'x'>>}`, attr.MustNum(string(rune('0'+i))))
	}
	if _, err := run(`INSERT INTO music VALUE {'pk': 'a', 'sk': 1}`); code(err) != CodeDuplicateItem {
		t.Fatalf("duplicate INSERT: %v", err)
	}
	if out := must(`SELECT sk FROM music WHERE pk = 'a' AND sk >= 2 ORDER BY sk DESC`); len(out.Items) != 2 || string(out.Items[0]) != `{"sk":{"N":"3"}}` {
		t.Fatalf("query: %s", out.Items)
	}
	out := must(`UPDATE music SET n = 1 SET tags = set_add(tags, <<'y'>>) WHERE pk = 'a' AND sk = 2 RETURNING ALL NEW *`)
	if len(out.Items) != 1 || string(out.Items[0]) != `{"n":{"N":"1"},"pk":{"S":"a"},"sk":{"N":"2"},"tags":{"SS":["x","y"]}}` {
		t.Fatalf("update: %s", out.Items)
	}
	if _, err := run(`UPDATE music SET n = 1 WHERE pk = 'a' AND sk = 9`); code(err) != CodeConditionalCheckFailed {
		t.Fatalf("UPDATE of a missing item: %v", err)
	}
	if _, err := run(`UPDATE music SET n = 1 WHERE pk = 'a'`); err == nil || err.Error() != "ValidationException: "+msgIncompleteKey {
		t.Fatalf("UPDATE without the sort key: %v", err)
	}
	must(`DELETE FROM music WHERE pk = 'a' AND sk = 9 AND n = 5`)
	if _, err := run(`DELETE FROM music WHERE pk = 'a' AND sk = 2 AND n = 5`); code(err) != CodeConditionalCheckFailed {
		t.Fatalf("DELETE whose condition fails: %v", err)
	}
	if out := must(`SELECT * FROM music WHERE n = 1`); len(out.Items) != 1 {
		t.Fatalf("scan: %s", out.Items)
	}
}
