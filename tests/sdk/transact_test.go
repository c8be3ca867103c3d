package sdk

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestTransactOverlap: clients spread over every server (EXTENDDB_ENDPOINTS:
// several servers on one database) run TransactWriteItems that each add 1
// to two of five counters, so transactions overlap all the time. A
// transaction either applies to both items or is canceled (a conflict
// answers TransactionCanceledException with the reason
// TransactionConflict, as DynamoDB documents); in the end each counter is
// exactly the number of acknowledged transactions that named it: no update
// lost, none applied twice, none half applied.
func TestTransactOverlap(t *testing.T) {
	ctx := context.Background()
	name := createTable(t, client(t), false)
	const (
		items    = 5
		workers  = 8
		attempts = 15
	)
	keys := make([]string, items)
	for i := range keys {
		keys[i] = "counter-" + strconv.Itoa(i)
	}
	var mu sync.Mutex
	want := make([]int, items)
	applied, canceled := 0, 0
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := clientOf(t, endpoints[w%len(endpoints)])
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for a := 0; a < attempts; a++ {
				i := rng.IntN(items)
				j := (i + 1 + rng.IntN(items-1)) % items
				up := func(k int) types.TransactWriteItem {
					return types.TransactWriteItem{Update: &types.Update{TableName: aws.String(name),
						Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: keys[k]}},
						UpdateExpression:          aws.String("ADD n :one"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}}
				}
				_, err := c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{up(i), up(j)}})
				var tce *types.TransactionCanceledException
				switch {
				case err == nil:
					mu.Lock()
					want[i]++
					want[j]++
					applied++
					mu.Unlock()
				case errors.As(err, &tce):
					for _, r := range tce.CancellationReasons {
						if code := aws.ToString(r.Code); code != "None" && code != "TransactionConflict" {
							t.Errorf("worker %d: cancellation reason %q: %v", w, code, err)
						}
					}
					mu.Lock()
					canceled++
					mu.Unlock()
				default:
					t.Errorf("worker %d (%s): %v", w, endpoints[w%len(endpoints)], err)
				}
			}
		}(w)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	if applied == 0 {
		t.Fatalf("no transaction applied in %d attempts (%d canceled)", workers*attempts, canceled)
	}
	for k := range keys {
		out, err := client(t).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: keys[k]}}})
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		if n, ok := out.Item["n"].(*types.AttributeValueMemberN); ok {
			got, _ = strconv.Atoi(n.Value)
		}
		if got != want[k] {
			t.Errorf("%s = %d, want %d (the acknowledged transactions that named it)", keys[k], got, want[k])
		}
	}
	t.Logf("%d transactions applied, %d canceled, %d workers over %d server(s)", applied, canceled, workers, len(endpoints))
}
