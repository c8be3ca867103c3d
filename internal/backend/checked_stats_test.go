package backend

import (
	"context"
	"strings"
	"testing"
)

// TableStats of the fake calls Size once on a row and answers f.err.
func (f *fakeBackend) TableStats(_ context.Context, p TableStatsParams) (*TableStatsResult, error) {
	if f.err != nil {
		return nil, f.err
	}
	res := &TableStatsResult{ItemCount: 1}
	if p.Size != nil {
		res.SizeBytes = p.Size([]byte("row"))
	}
	if f.rows != nil {
		res.ItemCount = -1
	}
	return res, nil
}

func TestCheckedTableStats(t *testing.T) {
	f := &fakeBackend{}
	b, got := checkedFake(t, f)
	res, err := b.TableStats(t.Context(), TableStatsParams{Size: func(item []byte) int64 { return int64(len(item)) }})
	if err != nil || res.ItemCount != 1 || res.SizeBytes != 3 {
		t.Fatalf("plain call: %+v %v", res, err)
	}
	_, err = b.TableStats(t.Context(), TableStatsParams{Size: func([]byte) int64 { panic("boom") }})
	if !IsKind(err, KindInternal) || !strings.Contains(err.Error(), "size function panicked") {
		t.Fatalf("panicking Size: %v", err)
	}
	f.err = Errorf(KindTableNotFound, "gone")
	if _, err = b.TableStats(t.Context(), TableStatsParams{}); !IsKind(err, KindTableNotFound) || len(*got) != 0 {
		t.Fatalf("declared kind: %v %v", err, *got)
	}
	f.err = Errorf(KindTableExists, "x")
	_, err = b.TableStats(t.Context(), TableStatsParams{})
	wantViolation(t, "TableStats answering TableExists", err, got, `kind "table exists"`)
	f.err, f.rows = nil, []Row{}
	_, err = b.TableStats(t.Context(), TableStatsParams{})
	wantViolation(t, "negative count", err, got, "negative figures")
}
