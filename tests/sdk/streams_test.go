package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/aws/smithy-go"
)

// DynamoDB Streams through aws-sdk-go-v2: the operations and errors, a
// consumer following every shard through rollovers under concurrent
// writers (replaying its records reproduces the table), and a crash test
// (SIGKILL under load: every acknowledged write has its record).

func streamsClient(url string) *dynamodbstreams.Client {
	return dynamodbstreams.New(dynamodbstreams.Options{
		BaseEndpoint: aws.String(url),
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		Retryer:      aws.NopRetryer{},
	})
}

func createStreamTable(t *testing.T, c *dynamodb.Client, view types.StreamViewType) (string, string) {
	t.Helper()
	name := strings.ReplaceAll(tableName(t), "/", "-")
	out, err := c.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:            aws.String(name),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: view},
	})
	if err != nil {
		t.Fatalf("CreateTable: %v", err)
	}
	t.Cleanup(func() {
		_, _ = c.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name, aws.ToString(out.TableDescription.LatestStreamArn)
}

func TestStreamsSDK(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	sc := streamsClient(endpoint)
	name, arn := createStreamTable(t, c, types.StreamViewTypeNewAndOldImages)
	for i := 0; i < 3; i++ {
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: "k"}, "v": &types.AttributeValueMemberN{Value: strconv.Itoa(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	ls, err := sc.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(name)})
	if err != nil || len(ls.Streams) != 1 || aws.ToString(ls.Streams[0].StreamArn) != arn {
		t.Fatalf("ListStreams: %+v %v", ls, err)
	}
	d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	sd := d.StreamDescription
	if sd.StreamStatus != stypes.StreamStatusEnabled || sd.StreamViewType != stypes.StreamViewTypeNewAndOldImages || len(sd.Shards) == 0 || sd.CreationRequestDateTime == nil {
		t.Fatalf("DescribeStream: %+v", sd)
	}
	shard := sd.Shards[0].ShardId
	it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: shard, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
	if err != nil {
		t.Fatal(err)
	}
	recs, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, r := range recs.Records {
		events = append(events, string(r.EventName))
		if r.Dynamodb.ApproximateCreationDateTime == nil || aws.ToString(r.EventSource) != "aws:dynamodb" || r.Dynamodb.SizeBytes == nil {
			t.Fatalf("record %+v", r)
		}
	}
	if strings.Join(events, ",") != "INSERT,MODIFY,MODIFY" || recs.NextShardIterator == nil {
		t.Fatalf("records %v next %v", events, recs.NextShardIterator)
	}
	if old := recs.Records[2].Dynamodb.OldImage["v"].(*stypes.AttributeValueMemberN).Value; old != "1" {
		t.Fatalf("OldImage v %s", old)
	}
	// errors, typed by the SDK
	_, err = sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(strings.Replace(arn, name, "no-such-table", 1))})
	var rnf *stypes.ResourceNotFoundException
	if !errors.As(err, &rnf) {
		t.Fatalf("missing stream: %v", err)
	}
	_, err = sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: aws.String("bogus-iterator")})
	if err == nil || !strings.Contains(err.Error(), "ValidationException") {
		t.Fatalf("bad iterator: %v", err)
	}
}

// canon renders an item of either SDK's attribute types as a string.
func canon(m any) string {
	var parts []string
	switch it := m.(type) {
	case map[string]types.AttributeValue:
		for k, v := range it {
			switch x := v.(type) {
			case *types.AttributeValueMemberS:
				parts = append(parts, k+"=S:"+x.Value)
			case *types.AttributeValueMemberN:
				parts = append(parts, k+"=N:"+x.Value)
			default:
				parts = append(parts, k+"=?")
			}
		}
	case map[string]stypes.AttributeValue:
		for k, v := range it {
			switch x := v.(type) {
			case *stypes.AttributeValueMemberS:
				parts = append(parts, k+"=S:"+x.Value)
			case *stypes.AttributeValueMemberN:
				parts = append(parts, k+"=N:"+x.Value)
			default:
				parts = append(parts, k+"=?")
			}
		}
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}

// consumer follows every shard of a stream, parents before children, and
// replays the records, checking each against the state it replays.
type consumer struct {
	url      string
	sc       *dynamodbstreams.Client
	arn      string
	state    map[string]string // pk -> canon(item)
	done     map[string]bool   // exhausted shards
	iters    map[string]*string
	seen     map[string]bool // sequence numbers
	records  int
	shards   int
	problems []string
	tokens   map[string]bool // v values seen in NewImages
	retries  int             // GetRecords repeated after a transport error
}

func isAPIError(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae)
}

