package engine

import (
	"context"
	"encoding/json"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

const acct = "000000000000"

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newStreamEngine(t *testing.T) (*Engine, *clock) {
	t.Helper()
	b := memSQLite(t)
	c := &clock{t: time.Now()}
	return New(backend.Checked(b, func(err error) { t.Errorf("contract: %v", err) }), Options{Now: c.now}), c
}

func streamTable(t *testing.T, e *Engine, name, view string) string {
	t.Helper()
	out, err := e.CreateTable(context.Background(), acct, &CreateTableInput{TableName: ptr(name),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
		StreamSpecification:  &StreamSpecification{StreamEnabled: ptr(true), StreamViewType: view}})
	if err != nil {
		t.Fatal(err)
	}
	if out.TableDescription.LatestStreamArn == "" || out.TableDescription.LatestStreamLabel == "" {
		t.Fatalf("no stream ARN in %+v", out.TableDescription)
	}
	return out.TableDescription.LatestStreamArn
}

type wireRecord struct {
	EventID      string `json:"eventID"`
	EventName    string `json:"eventName"`
	EventSource  string `json:"eventSource"`
	EventVersion string `json:"eventVersion"`
	AwsRegion    string `json:"awsRegion"`
	Dynamodb     struct {
		Keys           attr.Item `json:"Keys"`
		NewImage       attr.Item `json:"NewImage"`
		OldImage       attr.Item `json:"OldImage"`
		SequenceNumber string    `json:"SequenceNumber"`
		SizeBytes      int64     `json:"SizeBytes"`
		StreamViewType string    `json:"StreamViewType"`
		Approx         float64   `json:"ApproximateCreationDateTime"`
	} `json:"dynamodb"`
	UserIdentity *struct {
		PrincipalId string `json:"PrincipalId"`
		Type        string `json:"Type"`
	} `json:"userIdentity"`
}

type recordsPage struct {
	Records           []wireRecord `json:"Records"`
	NextShardIterator *string      `json:"NextShardIterator"`
}

func getRecords(t *testing.T, e *Engine, it string, limit int64) recordsPage {
	t.Helper()
	out, err := e.GetRecords(context.Background(), acct, &GetRecordsInput{ShardIterator: &it, Limit: &limit})
	if err != nil {
		t.Fatalf("GetRecords: %v", err)
	}
	b, err := out.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var p recordsPage
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return p
}

func shards(t *testing.T, e *Engine, arn string) []Shard {
	t.Helper()
	d, err := e.DescribeStream(context.Background(), acct, &DescribeStreamInput{StreamArn: &arn})
	if err != nil {
		t.Fatal(err)
	}
	return d.StreamDescription.Shards
}

func iter(t *testing.T, e *Engine, arn, shard, typ string, seq *string) string {
	t.Helper()
	out, err := e.GetShardIterator(context.Background(), acct, &GetShardIteratorInput{StreamArn: &arn, ShardId: &shard, ShardIteratorType: &typ, SequenceNumber: seq})
	if err != nil {
		t.Fatalf("GetShardIterator %s: %v", typ, err)
	}
	return out.ShardIterator
}

// readAll reads every record of every shard of a stream in order.
func readAll(t *testing.T, e *Engine, arn string) []wireRecord {
	t.Helper()
	var all []wireRecord
	for _, sh := range shards(t, e, arn) {
		it := iter(t, e, arn, sh.ShardId, "TRIM_HORIZON", nil)
		for i := 0; i < 100; i++ {
			p := getRecords(t, e, it, 1000)
			all = append(all, p.Records...)
			if p.NextShardIterator == nil || len(p.Records) == 0 {
				break
			}
			it = *p.NextShardIterator
		}
	}
	return all
}

func put(t *testing.T, e *Engine, table string, it attr.Item) {
	t.Helper()
	if _, err := e.PutItem(context.Background(), acct, &PutItemInput{TableName: &table, Item: it}); err != nil {
		t.Fatal(err)
	}
}

func item(pk string, v string) attr.Item {
	return attr.Item{"pk": attr.StrValue(pk), "v": attr.StrValue(v)}
}

func TestStreamRecordsPerViewType(t *testing.T) {
	ctx := context.Background()
	for _, view := range []string{"KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"} {
		t.Run(view, func(t *testing.T) {
			e, _ := newStreamEngine(t)
			arn := streamTable(t, e, "tab1", view)
			tn := "tab1"
			put(t, e, tn, item("a", "1"))
			put(t, e, tn, item("a", "1")) // unchanged: no record
			put(t, e, tn, item("a", "2"))
			if _, err := e.DeleteItem(ctx, acct, &DeleteItemInput{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("a")}}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.DeleteItem(ctx, acct, &DeleteItemInput{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("zz")}}); err != nil {
				t.Fatal(err)
			}
			// a failed condition writes nothing
			_, err := e.PutItem(ctx, acct, &PutItemInput{TableName: &tn, Item: item("b", "1"), ConditionExpression: ptr("attribute_exists(pk)")})
			if code(err) != CodeConditionalCheckFailed {
				t.Fatal(err)
			}
			recs := readAll(t, e, arn)
			names := []string{}
			for _, r := range recs {
				names = append(names, r.EventName)
				if r.EventSource != "aws:dynamodb" || r.EventVersion != "1.1" || r.AwsRegion != "us-east-1" || r.Dynamodb.StreamViewType != view {
					t.Errorf("record fields: %+v", r)
				}
				if r.Dynamodb.Keys["pk"].Str != "a" || len(r.Dynamodb.Keys) != 1 || r.Dynamodb.SizeBytes <= 0 || len(r.EventID) != 32 {
					t.Errorf("keys/size/id: %+v", r)
				}
				wantNew := (view == "NEW_IMAGE" || view == "NEW_AND_OLD_IMAGES") && r.EventName != "REMOVE"
				wantOld := (view == "OLD_IMAGE" || view == "NEW_AND_OLD_IMAGES") && r.EventName != "INSERT"
				if (r.Dynamodb.NewImage != nil) != wantNew || (r.Dynamodb.OldImage != nil) != wantOld {
					t.Errorf("%s %s images: new %v old %v", view, r.EventName, r.Dynamodb.NewImage, r.Dynamodb.OldImage)
				}
				if r.UserIdentity != nil {
					t.Errorf("user write with userIdentity")
				}
			}
			if strings.Join(names, ",") != "INSERT,MODIFY,REMOVE" {
				t.Fatalf("events %v", names)
			}
			if view == "NEW_AND_OLD_IMAGES" && (recs[1].Dynamodb.OldImage["v"].Str != "1" || recs[1].Dynamodb.NewImage["v"].Str != "2") {
				t.Fatalf("modify images %+v", recs[1].Dynamodb)
			}
			for i := 1; i < len(recs); i++ {
				if recs[i].Dynamodb.SequenceNumber <= recs[i-1].Dynamodb.SequenceNumber {
					t.Fatalf("sequence numbers not increasing: %v", recs)
				}
			}
		})
	}
}

