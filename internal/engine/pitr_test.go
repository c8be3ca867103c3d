package engine

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// fakePITR is a PITR service answering a fixed window.
type fakePITR struct {
	mu sync.Mutex
	w  PITRWindow
}

func (f *fakePITR) Window(ctx context.Context, ref backend.TableRef, days int64) (PITRWindow, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.w, nil
}

func (f *fakePITR) RestoreToPointInTime(ctx context.Context, src PITRHistory, at time.Time, account, name string,
	create func(ctx context.Context, job string) (*backend.Table, error)) error {
	_, err := create(ctx, "fake-job")
	return err
}

func (f *fakePITR) StoredHistory(ctx context.Context, account, name, arn string) (*StoredPITRHistory, error) {
	return nil, nil
}

func plainTable(t *testing.T, e *Engine, name string) {
	t.Helper()
	if _, err := e.CreateTable(context.Background(), acct, &CreateTableInput{TableName: ptr(name),
		KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
		AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
		BillingMode:          "PAY_PER_REQUEST"}); err != nil {
		t.Fatal(err)
	}
}

func setPITR(e *Engine, name string, on bool, days *int64) (*ContinuousBackupsOutput, error) {
	return e.UpdateContinuousBackups(context.Background(), acct, &UpdateContinuousBackupsInput{TableName: &name,
		PointInTimeRecoverySpecification: &PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: &on, RecoveryPeriodInDays: days}})
}

func TestPITRUnavailableWithoutService(t *testing.T) {
	e, _ := newStreamEngine(t)
	plainTable(t, e, "pt0")
	_, err := setPITR(e, "pt0", true, nil)
	if code(err) != CodeContinuousBackupsUnavailable || !strings.Contains(err.Error(), "[backup.store]") {
		t.Fatalf("enable without a store: %v", err)
	}
	out, err := setPITR(e, "pt0", false, nil)
	if err != nil || out.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus != "DISABLED" {
		t.Fatalf("disable: %+v %v", out, err)
	}
	for _, d := range []int64{0, 36, -1} {
		_, err := setPITR(e, "pt0", true, &d)
		if code(err) != CodeValidation || !strings.Contains(err.Error(), "recoveryPeriodInDays") {
			t.Fatalf("period %d: %v", d, err)
		}
	}
	if _, err := setPITR(e, "nope", false, nil); code(err) != CodeTableNotFound {
		t.Fatalf("missing table: %v", err)
	}
	if _, err := e.UpdateContinuousBackups(context.Background(), acct, &UpdateContinuousBackupsInput{TableName: ptr("pt0")}); code(err) != CodeValidation {
		t.Fatalf("no specification: %v", err)
	}
}