func newConsumer(sc *dynamodbstreams.Client, url, arn string) *consumer {
	return &consumer{url: url, sc: sc, arn: arn, state: map[string]string{}, done: map[string]bool{}, iters: map[string]*string{},
		seen: map[string]bool{}, tokens: map[string]bool{}}
}

func (c *consumer) fail(format string, args ...any) {
	if len(c.problems) < 20 {
		c.problems = append(c.problems, fmt.Sprintf(format, args...))
	}
}

// poll reads what is readable now; it returns whether every shard it
// knows of is exhausted or caught up (an empty page).
func (c *consumer) poll(ctx context.Context) (bool, error) {
	var shards []stypes.Shard
	var start *string
	for {
		d, err := c.sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(c.arn), ExclusiveStartShardId: start})
		if err != nil {
			return false, err
		}
		shards = append(shards, d.StreamDescription.Shards...)
		if d.StreamDescription.LastEvaluatedShardId == nil {
			break
		}
		start = d.StreamDescription.LastEvaluatedShardId
	}
	c.shards = len(shards)
	idle := true
	// A busy open shard may never give an empty page when a GetRecords
	// takes longer than the writers need for a new record (Cassandra
	// publishes pending records on every read): poll returns after a
	// while anyway, not idle, so the caller's schedule (stop the writers,
	// then drain) goes on.
	pollEnd := time.Now().Add(2 * time.Second)
	for _, sh := range shards {
		id := aws.ToString(sh.ShardId)
		if c.done[id] {
			continue
		}
		if p := aws.ToString(sh.ParentShardId); p != "" && !c.done[p] {
			idle = false
			break // the parent first
		}
		it := c.iters[id]
		if it == nil {
			out, err := c.sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(c.arn), ShardId: sh.ShardId,
				ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				return false, err
			}
			it = out.ShardIterator
		}
		var last string
		for {
			out, err := c.sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			for try := 0; err != nil && !isAPIError(err) && try < 3; try++ {
				// A transport error (see the report of this test): the
				// iterator is still good, read again as a consumer would.
				c.retries++
				out, err = c.sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it})
			}
			if err != nil {
				return false, fmt.Errorf("%w%s", err, rawGetRecords(c.url, aws.ToString(it)))
			}
			for _, r := range out.Records {
				c.apply(r, &last)
			}
			it = out.NextShardIterator
			if it == nil {
				c.done[id] = true
				break
			}
			if len(out.Records) == 0 {
				break
			}
			idle = false
			if time.Now().After(pollEnd) {
				break
			}
		}
		c.iters[id] = it
		if !c.done[id] {
			break // an open (or not yet exhausted) shard: its children wait
		}
	}
	return idle, nil
}

func (c *consumer) apply(r stypes.Record, last *string) {
	c.records++
	seq := aws.ToString(r.Dynamodb.SequenceNumber)
	if c.seen[seq] {
		c.fail("duplicate sequence number %s", seq)
	}
	c.seen[seq] = true
	if *last != "" && !(len(seq) > len(*last) || len(seq) == len(*last) && seq > *last) {
		c.fail("sequence numbers not increasing in a shard: %s after %s", seq, *last)
	}
	*last = seq
	pk := r.Dynamodb.Keys["pk"].(*stypes.AttributeValueMemberS).Value
	cur, exists := c.state[pk]
	switch r.EventName {
	case stypes.OperationTypeInsert:
		if exists {
			c.fail("INSERT of %s, which exists (%s): a REMOVE is missing", pk, cur)
		}
	default:
		if !exists {
			c.fail("%s of %s, which does not exist: a record is missing", r.EventName, pk)
		} else if old := canon(r.Dynamodb.OldImage); old != cur {
			c.fail("%s of %s: OldImage %s, replayed %s", r.EventName, pk, old, cur)
		}
	}
	if r.EventName == stypes.OperationTypeRemove {
		delete(c.state, pk)
	} else {
		c.state[pk] = canon(r.Dynamodb.NewImage)
		if v, ok := r.Dynamodb.NewImage["v"].(*stypes.AttributeValueMemberS); ok {
			c.tokens[v.Value] = true
		}
	}
}

// drain polls until every shard is caught up twice in a row.
func (c *consumer) drain(ctx context.Context, t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	quiet := 0
	for quiet < 2 {
		idle, err := c.poll(ctx)
		if err != nil {
			t.Fatalf("consumer: %v", err)
		}
		if idle {
			quiet++
		} else {
			quiet = 0
		}
		if time.Now().After(deadline) {
			t.Fatal("consumer never caught up")
		}
	}
}