func TestStreamUpdateBatchTransact(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	arn := streamTable(t, e, "tab2", "NEW_AND_OLD_IMAGES")
	tn := "tab2"
	if _, err := e.UpdateItem(ctx, acct, &UpdateItemInput{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("u")},
		UpdateExpression: ptr("SET v = :v"), ExpressionAttributeValues: map[string]attr.Value{":v": attr.StrValue("1")}}); err != nil {
		t.Fatal(err)
	}
	// REMOVE of a missing attribute on a missing item creates nothing
	if _, err := e.UpdateItem(ctx, acct, &UpdateItemInput{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("none")},
		UpdateExpression: ptr("REMOVE v")}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.BatchWriteItem(ctx, acct, &BatchWriteItemInput{RequestItems: map[string][]WriteRequest{tn: {
		{PutRequest: &PutRequest{Item: item("b1", "x")}}, {PutRequest: &PutRequest{Item: item("b2", "x")}},
		{DeleteRequest: &DeleteRequest{Key: attr.Item{"pk": attr.StrValue("u")}}}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.TransactWriteItems(ctx, acct, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{
		{Put: &TransactPut{TableName: &tn, Item: item("tab1", "y")}},
		{ConditionCheck: &ConditionCheck{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("b1")}, ConditionExpression: ptr("attribute_exists(pk)")}},
		{Update: &TransactUpdate{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("b2")}, UpdateExpression: ptr("SET v = :v"),
			ExpressionAttributeValues: map[string]attr.Value{":v": attr.StrValue("z")}}},
	}}); err != nil {
		t.Fatal(err)
	}
	// a canceled transaction writes no record
	_, err := e.TransactWriteItems(ctx, acct, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{
		{Put: &TransactPut{TableName: &tn, Item: item("tab2", "y")}},
		{ConditionCheck: &ConditionCheck{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("nope")}, ConditionExpression: ptr("attribute_exists(pk)")}},
	}})
	if code(err) != CodeTransactionCanceled {
		t.Fatal(err)
	}
	var got []string
	for _, r := range readAll(t, e, arn) {
		got = append(got, r.EventName+":"+r.Dynamodb.Keys["pk"].Str)
	}
	want := "INSERT:u,INSERT:b1,INSERT:b2,REMOVE:u,INSERT:tab1,MODIFY:b2"
	if strings.Join(got, ",") != want {
		t.Fatalf("records %v, want %s", got, want)
	}
}

