// Package sdk drives a live extenddb server through aws-sdk-go-v2, which
// verifies every response's x-amz-crc32.
package sdk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/extenddb/extenddb/internal/config"
	"github.com/extenddb/extenddb/internal/server"
)

// endpoint is the server under test; endpoints, when EXTENDDB_ENDPOINTS
// lists several servers sharing one database, spreads the race's clients
// over them.
var (
	endpoint  string
	endpoints []string
	// inProcess: the server was started by TestMain (with
	// testShardRollover), not given by EXTENDDB_ENDPOINT(S).
	inProcess bool
)

const testShardRollover = 2 * time.Second

func TestMain(m *testing.M) {
	if list := os.Getenv("EXTENDDB_ENDPOINTS"); list != "" {
		endpoints = strings.Split(list, ",")
		endpoint = endpoints[0]
	} else {
		endpoint = os.Getenv("EXTENDDB_ENDPOINT")
	}
	var cancel context.CancelFunc = func() {}
	done := make(chan error, 1)
	if endpoint == "" {
		cfg := config.Default()
		cfg.Server.Listen = "127.0.0.1:0"
		cfg.Storage.Memory = true
		cfg.Streams.ShardRollover.Duration = testShardRollover // the stream consumer test sees rollovers
		inProcess = true
		var ctx context.Context
		ctx, cancel = context.WithCancel(context.Background())
		addrc := make(chan net.Addr, 1)
		go func() {
			done <- server.Run(ctx, cfg, slog.New(slog.DiscardHandler), func(a net.Addr) { addrc <- a })
		}()
		select {
		case a := <-addrc:
			endpoint = "http://" + a.String()
		case err := <-done:
			fmt.Println("server failed to start:", err)
			os.Exit(1)
		}
	}
	if len(endpoints) == 0 {
		endpoints = []string{endpoint}
	}
	fmt.Println("sdk tests against", strings.Join(endpoints, ", "))
	code := m.Run()
	cancel()
	os.Exit(code)
}

func client(t *testing.T) *dynamodb.Client { return clientOf(t, endpoint) }

func clientOf(t *testing.T, url string) *dynamodb.Client {
	t.Helper()
	return dynamodb.New(dynamodb.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

func tableName(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano()%1e9)
}

func createTable(t *testing.T, c *dynamodb.Client, withRange bool) string {
	t.Helper()
	name := tableName(t)
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS},
		},
	}
	if withRange {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String("sk"), KeyType: types.KeyTypeRange})
		in.AttributeDefinitions = append(in.AttributeDefinitions, types.AttributeDefinition{AttributeName: aws.String("sk"), AttributeType: types.ScalarAttributeTypeN})
	}
	if _, err := c.CreateTable(context.Background(), in); err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

func TestCRUDQueryScan(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	name := createTable(t, c, true)
	for i := 0; i < 30; i++ {
		_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "p"},
			"sk": &types.AttributeValueMemberN{Value: strconv.Itoa(i - 10)},
			"v":  &types.AttributeValueMemberS{Value: "<&>" + strconv.Itoa(i)},
		}})
		if err != nil {
			t.Fatalf("PutItem: %v", err)
		}
	}
	got, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{
		"pk": &types.AttributeValueMemberS{Value: "p"}, "sk": &types.AttributeValueMemberN{Value: "-3"}}})
	if err != nil {
		t.Fatalf("GetItem: %v", err)
	}
	if v := got.Item["v"].(*types.AttributeValueMemberS).Value; v != "<&>7" {
		t.Fatalf("GetItem v = %q", v)
	}
	q, err := c.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(name),
		KeyConditionExpression:    aws.String("pk = :p AND sk BETWEEN :a AND :b"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": &types.AttributeValueMemberS{Value: "p"}, ":a": &types.AttributeValueMemberN{Value: "-5"}, ":b": &types.AttributeValueMemberN{Value: "4"}},
		ScanIndexForward:          aws.Bool(false), Limit: aws.Int32(7)})
	if err != nil {
		t.Fatalf("Query: %v", err)
	}
	if len(q.Items) != 7 || q.LastEvaluatedKey == nil {
		t.Fatalf("Query got %d items, LEK %v", len(q.Items), q.LastEvaluatedKey)
	}
	if first := q.Items[0]["sk"].(*types.AttributeValueMemberN).Value; first != "4" {
		t.Fatalf("descending query starts at %s", first)
	}
	total := 0
	var start map[string]types.AttributeValue
	for {
		s, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(name), Limit: aws.Int32(8), ExclusiveStartKey: start})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		total += len(s.Items)
		if s.LastEvaluatedKey == nil {
			break
		}
		start = s.LastEvaluatedKey
	}
	if total != 30 {
		t.Fatalf("scan saw %d items", total)
	}
}