func TestPITREnableDescribeDisable(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	at := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	svc := &fakePITR{}
	e.SetPITR(svc)
	plainTable(t, e, "pt1")
	out, err := setPITR(e, "pt1", true, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := out.ContinuousBackupsDescription.PointInTimeRecoveryDescription
	if out.ContinuousBackupsDescription.ContinuousBackupsStatus != "ENABLED" || d.PointInTimeRecoveryStatus != "ENABLED" ||
		d.RecoveryPeriodInDays == nil || *d.RecoveryPeriodInDays != 35 || d.EarliestRestorableDateTime != nil {
		t.Fatalf("enabled, nothing shipped: %+v", d)
	}
	svc.mu.Lock()
	svc.w = PITRWindow{Earliest: at, Latest: at.Add(30 * time.Minute), Shipped: at.Add(30 * time.Minute)}
	svc.mu.Unlock()
	seven := int64(7)
	if _, err := setPITR(e, "pt1", true, &seven); err != nil {
		t.Fatal(err)
	}
	desc, err := e.DescribeContinuousBackups(ctx, acct, &DescribeContinuousBackupsInput{TableName: ptr("pt1")})
	if err != nil {
		t.Fatal(err)
	}
	d = desc.ContinuousBackupsDescription.PointInTimeRecoveryDescription
	if *d.RecoveryPeriodInDays != 7 || d.EarliestRestorableDateTime == nil || *d.EarliestRestorableDateTime != epochSeconds(at) ||
		*d.LatestRestorableDateTime != epochSeconds(at.Add(30*time.Minute)) {
		t.Fatalf("window: %+v", d)
	}
	// The ARN names the table too.
	tbl, _ := e.loadTable(ctx, acct, "pt1")
	if _, err := e.DescribeContinuousBackups(ctx, acct, &DescribeContinuousBackupsInput{TableName: &tbl.stored.Desc.TableArn}); err != nil {
		t.Fatal(err)
	}
	out, err = setPITR(e, "pt1", false, nil)
	if err != nil || out.ContinuousBackupsDescription.PointInTimeRecoveryDescription.PointInTimeRecoveryStatus != "DISABLED" ||
		out.ContinuousBackupsDescription.PointInTimeRecoveryDescription.RecoveryPeriodInDays != nil {
		t.Fatalf("disabled: %+v %v", out, err)
	}
}

// logRecords reads a table's whole change log, decoded.
func logRecords(t *testing.T, e *Engine, name string) []*record {
	t.Helper()
	tbl, err := e.loadTable(context.Background(), acct, name)
	if err != nil {
		t.Fatal(err)
	}
	cl, _ := e.changeLog()
	res, err := cl.ReadLog(context.Background(), backend.ReadLogParams{Table: tbl.ref, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var out []*record
	for _, r := range res.Records {
		d, err := decodeRecord(r.Data)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

func TestPITRRecordsKeepFullImages(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	e.SetPITR(&fakePITR{})
	plainTable(t, e, "pt2")
	put(t, e, "pt2", item("a", "0")) // before PITR: no record
	if _, err := setPITR(e, "pt2", true, nil); err != nil {
		t.Fatal(err)
	}
	e.tables.drop(acct, "pt2")
	put(t, e, "pt2", item("a", "1"))
	put(t, e, "pt2", item("a", "1")) // unchanged: no record
	tn := "pt2"
	if _, err := e.DeleteItem(ctx, acct, &DeleteItemInput{TableName: &tn, Key: attr.Item{"pk": attr.StrValue("a")}}); err != nil {
		t.Fatal(err)
	}
	recs := logRecords(t, e, "pt2")
	if len(recs) != 2 {
		t.Fatalf("%d records, want 2", len(recs))
	}
	m, r := recs[0], recs[1]
	if m.event != eventModify || m.flags&flagFull == 0 || len(m.label) != 0 || !bytes.Contains(m.newRaw, []byte(`"1"`)) || !bytes.Contains(m.oldRaw, []byte(`"0"`)) {
		t.Fatalf("modify record %+v", m)
	}
	if r.event != eventRemove || len(r.oldRaw) == 0 || len(r.newRaw) != 0 {
		t.Fatalf("remove record %+v", r)
	}
	// As shipping reads them.
	tbl, _ := e.loadTable(ctx, acct, "pt2")
	cl, _ := e.changeLog()
	res, _ := cl.ReadLog(ctx, backend.ReadLogParams{Table: tbl.ref, Limit: 10})
	f, err := e.PITRRecord(res.Records[0].Data)
	if err != nil || f.Event != "MODIFY" || string(f.Keys) != `{"pk":{"S":"a"}}` || f.OldImage == nil || f.NewImage == nil ||
		f.Txn != nil || f.Hidden || time.Since(f.Time) > time.Minute {
		t.Fatalf("PITRRecord: %+v %v", f, err)
	}
	if f, err := e.PITRRecord(res.Records[1].Data); err != nil || f.Event != "REMOVE" || f.NewImage != nil {
		t.Fatalf("PITRRecord of the delete: %+v %v", f, err)
	}
	// A stream record without full images cannot be replayed.
	plain := (&liveStream{view: viewKeys}).logRecord(nil, &backend.Change{Op: backend.Put, Item: []byte(`{"pk":{"S":"b"}}`)}, []byte(`{"pk":{"S":"b"}}`), false, 1, nil)
	if _, err := e.PITRRecord(plain); err == nil {
		t.Fatal("a keys-only record accepted for replay")
	}
}

func TestPITRStreamShowsItsViewOnly(t *testing.T) {
	for _, view := range []string{"KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE"} {
		t.Run(view, func(t *testing.T) {
			e, _ := newStreamEngine(t)
			e.SetPITR(&fakePITR{})
			arn := streamTable(t, e, "ps1", view)
			put(t, e, "ps1", item("a", "1"))
			before := readAll(t, e, arn)
			if _, err := setPITR(e, "ps1", true, nil); err != nil {
				t.Fatal(err)
			}
			e.tables.drop(acct, "ps1")
			put(t, e, "ps1", item("a", "2"))
			put(t, e, "ps1", item("b", "2"))
			recs := readAll(t, e, arn)
			if len(recs) != 3 {
				t.Fatalf("%d records", len(recs))
			}
			for _, r := range recs[1:] {
				wantNew := view == "NEW_IMAGE"
				wantOld := view == "OLD_IMAGE" && r.EventName == "MODIFY"
				if (r.Dynamodb.NewImage != nil) != wantNew || (r.Dynamodb.OldImage != nil) != wantOld {
					t.Fatalf("%s: images new %v old %v", r.EventName, r.Dynamodb.NewImage, r.Dynamodb.OldImage)
				}
			}
			// The same write sized the same with PITR on as off.
			if recs[2].Dynamodb.SizeBytes != before[0].Dynamodb.SizeBytes {
				t.Fatalf("SizeBytes %d with PITR, %d without", recs[2].Dynamodb.SizeBytes, before[0].Dynamodb.SizeBytes)
			}
			for _, r := range logRecords(t, e, "ps1")[1:] {
				if r.flags&flagFull == 0 || len(r.newRaw) == 0 {
					t.Fatalf("log record without full images: %+v", r)
				}
			}
		})
	}
}

func TestPITRTransactionMarker(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	e.SetPITR(&fakePITR{})
	arn := streamTable(t, e, "pt_t1", "NEW_AND_OLD_IMAGES")
	plainTable(t, e, "pt_t2") // no PITR: no record, not counted
	put(t, e, "pt_t1", item("keep", "1"))
	if _, err := setPITR(e, "pt_t1", true, nil); err != nil {
		t.Fatal(err)
	}
	e.tables.drop(acct, "pt_t1")
	t1, t2 := "pt_t1", "pt_t2"
	if _, err := e.TransactWriteItems(ctx, acct, &TransactWriteItemsInput{TransactItems: []TransactWriteItem{
		{Put: &TransactPut{TableName: &t1, Item: item("x", "1")}},
		{Put: &TransactPut{TableName: &t1, Item: item("keep", "1")}}, // identical bytes
		{Delete: &TransactDelete{TableName: &t1, Key: attr.Item{"pk": attr.StrValue("absent")}}},
		{Update: &TransactUpdate{TableName: &t1, Key: attr.Item{"pk": attr.StrValue("none")}, UpdateExpression: ptr("REMOVE v")}},
		{ConditionCheck: &ConditionCheck{TableName: &t1, Key: attr.Item{"pk": attr.StrValue("x0")}, ConditionExpression: ptr("attribute_not_exists(pk)")}},
		{Put: &TransactPut{TableName: &t2, Item: item("y", "1")}},
	}}); err != nil {
		t.Fatal(err)
	}
	recs := logRecords(t, e, "pt_t1")
	if len(recs) != 5 { // the stream's INSERT of "keep" and the transaction's four write operations
		t.Fatalf("%d records", len(recs))
	}
	hidden := 0
	for _, r := range recs[1:] {
		if r.flags&flagTxn == 0 || r.txnCount != 4 || !bytes.Equal(r.txn, recs[1].txn) {
			t.Fatalf("marker %+v", r)
		}
		if r.flags&flagHidden != 0 {
			hidden++
		}
	}
	if hidden != 3 {
		t.Fatalf("%d hidden records, want 3", hidden)
	}
	if len(logRecords(t, e, "pt_t2")) != 0 {
		t.Fatal("records on a table without PITR or stream")
	}
	// The stream shows the real changes only.
	var got []string
	for _, r := range readAll(t, e, arn) {
		got = append(got, r.EventName+":"+r.Dynamodb.Keys["pk"].Str)
	}
	if strings.Join(got, ",") != "INSERT:keep,INSERT:x" {
		t.Fatalf("stream %v", got)
	}
	// The no-op writes created nothing.
	for _, k := range []string{"absent", "none"} {
		out, err := e.GetItem(ctx, acct, &GetItemInput{TableName: &t1, Key: attr.Item{"pk": attr.StrValue(k)}})
		if err != nil || out.Item != nil {
			t.Fatalf("%s: %+v %v", k, out, err)
		}
	}
}

func TestPITRTrimStopsAtShipped(t *testing.T) {
	ctx := context.Background()
	e, _ := newStreamEngine(t)
	svc := &fakePITR{}
	e.SetPITR(svc)
	plainTable(t, e, "ptr")
	if _, err := setPITR(e, "ptr", true, nil); err != nil {
		t.Fatal(err)
	}
	e.tables.drop(acct, "ptr")
	for i := 0; i < 3; i++ {
		put(t, e, "ptr", item("k"+string(rune('a'+i)), "1"))
		time.Sleep(5 * time.Millisecond)
	}
	tbl, _ := e.loadTable(ctx, acct, "ptr")
	cl, _ := e.changeLog()
	res, _ := cl.ReadLog(ctx, backend.ReadLogParams{Table: tbl.ref, Limit: 10})
	if len(res.Records) != 3 {
		t.Fatalf("%d records", len(res.Records))
	}
	// Nothing shipped: nothing trimmed, however old.
	if err := e.trimStreams(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	if info, _ := cl.LogInfo(ctx, backend.LogInfoParams{Table: tbl.ref}); info.Count != 3 {
		t.Fatalf("trimmed unshipped records: %+v", info)
	}
	// Shipped up to the second record: the first may go.
	svc.mu.Lock()
	svc.w.Shipped = res.Records[1].At
	svc.mu.Unlock()
	if err := e.trimStreams(ctx, tbl); err != nil {
		t.Fatal(err)
	}
	info, _ := cl.LogInfo(ctx, backend.LogInfoParams{Table: tbl.ref})
	if info.First != res.Records[1].Seq || info.Count != 2 {
		t.Fatalf("after trim to the shipped record: %+v", info)
	}
}