func TestStreamDisableReenableAndRollover(t *testing.T) {
	ctx := context.Background()
	e, c := newStreamEngine(t)
	arn1 := streamTable(t, e, "tab3", "KEYS_ONLY")
	tn := "tab3"
	put(t, e, tn, item("a", "1"))
	tab, err := e.loadTable(ctx, acct, tn)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rollover(ctx, tab, true); err != nil {
		t.Fatal(err)
	}
	put(t, e, tn, item("b", "1"))
	sh := shards(t, e, arn1)
	if len(sh) != 2 || sh[1].ParentShardId != sh[0].ShardId || sh[0].SequenceNumberRange.EndingSequenceNumber == "" || sh[1].SequenceNumberRange.EndingSequenceNumber != "" {
		t.Fatalf("shards after rollover: %+v", sh)
	}
	// the closed shard is exhausted after its record: NextShardIterator null
	p := getRecords(t, e, iter(t, e, arn1, sh[0].ShardId, "TRIM_HORIZON", nil), 100)
	if len(p.Records) != 1 || p.Records[0].Dynamodb.Keys["pk"].Str != "a" {
		t.Fatalf("parent shard: %+v", p)
	}
	for p.NextShardIterator != nil {
		p = getRecords(t, e, *p.NextShardIterator, 100)
		if len(p.Records) != 0 {
			t.Fatalf("closed shard again: %+v", p)
		}
	}
	c.add(time.Second)
	if _, err := e.UpdateTable(ctx, acct, &UpdateTableInput{TableName: &tn, StreamSpecification: &StreamSpecification{StreamEnabled: ptr(false)}}); err != nil {
		t.Fatal(err)
	}
	put(t, e, tn, item("c", "1")) // no stream: no record
	d, err := e.DescribeStream(ctx, acct, &DescribeStreamInput{StreamArn: &arn1})
	if err != nil || d.StreamDescription.StreamStatus != "DISABLED" {
		t.Fatalf("after disable: %+v %v", d, err)
	}
	c.add(time.Second)
	up, err := e.UpdateTable(ctx, acct, &UpdateTableInput{TableName: &tn, StreamSpecification: &StreamSpecification{StreamEnabled: ptr(true), StreamViewType: "NEW_IMAGE"}})
	if err != nil {
		t.Fatal(err)
	}
	arn2 := up.TableDescription.LatestStreamArn
	if arn2 == arn1 || arn2 == "" {
		t.Fatalf("re-enabled stream ARN %q", arn2)
	}
	put(t, e, tn, item("d", "1"))
	var got []string
	for _, r := range readAll(t, e, arn1) {
		got = append(got, r.Dynamodb.Keys["pk"].Str)
	}
	if strings.Join(got, ",") != "a,b" {
		t.Fatalf("old stream %v", got)
	}
	got = nil
	for _, r := range readAll(t, e, arn2) {
		got = append(got, r.Dynamodb.Keys["pk"].Str)
	}
	if strings.Join(got, ",") != "d" {
		t.Fatalf("new stream %v", got)
	}
	ls, err := e.ListStreams(ctx, acct, &ListStreamsInput{TableName: &tn})
	if err != nil || len(ls.Streams) != 2 {
		t.Fatalf("ListStreams %+v %v", ls, err)
	}
	ls, err = e.ListStreams(ctx, acct, &ListStreamsInput{Limit: ptr(int64(1))})
	if err != nil || len(ls.Streams) != 1 || ls.LastEvaluatedStreamArn != arn1 {
		t.Fatalf("ListStreams limit 1 %+v %v", ls, err)
	}
	ls, err = e.ListStreams(ctx, acct, &ListStreamsInput{ExclusiveStartStreamArn: &arn1})
	if err != nil || len(ls.Streams) != 1 || ls.Streams[0].StreamArn != arn2 || ls.LastEvaluatedStreamArn != "" {
		t.Fatalf("ListStreams after %+v %v", ls, err)
	}
}