func TestConditionFailureReturnsOldItem(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	name := createTable(t, c, false)
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}, "owner": &types.AttributeValueMemberS{Value: "first"}}
	if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item}); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item,
		ConditionExpression:                 aws.String("attribute_not_exists(pk)"),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("want ConditionalCheckFailedException, got %v", err)
	}
	if o, ok := ccf.Item["owner"].(*types.AttributeValueMemberS); !ok || o.Value != "first" {
		t.Fatalf("old item not returned: %#v", ccf.Item)
	}
}

// TestConditionalRace: 32 clients race a conditional put on one key;
// exactly one wins and every loser sees the winner's item, in each of
// raceRounds rounds.
func TestConditionalRace(t *testing.T) {
	c := client(t)
	name := createTable(t, c, false)
	// Several rounds, each on a fresh key: every round has one winner.
	for round := range raceRounds {
		conditionalRaceRound(t, name, "lock-"+strconv.Itoa(round))
	}
}

// raceRounds is how many rounds TestConditionalRace runs.
const raceRounds = 5

func conditionalRaceRound(t *testing.T, name, key string) {
	t.Helper()
	ctx := context.Background()
	const n = 32
	var wins atomic.Int32
	var wg sync.WaitGroup
	winner := make(chan string, n)
	losersSaw := make(chan string, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cl := clientOf(t, endpoints[i%len(endpoints)])
			me := "client-" + strconv.Itoa(i)
			_, err := cl.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name),
				Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: key},
					"owner": &types.AttributeValueMemberS{Value: me}, "ex": &types.AttributeValueMemberN{Value: "100"}},
				ConditionExpression:                 aws.String("attribute_not_exists(pk) OR ex <= :now"),
				ExpressionAttributeValues:           map[string]types.AttributeValue{":now": &types.AttributeValueMemberN{Value: "50"}},
				ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
			var ccf *types.ConditionalCheckFailedException
			switch {
			case err == nil:
				wins.Add(1)
				winner <- me
			case errors.As(err, &ccf):
				if o, ok := ccf.Item["owner"].(*types.AttributeValueMemberS); ok {
					losersSaw <- o.Value
				} else {
					losersSaw <- "<no item>"
				}
			default:
				t.Errorf("client %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	close(winner)
	close(losersSaw)
	if wins.Load() != 1 {
		t.Fatalf("key %s: %d winners", key, wins.Load())
	}
	w := <-winner
	count := 0
	for s := range losersSaw {
		count++
		if s != w {
			t.Errorf("loser saw owner %q, winner was %q", s, w)
		}
	}
	if count != n-1 {
		t.Fatalf("key %s: %d losers", key, count)
	}
}

// TestConditionalRaceRounds: rounds of the race on one existing item (a
// lease taken over round after round: "attribute_not_exists(pk) OR
// rnd < :r"), the 32 clients spread over every server of EXTENDDB_ENDPOINTS
// (servers sharing one database): exactly one winner per round, and every
// loser of a round sees that round's winner. EXTENDDB_SDK_RACE_ROUNDS sets
// the rounds (default 5).
func TestConditionalRaceRounds(t *testing.T) {
	ctx := context.Background()
	name := createTable(t, client(t), false)
	rounds := 5
	if v, err := strconv.Atoi(os.Getenv("EXTENDDB_SDK_RACE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	const n = 32
	clients := make([]*dynamodb.Client, n)
	for i := range clients {
		clients[i] = clientOf(t, endpoints[i%len(endpoints)])
	}
	for r := 1; r <= rounds; r++ {
		rs := strconv.Itoa(r)
		var wg sync.WaitGroup
		winners := make(chan string, n)
		losersSaw := make(chan string, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				me := "r" + rs + "-client-" + strconv.Itoa(i)
				_, err := clients[i].PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name),
					Item: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "lease"},
						"owner": &types.AttributeValueMemberS{Value: me}, "rnd": &types.AttributeValueMemberN{Value: rs}},
					ConditionExpression:                 aws.String("attribute_not_exists(pk) OR rnd < :r"),
					ExpressionAttributeValues:           map[string]types.AttributeValue{":r": &types.AttributeValueMemberN{Value: rs}},
					ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
				var ccf *types.ConditionalCheckFailedException
				switch {
				case err == nil:
					winners <- me
				case errors.As(err, &ccf):
					o, _ := ccf.Item["owner"].(*types.AttributeValueMemberS)
					if o == nil {
						losersSaw <- "<no item>"
					} else {
						losersSaw <- o.Value
					}
				default:
					t.Errorf("round %d, client %d (%s): %v", r, i, endpoints[i%len(endpoints)], err)
				}
			}(i)
		}
		wg.Wait()
		close(winners)
		close(losersSaw)
		var ws []string
		for w := range winners {
			ws = append(ws, w)
		}
		if len(ws) != 1 {
			t.Fatalf("round %d: %d winners %v", r, len(ws), ws)
		}
		losers := 0
		for s := range losersSaw {
			losers++
			if s != ws[0] {
				t.Errorf("round %d: a loser saw owner %q, the winner was %q", r, s, ws[0])
			}
		}
		if losers != n-1 {
			t.Fatalf("round %d: %d losers", r, losers)
		}
		out, err := clients[0].GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "lease"}}})
		if err != nil {
			t.Fatal(err)
		}
		if o, _ := out.Item["owner"].(*types.AttributeValueMemberS); o == nil || o.Value != ws[0] {
			t.Fatalf("round %d: item owner %v, winner %q", r, out.Item["owner"], ws[0])
		}
	}
	t.Logf("%d rounds of 32 clients over %d server(s): one winner each", rounds, len(endpoints))
}

