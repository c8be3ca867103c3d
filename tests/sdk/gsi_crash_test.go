package sdk

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// gsiConvergeBound is how long the indexes may take to equal the table
// after the restart: the backend's sweep runs at start and again one
// transaction lock timeout (5 s) later, for transactions that were too
// young at start (Cassandra, ADR 0016).
const gsiConvergeBound = 45 * time.Second

// TestGSICrash: a server (SQLite on disk, or the backend
// EXTENDDB_CRASH_SERVE_ARGS names, e.g. Cassandra, whose global secondary
// indexes are applied after the item's write through an outbox) is killed
// with SIGKILL while 8 writers move items between index keys (puts,
// updates that set or remove index attributes, deletes, transactions).
// After the restart every index converges, within gsiConvergeBound, to
// what the table implies: no missing, no extra, no stale entry.
func TestGSICrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server process")
	}
	ctx := context.Background()
	bin, data, port := crashSetup(t)
	srv := startServer(t, bin, data, port)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := clientOf(t, url)
	name := "gsicrash-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	s := func(v string) *string { return aws.String(v) }
	if _, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: s(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{{AttributeName: s("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: s("pk"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("g1"), AttributeType: types.ScalarAttributeTypeS}, {AttributeName: s("n"), AttributeType: types.ScalarAttributeTypeN},
			{AttributeName: s("g2"), AttributeType: types.ScalarAttributeTypeS}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{
			{IndexName: s("byG1"), KeySchema: []types.KeySchemaElement{{AttributeName: s("g1"), KeyType: types.KeyTypeHash}, {AttributeName: s("n"), KeyType: types.KeyTypeRange}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}},
			{IndexName: s("byG2"), KeySchema: []types.KeySchemaElement{{AttributeName: s("g2"), KeyType: types.KeyTypeHash}},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly}},
		}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	writes := gsiLoad(ctx, c, name, stop)
	time.Sleep(consumerSeconds())
	// Kill at a random moment inside the stream of writes.
	time.Sleep(time.Duration(rand.IntN(50)) * time.Millisecond)
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.Wait()
	close(stop)
	killed := writes.Load()
	time.Sleep(200 * time.Millisecond)
	restart := time.Now()
	srv = startServer(t, bin, data, port)
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	var diff string
	for {
		diff = gsiDiff(t, c, name)
		if diff == "" || time.Since(restart) > gsiConvergeBound {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if diff != "" {
		t.Fatalf("%d acknowledged writes before SIGKILL; the indexes differ from the table %v after the restart:\n%s", killed, gsiConvergeBound, diff)
	}
	t.Logf("%d acknowledged writes before SIGKILL; the indexes equal the table %v after the restart%s", killed, time.Since(restart).Round(time.Millisecond), outboxMetrics(url))
}

// outboxMetrics reads the GSI outbox metrics of a server (Cassandra), for
// the log.
func outboxMetrics(url string) string {
	res, err := http.Get(url + "/metrics")
	if err != nil {
		return ""
	}
	defer res.Body.Close()
	var out []string
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "extenddb_gsi_outbox_") {
			out = append(out, sc.Text())
		}
	}
	if len(out) == 0 {
		return ""
	}
	return " (" + strings.Join(out, ", ") + ")"
}

// gsiLoad runs 8 writers on 200 keys until stop: puts with random index
// keys (g2 present half the time), updates that move an item in byG1 and
// set or remove g2, deletes, and transactions of a put and an update.
func gsiLoad(ctx context.Context, c *dynamodb.Client, name string, stop <-chan struct{}) *atomic.Int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			key := func() types.AttributeValue {
				return &types.AttributeValueMemberS{Value: fmt.Sprintf("k%03d", r.IntN(200))}
			}
			g := func() types.AttributeValue { return &types.AttributeValueMemberS{Value: fmt.Sprintf("g%d", r.IntN(5))} }
			num := func() types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(r.IntN(1000))} }
			item := func(i int) map[string]types.AttributeValue {
				it := map[string]types.AttributeValue{"pk": key(), "g1": g(), "n": num(), "v": &types.AttributeValueMemberS{Value: fmt.Sprintf("w%d-%d", w, i)}}
				if r.IntN(2) == 0 {
					it["g2"] = g()
				}
				return it
			}
			update := func() *types.Update {
				u := &types.Update{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": key()},
					UpdateExpression:          aws.String("SET g1 = :g, n = :n, g2 = :g2 ADD c :one"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":g": g(), ":n": num(), ":g2": g(), ":one": &types.AttributeValueMemberN{Value: "1"}}}
				if r.IntN(2) == 0 {
					u.UpdateExpression = aws.String("SET g1 = :g, n = :n REMOVE g2 ADD c :one")
					delete(u.ExpressionAttributeValues, ":g2")
				}
				return u
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				var err error
				switch op := r.IntN(10); {
				case op < 4:
					_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: item(i)})
				case op < 7:
					u := update()
					_, err = c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: u.TableName, Key: u.Key,
						UpdateExpression: u.UpdateExpression, ExpressionAttributeValues: u.ExpressionAttributeValues})
				case op < 8:
					_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": key()}})
				default:
					p, u := item(i), update()
					if p["pk"].(*types.AttributeValueMemberS).Value == u.Key["pk"].(*types.AttributeValueMemberS).Value {
						continue
					}
					_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
						{Put: &types.Put{TableName: aws.String(name), Item: p}}, {Update: u}}})
				}
				if err == nil {
					n.Add(1)
				}
			}
		}(w)
	}
	go func() { <-stop; wg.Wait() }()
	return &n
}

