package format

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

func pitrRecs(first, n int64) []PITRRecord {
	var out []PITRRecord
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := int64(0); i < n; i++ {
		out = append(out, PITRRecord{Seq: first + i, At: PITRTime(at.Add(time.Duration(i) * time.Millisecond)), Event: "INSERT",
			Keys: []byte(`{"pk":{"S":"a"}}`), NewImage: []byte(`{"pk":{"S":"a"},"v":{"N":"1"}}`)})
	}
	return out
}

func TestSegmentRoundTripAndChain(t *testing.T) {
	s1, err := EncodeSegment(pitrRecs(1, 10), "")
	if err != nil {
		t.Fatal(err)
	}
	if s1.Side.First != 1 || s1.Side.Last != 10 || s1.Side.Prev != zeroHash || s1.Side.Name != "00000000000000000001.jsonl.zst" {
		t.Fatalf("sidecar %+v", s1.Side)
	}
	side, err := ParseSegmentSidecar("k", s1.Side.Encode())
	if err != nil || side != s1.Side {
		t.Fatalf("parse: %+v %v", side, err)
	}
	recs, err := VerifySegment("k", s1.Data, side)
	if err != nil || len(recs) != 10 || string(recs[3].NewImage) != `{"pk":{"S":"a"},"v":{"N":"1"}}` {
		t.Fatalf("verify: %v", err)
	}
	s2, _ := EncodeSegment(pitrRecs(11, 3), s1.Side.Hash())
	if s2.Side.Prev != s1.Side.Hash() {
		t.Fatal("chain")
	}
	again, err := SidecarFor(SegmentKey("p", 11), s2.Data, s1.Side.Hash())
	if err != nil || again != s2.Side {
		t.Fatalf("SidecarFor: %+v %v", again, err)
	}
	// A flipped byte is caught, naming the object.
	bad := append([]byte(nil), s1.Data...)
	bad[len(bad)/2] ^= 1
	if _, err := VerifySegment("acct/t/pitr/x/segments/1", bad, side); !errors.Is(err, ErrSegment) || !strings.Contains(err.Error(), "acct/t/pitr/x/segments/1") {
		t.Fatalf("flipped byte: %v", err)
	}
	// A damaged sidecar is refused.
	sb := s1.Side.Encode()
	sb[3] = 'x'
	if _, err := ParseSegmentSidecar("k", sb); !errors.Is(err, ErrSegment) {
		t.Fatalf("damaged sidecar: %v", err)
	}
	if _, err := EncodeSegment([]PITRRecord{pitrRecs(5, 1)[0], pitrRecs(5, 1)[0]}, ""); !errors.Is(err, ErrSegment) {
		t.Fatalf("out of order: %v", err)
	}
}

func TestSegmentKeys(t *testing.T) {
	k := SegmentKey(PITRPrefix("000000000000", "t", "id-1"), 42)
	if k != "000000000000/t/pitr/id-1/segments/00000000000000000042.jsonl.zst" {
		t.Fatal(k)
	}
	if f, sc, ok := SegmentFirst(k); !ok || sc || f != 42 {
		t.Fatal(f, sc, ok)
	}
	if f, sc, ok := SegmentFirst(SegmentSidecarKey(k)); !ok || !sc || f != 42 {
		t.Fatal(f, sc, ok)
	}
	if _, _, ok := SegmentFirst("a/b/42.jsonl.zst"); ok {
		t.Fatal("short name accepted")
	}
}

// AppendPITRLine writes what json.Marshal writes for a line whose images
// hold nothing json.Marshal escapes, and a line that decodes to the same
// record otherwise.
func TestAppendPITRLineMatchesMarshal(t *testing.T) {
	recs := []PITRRecord{
		pitrRecs(7, 1)[0],
		{Seq: 1 << 40, At: "2026-12-01T00:00:00.001Z", Time: "2026-12-01T00:00:00.000Z", Event: "MODIFY",
			Keys: []byte(`{"pk":{"S":"a"},"sk":{"N":"2"}}`), NewImage: []byte(`{"pk":{"S":"a"},"v":{"B":"AAE="}}`),
			OldImage: []byte(`{"pk":{"S":"a"},"v":{"L":[{"S":"é\u2028"}]}}`), Txn: "00112233445566778899aabbccddeeff", TxnCount: 3},
		{Seq: 9, At: "x", Time: "y", Event: "REMOVE", Keys: []byte(`{"pk":{"S":"a"}}`), Hidden: true, Service: true},
		{Seq: 10, At: "a\"<b>\n", Time: "t", Event: "INSERT"},
	}
	for _, r := range recs {
		got, err := AppendPITRLine(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(&r)
		if string(got) != string(want)+"\n" {
			t.Errorf("line\n got %s\nwant %s", got, want)
		}
	}
	html := PITRRecord{Seq: 1, At: "a", Time: "b", Event: "INSERT", Keys: []byte(`{"pk":{"S":"<&>"}}`),
		NewImage: []byte(`{"pk":{"S":"<&>"},"v":{"S":"a<b"}}`)}
	got, err := AppendPITRLine(nil, &html)
	if err != nil {
		t.Fatal(err)
	}
	var back PITRRecord
	if err := json.Unmarshal(got, &back); err != nil || !reflect.DeepEqual(back, html) {
		t.Fatalf("decoded %+v, %v", back, err)
	}
	for _, img := range []string{"{\"a\":\n1}", `[1]`, `{"a":1`} {
		bad := PITRRecord{Seq: 3, At: "a", Time: "b", Event: "INSERT", Keys: []byte(`{"k":{"S":"1"}}`), NewImage: []byte(img)}
		if _, err := AppendPITRLine(nil, &bad); !errors.Is(err, ErrSegment) {
			t.Errorf("image %q: %v", img, err)
		}
	}
}

// BenchmarkEncodeSegment: a ship interval's segment of 3,000 inserts of
// 1 KiB items (random payloads, as the load tool writes them).
func BenchmarkEncodeSegment(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	recs := make([]PITRRecord, 3000)
	size := 0
	for i := range recs {
		p := make([]byte, 1000)
		for j := range p {
			p[j] = letters[rng.IntN(len(letters))]
		}
		key := fmt.Sprintf(`{"pk":{"S":"p3-%d"},"sk":{"S":"0"}}`, i)
		recs[i] = PITRRecord{Seq: int64(i + 1), At: "2026-12-01T00:00:00.001Z", Time: "2026-12-01T00:00:00.000Z", Event: "INSERT",
			Keys: []byte(key), NewImage: []byte(key[:len(key)-1] + `,"payload":{"S":"` + string(p) + `"},"ver":{"N":"0"}}`)}
		size += len(recs[i].NewImage) + len(key)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeSegment(recs, ""); err != nil {
			b.Fatal(err)
		}
	}
}