// TestDedupePattern reproduces a real client's dedupe flow: the
// conditional-put race (above), then a 25-item BatchWriteItem with no
// UnprocessedItems, then a DeleteItem conditioned on a token attribute that
// removes only the item carrying that token.
func TestDedupePattern(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	name := createTable(t, c, false)
	var reqs []types.WriteRequest
	for i := 0; i < 25; i++ {
		reqs = append(reqs, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"pk":    &types.AttributeValueMemberS{Value: "item-" + strconv.Itoa(i)},
			"token": &types.AttributeValueMemberS{Value: "tok-" + strconv.Itoa(i)},
			"pad":   &types.AttributeValueMemberS{Value: string(make([]byte, 1000))},
		}}})
	}
	out, err := c.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{name: reqs}})
	if err != nil {
		t.Fatalf("BatchWriteItem: %v", err)
	}
	if len(out.UnprocessedItems) != 0 {
		t.Fatalf("UnprocessedItems: %v", out.UnprocessedItems)
	}
	del := func(pk, token string) error {
		_, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(name),
			Key:                       map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: pk}},
			ConditionExpression:       aws.String("#t = :tok"),
			ExpressionAttributeNames:  map[string]string{"#t": "token"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":tok": &types.AttributeValueMemberS{Value: token}}})
		return err
	}
	var ccf *types.ConditionalCheckFailedException
	if err := del("item-3", "tok-4"); !errors.As(err, &ccf) {
		t.Fatalf("delete with the wrong token: want ConditionalCheckFailedException, got %v", err)
	}
	if err := del("item-3", "tok-3"); err != nil {
		t.Fatalf("delete with the right token: %v", err)
	}
	s, err := c.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(name), Select: types.SelectCount})
	if err != nil {
		t.Fatal(err)
	}
	if s.Count != 24 {
		t.Fatalf("after the delete %d items remain, want 24", s.Count)
	}
	g, err := c.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "item-3"}}})
	if err != nil || g.Item != nil {
		t.Fatalf("item-3 still there: %v %v", g.Item, err)
	}
}