func scanTable(t *testing.T, c *dynamodb.Client, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var start map[string]types.AttributeValue
	for {
		res, err := c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(name), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		for try := 0; err != nil && !isAPIError(err) && try < 3; try++ {
			// a transport error (see TestStreamCrash): read the page again
			res, err = c.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(name), ExclusiveStartKey: start, ConsistentRead: aws.Bool(true)})
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range res.Items {
			out[it["pk"].(*types.AttributeValueMemberS).Value] = canon(it)
		}
		if len(res.LastEvaluatedKey) == 0 {
			return out
		}
		start = res.LastEvaluatedKey
	}
}

// load runs 8 writers of puts, updates, deletes and transactions on 1,000
// keys until stop; it returns the v tokens of acknowledged puts and
// updates.
func load(ctx context.Context, clients []*dynamodb.Client, name string, stop <-chan struct{}) (*sync.Map, *atomic.Int64) {
	var acked sync.Map
	var n atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c := clients[w%len(clients)]
			r := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			key := func() types.AttributeValue {
				return &types.AttributeValueMemberS{Value: fmt.Sprintf("k%03d", r.IntN(1000))}
			}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tok := fmt.Sprintf("w%d-%d", w, i)
				tv := &types.AttributeValueMemberS{Value: tok}
				var err error
				var toks []string
				switch op := r.IntN(10); {
				case op < 4:
					_, err = c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{"pk": key(), "v": tv}})
					toks = []string{tok}
				case op < 7:
					_, err = c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": key()},
						UpdateExpression:          aws.String("SET v = :v ADD c :one"),
						ExpressionAttributeValues: map[string]types.AttributeValue{":v": tv, ":one": &types.AttributeValueMemberN{Value: "1"}}})
					toks = []string{tok}
				case op < 9:
					_, err = c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": key()}})
				default:
					k1, k2 := key(), key()
					if k1.(*types.AttributeValueMemberS).Value == k2.(*types.AttributeValueMemberS).Value {
						continue
					}
					_, err = c.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
						{Put: &types.Put{TableName: aws.String(name), Item: map[string]types.AttributeValue{"pk": k1, "v": tv}}},
						{Delete: &types.Delete{TableName: aws.String(name), Key: map[string]types.AttributeValue{"pk": k2}}},
					}})
					toks = []string{tok}
				}
				if err == nil {
					n.Add(1)
					for _, t := range toks {
						acked.Store(t, true)
					}
				}
			}
		}(w)
	}
	go func() { <-stop; wg.Wait() }()
	return &acked, &n
}

func consumerSeconds() time.Duration {
	if s, err := strconv.Atoi(os.Getenv("EXTENDDB_STREAM_CONSUMER_SECONDS")); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	return 3 * time.Second
}

