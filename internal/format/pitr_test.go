package format

import (
	"errors"
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
