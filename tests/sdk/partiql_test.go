package sdk

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestExecuteStatement: aws-sdk-go-v2's ExecuteStatement, its paginator,
// BatchExecuteStatement and ExecuteTransaction with typed errors.
func TestExecuteStatement(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	name := createTable(t, c, true)
	ins := `INSERT INTO "` + name + `" VALUE {'pk': ?, 'sk': ?, 'v': 'x'}`
	for i := 0; i < 7; i++ {
		if _, err := c.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(ins),
			Parameters: []types.AttributeValue{&types.AttributeValueMemberS{Value: "p"}, &types.AttributeValueMemberN{Value: itoa(i)}}}); err != nil {
			t.Fatalf("INSERT %d: %v", i, err)
		}
	}
	_, err := c.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{Statement: aws.String(ins),
		Parameters: []types.AttributeValue{&types.AttributeValueMemberS{Value: "p"}, &types.AttributeValueMemberN{Value: "0"}}})
	var dup *types.DuplicateItemException
	if !errors.As(err, &dup) {
		t.Fatalf("duplicate INSERT: %v, want DuplicateItemException", err)
	}
	// Paging: NextToken through Limit 3 pages, sort key descending.
	var got []string
	var token *string
	for pages := 0; ; pages++ {
		out, err := c.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{
			Statement: aws.String(`SELECT sk FROM "` + name + `" WHERE pk = 'p' ORDER BY sk DESC`), Limit: aws.Int32(3), NextToken: token})
		if err != nil {
			t.Fatalf("SELECT page %d: %v", pages, err)
		}
		for _, it := range out.Items {
			got = append(got, it["sk"].(*types.AttributeValueMemberN).Value)
		}
		if token = out.NextToken; token == nil {
			break
		}
	}
	if want := "6543210"; join(got) != want {
		t.Fatalf("paged SELECT: %v, want %s", got, want)
	}
	// An UPDATE whose condition fails.
	_, err = c.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{
		Statement: aws.String(`UPDATE "` + name + `" SET v = 'y' WHERE pk = 'p' AND sk = 1 AND v = 'nope'`)})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("UPDATE: %v, want ConditionalCheckFailedException", err)
	}
	// A batch of reads and a write transaction.
	b, err := c.BatchExecuteStatement(ctx, &dynamodb.BatchExecuteStatementInput{Statements: []types.BatchStatementRequest{
		{Statement: aws.String(`SELECT v FROM "` + name + `" WHERE pk = 'p' AND sk = 2`)},
		{Statement: aws.String(`SELECT v FROM "` + name + `" WHERE pk = 'p'`)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if v := b.Responses[0].Item["v"].(*types.AttributeValueMemberS).Value; v != "x" || b.Responses[1].Error == nil ||
		b.Responses[1].Error.Code != types.BatchStatementErrorCodeEnumValidationError {
		t.Fatalf("batch: %+v %+v", b.Responses[0], b.Responses[1].Error)
	}
	_, err = c.ExecuteTransaction(ctx, &dynamodb.ExecuteTransactionInput{TransactStatements: []types.ParameterizedStatement{
		{Statement: aws.String(`UPDATE "` + name + `" SET v = 'z' WHERE pk = 'p' AND sk = 3`)},
		{Statement: aws.String(`INSERT INTO "` + name + `" VALUE {'pk': 'p', 'sk': 4}`)},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[1].Code) != "DuplicateItem" {
		t.Fatalf("transaction: %v", err)
	}
}

func itoa(i int) string { return string(rune('0' + i)) }

func join(s []string) string {
	out := ""
	for _, x := range s {
		out += x
	}
	return out
}