// TestStreamConsumer: 8 writers on 1,000 keys while a consumer follows
// every shard from TRIM_HORIZON; replaying the records reproduces the
// table (EXTENDDB_STREAM_CONSUMER_SECONDS, default 3; make test-all: 20).
// Against several servers on one database (EXTENDDB_ENDPOINTS) the
// writers use all of them.
func TestStreamConsumer(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	name, arn := createStreamTable(t, c, types.StreamViewTypeNewAndOldImages)
	cons := newConsumer(streamsClient(endpoint), endpoint, arn)
	stop := make(chan struct{})
	// With EXTENDDB_ENDPOINTS (servers sharing one database) the writers
	// are spread over every server.
	var clients []*dynamodb.Client
	for _, ep := range endpoints {
		clients = append(clients, clientOf(t, ep))
	}
	_, writes := load(ctx, clients, name, stop)
	end := time.Now().Add(consumerSeconds())
	for time.Now().Before(end) {
		if _, err := cons.poll(ctx); err != nil {
			t.Fatalf("consumer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	time.Sleep(200 * time.Millisecond) // writers finish their last request
	cons.drain(ctx, t)
	for _, p := range cons.problems {
		t.Error(p)
	}
	table := scanTable(t, c, name)
	compareReplay(t, cons.state, table)
	t.Logf("%d acknowledged writes, %d records over %d shards, %d items", writes.Load(), cons.records, cons.shards, len(table))
	if inProcess && consumerSeconds() >= 4*time.Second && cons.shards < 2 {
		t.Errorf("no shard rollover in %v (shard_rollover %v)", consumerSeconds(), testShardRollover)
	}
}

func compareReplay(t *testing.T, replay, table map[string]string) {
	t.Helper()
	bad := 0
	for k, v := range table {
		if replay[k] != v {
			bad++
			if bad < 10 {
				t.Errorf("item %s: table %s, replay %s", k, v, replay[k])
			}
		}
	}
	for k, v := range replay {
		if _, ok := table[k]; !ok {
			bad++
			if bad < 10 {
				t.Errorf("item %s: not in the table, replay %s", k, v)
			}
		}
	}
	if bad > 0 {
		t.Fatalf("%d items differ between the table and the replayed stream", bad)
	}
}

// repoRoot finds the module root (for building the server binary).
func repoRoot(t *testing.T) string {
	dir, _ := os.Getwd()
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// crashSetup builds the server binary into a temporary directory and
// prepares a data directory and a free port for startServer; when the
// test fails, the tail of the server's log is printed.
func crashSetup(t *testing.T) (bin, data string, port int) {
	t.Helper()
	dir := t.TempDir()
	bin = filepath.Join(dir, "extenddb")
	build := exec.Command("go", "build", "-o", bin, "./cmd/extenddb")
	build.Dir = repoRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	port = freePort(t)
	data = filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			if len(b) > 4000 {
				b = b[len(b)-4000:]
			}
			t.Logf("server log (tail):\n%s", b)
		}
	})
	return bin, data, port
}

func startServer(t *testing.T, bin, dataDir string, port int) *exec.Cmd {
	t.Helper()
	args := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--data-dir", dataDir}
	if dsn := os.Getenv("EXTENDDB_STREAM_CRASH_POSTGRES_DSN"); dsn != "" {
		args = []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port), "--backend", "postgres", "--dsn", dsn}
	}
	if extra := os.Getenv("EXTENDDB_CRASH_SERVE_ARGS"); extra != "" {
		// Any migrated backend, e.g. "--backend cassandra
		// --cassandra-hosts h:p --cassandra-keyspace ks".
		args = append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", port)}, strings.Fields(extra)...)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "EXTENDDB__STREAMS__SHARD_ROLLOVER=2s", "EXTENDDB__BACKUP__STORE__KIND=disabled")
	logf, err := os.OpenFile(filepath.Join(dataDir, "..", "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := clientOf(t, fmt.Sprintf("http://127.0.0.1:%d", port))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := c.ListTables(context.Background(), &dynamodb.ListTablesInput{}); err == nil {
			return cmd
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("server did not start")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestStreamCrash: the server (SQLite on disk, PostgreSQL with
// EXTENDDB_STREAM_CRASH_POSTGRES_DSN naming a migrated database, or the
// backend EXTENDDB_CRASH_SERVE_ARGS names) is killed with SIGKILL
// under the consumer test's load and restarted; every acknowledged write
// has its record, and replaying the stream reproduces the table.
//
// After the restart, on a loaded machine, a large response (Scan or
// GetRecords) is now and then cut by a client-side "use of closed network
// connection" after its first 4 KB; the reads are repeated (idempotent)
// as a consumer with a retrying SDK would. Not specific to streams: the
// Scan shows it too.
func TestStreamCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a server process")
	}
	ctx := context.Background()
	bin, data, port := crashSetup(t)
	srv := startServer(t, bin, data, port)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := clientOf(t, url)
	name := "crash-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 10)
	out, err := c.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}})
	if err != nil {
		t.Fatal(err)
	}
	arn := aws.ToString(out.TableDescription.LatestStreamArn)
	stop := make(chan struct{})
	acked, writes := load(ctx, []*dynamodb.Client{c}, name, stop)
	time.Sleep(consumerSeconds())
	if err := srv.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = srv.Wait()
	close(stop)
	time.Sleep(200 * time.Millisecond)
	srv = startServer(t, bin, data, port)
	defer func() { _ = srv.Process.Signal(syscall.SIGTERM); _ = srv.Wait() }()
	cons := newConsumer(streamsClient(url), url, arn)
	cons.drain(ctx, t)
	for _, p := range cons.problems {
		t.Error(p)
	}
	missing := 0
	acked.Range(func(k, _ any) bool {
		if !cons.tokens[k.(string)] {
			missing++
			if missing < 10 {
				t.Errorf("acknowledged write %s has no record", k)
			}
		}
		return true
	})
	if missing > 0 {
		t.Fatalf("%d acknowledged writes without their record", missing)
	}
	compareReplay(t, cons.state, scanTable(t, c, name))
	t.Logf("%d acknowledged writes before SIGKILL, %d records over %d shards (%d GetRecords repeated after transport errors)",
		writes.Load(), cons.records, cons.shards, cons.retries)
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// rawGetRecords repeats a failed GetRecords without the SDK and describes
// what came back (for the failure message).
func rawGetRecords(url, it string) string {
	body := `{"ShardIterator":"` + it + `"}`
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "DynamoDBStreams_20120810.GetRecords")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "; raw: " + err.Error()
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	tail := b
	if len(tail) > 300 {
		tail = tail[len(tail)-300:]
	}
	return fmt.Sprintf("; raw: status %d, %d bytes (Content-Length %s), read err %v, valid JSON %v, crc %s, tail %q",
		res.StatusCode, len(b), res.Header.Get("Content-Length"), err, json.Valid(b), res.Header.Get("X-Amz-Crc32"), tail)
}

