package engine

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

// BenchmarkPutItemStream: PutItem of ~1 KB items on SQLite without a
// stream and with a NEW_AND_OLD_IMAGES stream (items overwritten, so the
// records carry both images).
func BenchmarkPutItemStream(b *testing.B) {
	// "pitr": no stream, point-in-time recovery on (a record with both
	// images per write, as NEW_AND_OLD_IMAGES).
	for _, view := range []string{"", "NEW_AND_OLD_IMAGES", "pitr"} {
		name := view
		if name == "" {
			name = "none"
		}
		b.Run(name, func(b *testing.B) {
			t := &testing.T{}
			e, _ := newStreamEngine(t)
			tn := "bench"
			in := &CreateTableInput{TableName: &tn,
				KeySchema:            []KeySchemaElement{{AttributeName: "pk", KeyType: "HASH"}},
				AttributeDefinitions: []AttributeDefinition{{AttributeName: "pk", AttributeType: "S"}},
				BillingMode:          "PAY_PER_REQUEST"}
			if view != "" && view != "pitr" {
				in.StreamSpecification = &StreamSpecification{StreamEnabled: ptr(true), StreamViewType: view}
			}
			if _, err := e.CreateTable(context.Background(), acct, in); err != nil {
				b.Fatal(err)
			}
			if view == "pitr" {
				e.SetPITR(&fakePITR{})
				if _, err := setPITR(e, tn, true, nil); err != nil {
					b.Fatal(err)
				}
			}
			pad := strings.Repeat("x", 1000)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				it := attr.Item{"pk": attr.StrValue(strconv.Itoa(i % 1000)), "v": attr.StrValue(pad), "n": attr.MustNum(strconv.Itoa(i))}
				if _, err := e.PutItem(context.Background(), acct, &PutItemInput{TableName: &tn, Item: it}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