func TestStreamIteratorsAndErrors(t *testing.T) {
	ctx := context.Background()
	e, c := newStreamEngine(t)
	arn := streamTable(t, e, "tab4", "NEW_IMAGE")
	tn := "tab4"
	for _, k := range []string{"a", "b", "c"} {
		put(t, e, tn, item(k, "1"))
	}
	sh := shards(t, e, arn)[0].ShardId
	all := getRecords(t, e, iter(t, e, arn, sh, "TRIM_HORIZON", nil), 1000).Records
	if len(all) != 3 {
		t.Fatalf("%d records", len(all))
	}
	seq := all[1].Dynamodb.SequenceNumber
	if r := getRecords(t, e, iter(t, e, arn, sh, "AT_SEQUENCE_NUMBER", &seq), 1000).Records; len(r) != 2 || r[0].Dynamodb.Keys["pk"].Str != "b" {
		t.Fatalf("AT: %+v", r)
	}
	if r := getRecords(t, e, iter(t, e, arn, sh, "AFTER_SEQUENCE_NUMBER", &seq), 1000).Records; len(r) != 1 || r[0].Dynamodb.Keys["pk"].Str != "c" {
		t.Fatalf("AFTER: %+v", r)
	}
	latest := iter(t, e, arn, sh, "LATEST", nil)
	put(t, e, tn, item("d", "1"))
	if p := getRecords(t, e, latest, 1000); len(p.Records) != 1 || p.Records[0].Dynamodb.Keys["pk"].Str != "d" || p.NextShardIterator == nil {
		t.Fatalf("LATEST: %+v", p)
	}
	// Limit pages
	p := getRecords(t, e, iter(t, e, arn, sh, "TRIM_HORIZON", nil), 2)
	if len(p.Records) != 2 {
		t.Fatalf("limit 2: %d", len(p.Records))
	}
	if p2 := getRecords(t, e, *p.NextShardIterator, 2); len(p2.Records) != 2 || p2.Records[0].Dynamodb.Keys["pk"].Str != "c" {
		t.Fatalf("page 2: %+v", p2)
	}
	// errors
	bad := "x" + latest[1:]
	if _, err := e.GetRecords(ctx, acct, &GetRecordsInput{ShardIterator: &bad}); code(err) != CodeValidation {
		t.Fatalf("tampered iterator: %v", err)
	}
	if _, err := e.GetRecords(ctx, acct, &GetRecordsInput{ShardIterator: &latest, Limit: ptr(int64(1001))}); code(err) != CodeValidation {
		t.Fatalf("limit 1001: %v", err)
	}
	missing := strings.Replace(arn, "tab4/stream", "zz9/stream", 1)
	if _, err := e.DescribeStream(ctx, acct, &DescribeStreamInput{StreamArn: &missing}); code(err) != CodeResourceNotFound {
		t.Fatalf("missing stream: %v", err)
	}
	typ, noShard := "TRIM_HORIZON", "shardId-00000000000000000000-00000099"
	if _, err := e.GetShardIterator(ctx, acct, &GetShardIteratorInput{StreamArn: &arn, ShardId: &noShard, ShardIteratorType: &typ}); code(err) != CodeResourceNotFound {
		t.Fatalf("missing shard: %v", err)
	}
	typ = "NOPE"
	if _, err := e.GetShardIterator(ctx, acct, &GetShardIteratorInput{StreamArn: &arn, ShardId: &sh, ShardIteratorType: &typ}); code(err) != CodeValidation {
		t.Fatalf("bad type: %v", err)
	}
	typ = "AT_SEQUENCE_NUMBER"
	if _, err := e.GetShardIterator(ctx, acct, &GetShardIteratorInput{StreamArn: &arn, ShardId: &sh, ShardIteratorType: &typ}); code(err) != CodeValidation {
		t.Fatalf("AT without number: %v", err)
	}
	// expiry: 15 minutes
	c.add(IteratorLifetime + time.Second)
	if _, err := e.GetRecords(ctx, acct, &GetRecordsInput{ShardIterator: &latest}); code(err) != CodeExpiredIterator {
		t.Fatalf("expired: %v", err)
	}
	// trimming: records older than the retention are removed; an
	// AT_SEQUENCE_NUMBER at a trimmed record is refused, TRIM_HORIZON
	// starts after the trim point
	first := all[0].Dynamodb.SequenceNumber
	c.add(-IteratorLifetime - time.Second)
	e.retention = 200 * time.Millisecond
	time.Sleep(300 * time.Millisecond)
	put(t, e, tn, item("e", "1"))
	tab, _ := e.loadTable(ctx, acct, tn)
	if err := e.trimStreams(ctx, tab); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetShardIterator(ctx, acct, &GetShardIteratorInput{StreamArn: &arn, ShardId: &sh, ShardIteratorType: &typ, SequenceNumber: &first}); code(err) != CodeTrimmedDataAccess {
		t.Fatalf("AT trimmed: %v", err)
	}
	if r := getRecords(t, e, iter(t, e, arn, sh, "TRIM_HORIZON", nil), 1000).Records; len(r) != 1 || r[0].Dynamodb.Keys["pk"].Str != "e" {
		t.Fatalf("after trim: %+v", r)
	}
}

