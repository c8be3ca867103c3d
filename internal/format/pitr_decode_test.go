package format

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// TestDecodeRecordIsJSON: decodeRecord reads every line as encoding/json
// does: records as the shipper writes them (json.Marshal), with random
// items, then the same lines mutated in one to three ways (each decoded
// by both: the same record, or an error from both).
func TestDecodeRecordIsJSON(t *testing.T) {
	g := lineGen{r: rand.New(rand.NewPCG(7, 11))}
	s := diffSchemas[0]
	item := func() json.RawMessage {
		l := g.line(s) // {"Item":{...}}
		return json.RawMessage(l[len(`{"Item":`) : len(l)-1])
	}
	var lines [][]byte
	for i := range 3000 {
		r := PITRRecord{Seq: int64(i + 1), At: "2026-12-05T22:00:00.123Z", Time: "2026-12-05T21:59:59.999Z",
			Event: []string{"INSERT", "MODIFY", "REMOVE"}[i%3], Keys: item()}
		if i%3 != 2 {
			r.NewImage = item()
		}
		if i%3 == 1 {
			r.OldImage = item()
		}
		if i%5 == 0 {
			r.Txn, r.TxnCount = "0a1b2c", 1+i%4
		}
		r.Hidden, r.Service = i%7 == 0, i%11 == 0
		b, err := json.Marshal(r)
		if err != nil {
			continue // a generated item that is not JSON
		}
		lines = append(lines, b)
	}
	lines = append(lines, []byte(`{}`), []byte(`{"Seq":1,"seq":2}`), []byte(`{"Seq":1,"Keys":null}`),
		[]byte(`{"Seq":1,"Other":[1,2]}`), []byte(`{"Seq":1.0}`), []byte(`{"Seq":01}`), []byte(`{"Seq":-0}`), []byte(`{"Seq":-01}`),
		[]byte(`{"Seq":1,"TxnCount":-007}`), []byte(`{"Seq":99999999999999999999}`),
		[]byte(` {"Seq":1}`), []byte(`{"Seq":1} `), []byte(`{"Seq":1,"Txn":"\u0061"}`),
		[]byte(`{"Seq":1,"Keys":{"pk":{"S":"a`+"\x01"+`"}}}`), []byte(`{"Seq":1,"Hidden":tru}`))
	fast := 0
	check := func(line []byte) {
		t.Helper()
		var got, want PITRRecord
		gerr := decodeRecord(line, &got)
		werr := json.Unmarshal(line, &want)
		if (gerr == nil) != (werr == nil) || gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("line %s:\ndecodeRecord %+v, %v\nencoding/json %+v, %v", line, got, gerr, want, werr)
		}
		var r PITRRecord
		if decodeRecordFast(line, &r) == nil {
			fast++
		}
	}
	for _, l := range lines {
		check(l)
		for range 5 {
			check(g.mutate(l))
		}
	}
	if fast < len(lines)*9/10 {
		t.Fatalf("the fast path read %d of %d lines", fast, len(lines))
	}
	if !strings.Contains(string(lines[0]), `"Keys":{`) || bytes.Contains(lines[0], []byte("\n")) {
		t.Fatalf("unexpected line shape %s", lines[0])
	}
}

// BenchmarkDecodeRecord: a segment line of a ~1 KiB item (MODIFY, both
// images), by decodeRecord and by encoding/json.
func BenchmarkDecodeRecord(b *testing.B) {
	img := json.RawMessage(`{"pk":{"S":"user#000123"},"sk":{"N":"42"},"payload":{"S":"` + strings.Repeat("abcdefgh", 128) + `"},"n":{"N":"7"}}`)
	line, _ := json.Marshal(PITRRecord{Seq: 123456, At: "2026-12-05T22:00:00.123Z", Time: "2026-12-05T21:59:59.999Z",
		Event: "MODIFY", Keys: json.RawMessage(`{"pk":{"S":"user#000123"},"sk":{"N":"42"}}`), NewImage: img, OldImage: img})
	for _, c := range []struct {
		name string
		fn   func([]byte, *PITRRecord) error
	}{{"decodeRecord", decodeRecord}, {"encoding-json", func(l []byte, r *PITRRecord) error { return json.Unmarshal(l, r) }}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(line)))
			for b.Loop() {
				var r PITRRecord
				if err := c.fn(line, &r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