// TestGetRecordsLatency measures GetRecords of 1,000 records of 1 KB
// items (NEW_AND_OLD_IMAGES) when EXTENDDB_STREAM_BENCH is set (the
// figure in docs/benchmarks.md): p50 and p99 over 200 reads.
func TestGetRecordsLatency(t *testing.T) {
	if os.Getenv("EXTENDDB_STREAM_BENCH") == "" {
		t.Skip("EXTENDDB_STREAM_BENCH not set")
	}
	ctx := context.Background()
	c := client(t)
	name, arn := createStreamTable(t, c, types.StreamViewTypeNewAndOldImages)
	pad := strings.Repeat("x", 900) // 1,000 records stay under the 1 MB page
	for i := 0; i < 1000; i++ {
		if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
			"pk": &types.AttributeValueMemberS{Value: fmt.Sprintf("k%04d", i)}, "v": &types.AttributeValueMemberS{Value: pad}}}); err != nil {
			t.Fatal(err)
		}
	}
	sc := streamsClient(endpoint)
	d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
	if err != nil {
		t.Fatal(err)
	}
	var lat []time.Duration
	for i := 0; i < 200; i++ {
		it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn),
			ShardId: d.StreamDescription.Shards[0].ShardId, ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator, Limit: aws.Int32(1000)})
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if len(out.Records) != 1000 {
			t.Fatalf("%d records", len(out.Records))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("GetRecords of 1,000 records (~1 KB items, NEW_AND_OLD_IMAGES, client decode included): p50 %v, p99 %v, max %v",
		lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1])
}

// TestStreamsSDKViewTypes: INSERT, MODIFY and REMOVE records carry the
// images of each StreamViewType, as the SDK decodes them.
func TestStreamsSDKViewTypes(t *testing.T) {
	ctx := context.Background()
	c := client(t)
	sc := streamsClient(endpoint)
	for _, view := range []types.StreamViewType{types.StreamViewTypeKeysOnly, types.StreamViewTypeNewImage,
		types.StreamViewTypeOldImage, types.StreamViewTypeNewAndOldImages} {
		t.Run(string(view), func(t *testing.T) {
			name, arn := createStreamTable(t, c, view)
			key := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "k"}}
			if _, err := c.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(name), Item: map[string]types.AttributeValue{
				"pk": key["pk"], "v": &types.AttributeValueMemberS{Value: "1"}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: key, UpdateExpression: aws.String("SET v = :v"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberS{Value: "2"}}}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(name), Key: key}); err != nil {
				t.Fatal(err)
			}
			cons := newConsumer(sc, endpoint, arn)
			cons.drain(ctx, t)
			d, err := sc.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: aws.String(arn)})
			if err != nil {
				t.Fatal(err)
			}
			it, err := sc.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: aws.String(arn), ShardId: d.StreamDescription.Shards[0].ShardId,
				ShardIteratorType: stypes.ShardIteratorTypeTrimHorizon})
			if err != nil {
				t.Fatal(err)
			}
			out, err := sc.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Records) != 3 {
				t.Fatalf("%d records", len(out.Records))
			}
			for _, r := range out.Records {
				wantNew := (view == types.StreamViewTypeNewImage || view == types.StreamViewTypeNewAndOldImages) && r.EventName != stypes.OperationTypeRemove
				wantOld := (view == types.StreamViewTypeOldImage || view == types.StreamViewTypeNewAndOldImages) && r.EventName != stypes.OperationTypeInsert
				if (r.Dynamodb.NewImage != nil) != wantNew || (r.Dynamodb.OldImage != nil) != wantOld || string(r.Dynamodb.StreamViewType) != string(view) {
					t.Errorf("%s %s: new %v old %v view %s", view, r.EventName, r.Dynamodb.NewImage, r.Dynamodb.OldImage, r.Dynamodb.StreamViewType)
				}
				if canon(r.Dynamodb.Keys) != "pk=S:k" {
					t.Errorf("keys %v", r.Dynamodb.Keys)
				}
			}
			if len(cons.problems) > 0 && view == types.StreamViewTypeNewAndOldImages {
				t.Errorf("replay: %v", cons.problems)
			}
		})
	}
}