// gsiDiff compares both indexes with what a consistent Scan of the table
// implies; "" when they are equal.
func gsiDiff(t *testing.T, c *dynamodb.Client, name string) string {
	t.Helper()
	table, _ := scanAll(t, c, name, "")
	want1, want2 := map[string]string{}, map[string]string{}
	for pk, it := range table {
		_, ok1 := it["g1"].(*types.AttributeValueMemberS)
		_, okn := it["n"].(*types.AttributeValueMemberN)
		if ok1 && okn {
			want1[pk] = canon(it)
		}
		if g2, ok := it["g2"].(*types.AttributeValueMemberS); ok {
			want2[pk] = g2.Value
		}
	}
	got1, got2 := map[string]string{}, map[string]string{}
	ix1, dups1 := scanAll(t, c, name, "byG1")
	ix2, dups2 := scanAll(t, c, name, "byG2")
	out := append(dups1, dups2...)
	for pk, it := range ix1 {
		got1[pk] = canon(it)
	}
	for pk, it := range ix2 {
		if len(it) != 2 {
			got2[pk] = fmt.Sprintf("KEYS_ONLY entry with %d attributes", len(it))
			continue
		}
		g2, _ := it["g2"].(*types.AttributeValueMemberS)
		if g2 == nil {
			got2[pk] = "entry without g2"
			continue
		}
		got2[pk] = g2.Value
	}
	cmp := func(ix string, want, got map[string]string) {
		for pk, w := range want {
			if g, ok := got[pk]; !ok {
				out = append(out, fmt.Sprintf("%s: %s missing (want %s)", ix, pk, w))
			} else if g != w {
				out = append(out, fmt.Sprintf("%s: %s stale: %s, want %s", ix, pk, g, w))
			}
		}
		for pk, g := range got {
			if _, ok := want[pk]; !ok {
				out = append(out, fmt.Sprintf("%s: %s extra: %s", ix, pk, g))
			}
		}
	}
	cmp("byG1", want1, got1)
	cmp("byG2", want2, got2)
	sort.Strings(out)
	if len(out) > 20 {
		out = append(out[:20], fmt.Sprintf("... %d more", len(out)-20))
	}
	return strings.Join(out, "\n")
}

// scanAll scans the table (consistently) or one of its indexes, keyed by
// pk; dups lists the items an index holds more than once (an entry left
// at an old index key).
func scanAll(t *testing.T, c *dynamodb.Client, name, index string) (out map[string]map[string]types.AttributeValue, dups []string) {
	t.Helper()
	out = map[string]map[string]types.AttributeValue{}
	var start map[string]types.AttributeValue
	for {
		in := &dynamodb.ScanInput{TableName: aws.String(name), ExclusiveStartKey: start}
		if index == "" {
			in.ConsistentRead = aws.Bool(true)
		} else {
			in.IndexName = aws.String(index)
		}
		res, err := c.Scan(context.Background(), in)
		for try := 0; err != nil && !isAPIError(err) && try < 3; try++ {
			res, err = c.Scan(context.Background(), in) // a transport error (see TestStreamCrash)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			pk := it["pk"].(*types.AttributeValueMemberS).Value
			if _, dup := out[pk]; dup {
				dups = append(dups, fmt.Sprintf("%s: %s listed twice", index, pk))
			}
			out[pk] = it
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out, dups
		}
		start = res.LastEvaluatedKey
	}
}
