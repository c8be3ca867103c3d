package sqlutil

import (
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
)

func TestCursorSeeksScan(t *testing.T) {
	pk := []byte("p")
	h := backend.KeyHash(pk)
	for _, tc := range []struct {
		after *backend.Cursor
		segLo uint32
		want  bool
	}{
		{nil, 0, false},
		{&backend.Cursor{PK: pk}, 0, true},
		{&backend.Cursor{PK: pk}, h, true},
		{&backend.Cursor{PK: pk}, h + 1, false},
	} {
		if got := CursorSeeksScan(tc.after, tc.segLo); got != tc.want {
			t.Errorf("CursorSeeksScan(%v, %08x) = %v, want %v", tc.after, tc.segLo, got, tc.want)
		}
	}
}

// TestCursorSeeksQuery: the cursor starts the read exactly when every row
// after it also satisfies the start-side bound.
func TestCursorSeeksQuery(t *testing.T) {
	b := func(k string, incl bool) *backend.Bound { return &backend.Bound{Key: []byte(k), Inclusive: incl} }
	for _, tc := range []struct {
		csk     string
		bd      *backend.Bound
		forward bool
		want    bool
	}{
		{"m", nil, true, true},
		{"m", nil, false, true},
		{"m", b("a", true), true, true},
		{"m", b("a", false), true, true},
		{"m", b("m", true), true, true},
		{"m", b("m", false), true, false},
		{"m", b("z", true), true, false},
		{"m", b("z", true), false, true},
		{"m", b("m", true), false, true},
		{"m", b("m", false), false, false},
		{"m", b("a", false), false, false},
	} {
		if got := CursorSeeksQuery([]byte(tc.csk), tc.bd, tc.forward); got != tc.want {
			t.Errorf("CursorSeeksQuery(%q, %+v, forward=%v) = %v, want %v", tc.csk, tc.bd, tc.forward, got, tc.want)
		}
	}
}
