package format

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/extenddb/extenddb/internal/attr"
)

func keyBytesOf(t *testing.T, schema KeySchema, it attr.Item) (raw, pk, sk []byte) {
	t.Helper()
	k, err := schema.KeyOf(it)
	if err != nil {
		t.Fatal(err)
	}
	pk, _ = attr.KeyBytes(k.Hash)
	if schema.HasRange() {
		sk, _ = attr.KeyBytes(k.Range)
	}
	return attr.EncodeItem(it), pk, sk
}

func keyBytesItems(n int, withRange bool) []attr.Item {
	var items []attr.Item
	for i := 0; i < n; i++ {
		it := attr.Item{"pk": {Type: attr.S, Str: fmt.Sprintf("p%03d", i)}, "v": {Type: attr.S, Str: fmt.Sprintf("value %d", i)}}
		if withRange {
			it["pk"] = attr.Value{Type: attr.S, Str: fmt.Sprintf("p%03d", i/7)}
			it["sk"] = mustNum(fmt.Sprint(i%7*10 - 20))
		}
		items = append(items, it)
	}
	return items
}

// AppendKeyBytes (the key as storage's key bytes, the item not decoded)
// writes exactly what Append writes: same objects byte for byte, key
// ranges of ordered backups included, in both orders, with and without a
// sort key, over several data files.
func TestAppendKeyBytesSameAsAppend(t *testing.T) {
	for _, order := range []ItemOrder{OrderKey, OrderUnordered} {
		for _, rng := range []string{"N", ""} {
			t.Run(fmt.Sprintf("%s/range=%q", order, rng), func(t *testing.T) {
				a := testARN(t, "keybytes")
				cfg := writerConfig(a, tableJSON(a, "S", rng), order, 300)
				cfg.VerifyItems = false
				items := keyBytesItems(60, rng != "")
				w0, err := NewWriter(context.Background(), newMemStore(), cfg)
				if err != nil {
					t.Fatal(err)
				}
				sortItems(t, w0.Schema(), items)
				want, wres := writeBackup(t, cfg, items)
				for _, verify := range []bool{false, true} {
					cfg.VerifyItems = verify
					got := newMemStore()
					w, err := NewWriter(context.Background(), got, cfg)
					if err != nil {
						t.Fatal(err)
					}
					for _, it := range items {
						raw, pk, sk := keyBytesOf(t, w.Schema(), it)
						if err := w.AppendKeyBytes(raw, pk, sk); err != nil {
							t.Fatal(err)
						}
					}
					res, err := w.Finish()
					if err != nil {
						t.Fatal(err)
					}
					if len(res.Manifest.DataFiles) < 3 {
						t.Fatalf("%d data files, want several", len(res.Manifest.DataFiles))
					}
					if !bytes.Equal(res.ManifestBytes, wres.ManifestBytes) {
						t.Fatalf("manifests differ:\n%s\n%s", res.ManifestBytes, wres.ManifestBytes)
					}
					if len(got.objects) != len(want.objects) {
						t.Fatalf("%d objects, want %d", len(got.objects), len(want.objects))
					}
					for k, v := range want.objects {
						if !bytes.Equal(got.objects[k], v) {
							t.Fatalf("object %s differs", k)
						}
					}
					b, err := OpenARN(context.Background(), got, a)
					if err != nil {
						t.Fatal(err)
					}
					if err := b.Verify(context.Background()); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
}

func TestAppendKeyBytesErrors(t *testing.T) {
	a := testARN(t, "keybytes")
	it := attr.Item{"pk": {Type: attr.S, Str: "b"}, "sk": mustNum("5")}
	for _, tc := range []struct {
		name    string
		order   ItemOrder
		verify  bool
		pk, sk  []byte
		prev    []byte // pk of an item appended first
		wantErr error
	}{
		{name: "no partition key bytes", sk: []byte{1}, wantErr: ErrLine},
		{name: "no sort key bytes", pk: []byte("b"), wantErr: ErrLine},
		{name: "wrong key bytes, verified", verify: true, pk: []byte("c"), sk: mustNumKey("5"), wantErr: ErrLine},
		{name: "not after the previous key", order: OrderKey, pk: []byte("b"), sk: mustNumKey("5"), prev: []byte("c"), wantErr: ErrKeyOrder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			order := tc.order
			if order == "" {
				order = OrderUnordered
			}
			cfg := writerConfig(a, tableJSON(a, "S", "N"), order, 0)
			cfg.VerifyItems = tc.verify
			w, err := NewWriter(context.Background(), newMemStore(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.prev != nil {
				p := attr.Item{"pk": {Type: attr.S, Str: string(tc.prev)}, "sk": mustNum("5")}
				if err := w.AppendKeyBytes(attr.EncodeItem(p), tc.prev, mustNumKey("5")); err != nil {
					t.Fatal(err)
				}
			}
			err = w.AppendKeyBytes(attr.EncodeItem(it), tc.pk, tc.sk)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err %v, want %v", err, tc.wantErr)
			}
			if _, err := w.Finish(); err == nil {
				t.Fatal("Finish after a failed append succeeded")
			}
		})
	}
	// A table without a sort key refuses sort key bytes.
	cfg := writerConfig(a, tableJSON(a, "S", ""), OrderUnordered, 0)
	w, _ := NewWriter(context.Background(), newMemStore(), cfg)
	if err := w.AppendKeyBytes([]byte(`{"pk":{"S":"b"}}`), []byte("b"), []byte("x")); !errors.Is(err, ErrLine) {
		t.Fatalf("sort key bytes on a hash-only table: %v", err)
	}
}

func mustNumKey(s string) []byte {
	b, err := attr.NumberKey(s)
	if err != nil {
		panic(err)
	}
	return b
}

// Format version 2: the sidecar covers every file, so a flipped byte in an
// AWS export manifest fails Verify (naming it), a sidecar that leaves a
// file out is refused at Open, and sha256sum -c checks every file (see
// TestSha256sumAcceptsSidecar).
func TestSidecarCoversEveryFile(t *testing.T) {
	ctx := context.Background()
	a := testARN(t, "keybytes")
	cfg := writerConfig(a, tableJSON(a, "S", "N"), OrderUnordered, 300)
	s, res := writeBackup(t, cfg, keyBytesItems(40, true))
	lines, err := ParseSidecarLines(res.Sidecar)
	if err != nil {
		t.Fatal(err)
	}
	if len(lines) != len(res.Manifest.DataFiles)+3 || lines[len(lines)-1].Name != ManifestName {
		t.Fatalf("sidecar lines: %+v", lines)
	}
	for _, name := range []string{ManifestFilesName, ManifestSummaryName} {
		key := res.Prefix + name
		bad := s.clone()
		b := append([]byte(nil), bad.objects[key]...)
		b[len(b)/2] ^= 1
		bad.objects[key] = b
		bk, err := Open(ctx, bad, res.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		var fe *FileError
		if err := bk.Verify(ctx); !errors.Is(err, ErrSidecarMismatch) || !errors.As(err, &fe) || fe.Key != key {
			t.Fatalf("flipped byte in %s: %v", name, err)
		}
	}
	// A sidecar without one of the lines, or with a data file's line
	// changed, is refused at Open.
	for i := range lines[:len(lines)-1] {
		short := append(append([]SidecarLine(nil), lines[:i]...), lines[i+1:]...)
		bad := s.clone()
		bad.objects[SidecarKey(res.Prefix)] = SidecarOf(short)
		if _, err := Open(ctx, bad, res.Prefix); !errors.Is(err, ErrSidecarForm) {
			t.Fatalf("sidecar without line %d (%s): %v", i+1, lines[i].Name, err)
		}
	}
	changed := append([]SidecarLine(nil), lines...)
	changed[0].Sum[0] ^= 1
	bad := s.clone()
	bad.objects[SidecarKey(res.Prefix)] = SidecarOf(changed)
	if _, err := Open(ctx, bad, res.Prefix); !errors.Is(err, ErrSidecarMismatch) {
		t.Fatalf("data file line changed: %v", err)
	}
}