func TestStreamTrimmedIterator(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	e.retention = 200 * time.Millisecond
	arn := streamTable(t, e, "tab5", "KEYS_ONLY")
	tn := "tab5"
	put(t, e, tn, item("a", "1"))
	sh := shards(t, e, arn)[0].ShardId
	it := iter(t, e, arn, sh, "TRIM_HORIZON", nil)
	time.Sleep(300 * time.Millisecond)
	put(t, e, tn, item("b", "1"))
	tab, _ := e.loadTable(ctx, acct, tn)
	if err := e.trimStreams(ctx, tab); err != nil {
		t.Fatal(err)
	}
	if _, err := e.GetRecords(ctx, acct, &GetRecordsInput{ShardIterator: &it}); code(err) != CodeTrimmedDataAccess {
		t.Fatalf("iterator before the trim point: %v", err)
	}
}

func TestStreamTTLDeletionIsService(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	arn := streamTable(t, e, "tab6", "OLD_IMAGE")
	tn := "tab6"
	if _, err := e.UpdateTimeToLive(ctx, acct, &UpdateTimeToLiveInput{TableName: &tn,
		TimeToLiveSpecification: &TimeToLiveSpecification{Enabled: ptr(true), AttributeName: ptr("exp")}}); err != nil {
		t.Fatal(err)
	}
	e.Start(ctx, []string{acct})
	defer e.Stop()
	exp := strconv.FormatInt(time.Now().Unix()-10, 10)
	put(t, e, tn, attr.Item{"pk": attr.StrValue("x"), "exp": attr.MustNum(exp)})
	deadline := time.Now().Add(20 * time.Second)
	for {
		recs := readAll(t, e, arn)
		if len(recs) == 2 {
			r := recs[1]
			if r.EventName != "REMOVE" || r.UserIdentity == nil || r.UserIdentity.Type != "Service" || r.UserIdentity.PrincipalId != "dynamodb.amazonaws.com" || r.Dynamodb.OldImage["exp"].Str != exp {
				t.Fatalf("TTL record %+v", r)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TTL record: %+v", recs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// noLog is a backend without the change log capability.
type noLog struct{ backend.Backend }

func (noLog) Capabilities() backend.Capabilities { return backend.Capabilities{} }

func TestStreamNeedsChangeLog(t *testing.T) {
	e := New(noLog{memSQLite(t)}, Options{})
	_, err := e.CreateTable(context.Background(), acct, &CreateTableInput{TableName: ptr("nolog"),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST",
		StreamSpecification:  &StreamSpecification{StreamEnabled: ptr(true), StreamViewType: "KEYS_ONLY"}})
	if code(err) != CodeValidation || !strings.Contains(err.Error(), "not supported") {
		t.Fatalf("stream on a backend without a change log: %v", err)
	}
}

// TestGetRecordsServerTime measures, when EXTENDDB_STREAM_BENCH is set,
// the server's part of GetRecords of 1,000 records (~1 KB items,
// NEW_AND_OLD_IMAGES, SQLite): the engine call and the JSON encoding.
func TestGetRecordsServerTime(t *testing.T) {
	if os.Getenv("EXTENDDB_STREAM_BENCH") == "" {
		t.Skip("EXTENDDB_STREAM_BENCH not set")
	}
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	arn := streamTable(t, e, "bench", "NEW_AND_OLD_IMAGES")
	pad := strings.Repeat("x", 900)
	for i := 0; i < 1000; i++ {
		put(t, e, "bench", attr.Item{"pk": attr.StrValue(strconv.Itoa(i)), "v": attr.StrValue(pad)})
	}
	sh := shards(t, e, arn)[0].ShardId
	var lat []time.Duration
	buf := make([]byte, 0, 2<<20)
	for i := 0; i < 300; i++ {
		it := iter(t, e, arn, sh, "TRIM_HORIZON", nil)
		start := time.Now()
		out, err := e.GetRecords(ctx, acct, &GetRecordsInput{ShardIterator: &it})
		if err != nil {
			t.Fatal(err)
		}
		if buf, err = out.AppendJSON(buf[:0]); err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if len(out.recs) != 1000 {
			t.Fatalf("%d records", len(out.recs))
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	t.Logf("GetRecords of 1,000 records, server side: p50 %v, p99 %v, max %v (%d bytes)", lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1], len(buf))
}

// TestStreamAdoptsLegacyTable: a table stored by a version without
// streams (StreamSpecification and label, no stream state) gets its
// stream from the background loop, under the label it shows.
func TestStreamAdoptsLegacyTable(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	e.streamCheck = 20 * time.Millisecond
	arn := streamTable(t, e, "legacy", "KEYS_ONLY")
	if _, err := e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: acct, Name: "legacy", Fn: func(old *backend.Table) ([]byte, error) {
		var st storedTable
		if err := json.Unmarshal(old.Desc, &st); err != nil {
			return nil, err
		}
		st.Streams, st.ShardGen = nil, 0
		return json.Marshal(&st)
	}}); err != nil {
		t.Fatal(err)
	}
	e.tables.drop(acct, "legacy")
	e.Start(ctx, []string{acct})
	defer e.Stop()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := e.DescribeStream(ctx, acct, &DescribeStreamInput{StreamArn: &arn}); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("legacy stream not adopted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.tables.drop(acct, "legacy")
	put(t, e, "legacy", item("a", "1"))
	if recs := readAll(t, e, arn); len(recs) != 1 {
		t.Fatalf("records %+v", recs)
	}
}

// TestShardIteratorRefusesTheChildsNumber: a closed shard's End bounds its
// records from above and may reach past its child's first records (a
// write tagged with the parent's generation commits after the child
// opened, and the settle reads the log's last record later still). A
// sequence number inside that overlap that belongs to the child is not
// the parent's: GetShardIterator on the parent refuses it.
func TestShardIteratorRefusesTheChildsNumber(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	arn := streamTable(t, e, "overlap", "KEYS_ONLY")
	tn := "overlap"
	put(t, e, tn, item("a", "1"))
	tab, err := e.loadTable(ctx, acct, tn)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.rollover(ctx, tab, true); err != nil {
		t.Fatal(err)
	}
	put(t, e, tn, item("b", "1"))
	last, err := e.logLast(ctx, tab.ref)
	if err != nil {
		t.Fatal(err)
	}
	// The parent's End as a late settle would have recorded it.
	if _, err := e.editStreams(ctx, tab.ref, func(st *storedTable) bool {
		st.Streams[0].Shards[0].End = last
		return true
	}); err != nil {
		t.Fatal(err)
	}
	sh := shards(t, e, arn)
	if len(sh) != 2 {
		t.Fatalf("shards: %+v", sh)
	}
	child := getRecords(t, e, iter(t, e, arn, sh[1].ShardId, "TRIM_HORIZON", nil), 10)
	if len(child.Records) != 1 || child.Records[0].Dynamodb.Keys["pk"].Str != "b" {
		t.Fatalf("child shard: %+v", child)
	}
	seq := child.Records[0].Dynamodb.SequenceNumber
	for _, typ := range []string{"AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"} {
		_, err := e.GetShardIterator(ctx, acct, &GetShardIteratorInput{StreamArn: &arn, ShardId: &sh[0].ShardId, ShardIteratorType: &typ, SequenceNumber: &seq})
		if code(err) != CodeValidation || !strings.Contains(err.Error(), "Invalid SequenceNumber for the shard") {
			t.Fatalf("%s with the child's number on the parent: %v", typ, err)
		}
		// The child takes its own number.
		iter(t, e, arn, sh[1].ShardId, typ, &seq)
	}
	// The parent still takes its own record's number and reads it alone.
	parent := getRecords(t, e, iter(t, e, arn, sh[0].ShardId, "TRIM_HORIZON", nil), 10)
	if len(parent.Records) != 1 || parent.Records[0].Dynamodb.Keys["pk"].Str != "a" {
		t.Fatalf("parent shard: %+v", parent)
	}
	own := parent.Records[0].Dynamodb.SequenceNumber
	p := getRecords(t, e, iter(t, e, arn, sh[0].ShardId, "AT_SEQUENCE_NUMBER", &own), 10)
	if len(p.Records) != 1 || p.Records[0].Dynamodb.Keys["pk"].Str != "a" {
		t.Fatalf("parent at its own number: %+v", p)
	}
}
