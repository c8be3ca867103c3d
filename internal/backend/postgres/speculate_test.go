package postgres

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/extenddb/extenddb/internal/backend"
	"github.com/extenddb/extenddb/internal/backend/backendtest"
)

// TestSpeculativeWrites: a write whose current item this process can
// guess runs in one round trip; a wrong guess (another pool wrote the
// item) is refused by the database and the write runs on the locked path
// with the real item, so every function's answer is computed from the
// item that was current under the lock.
func TestSpeculativeWrites(t *testing.T) {
	need(t)
	b1 := openT(t, Options{DSN: testDSN})
	b2 := openT(t, Options{DSN: testDSN})
	ref := createTable(t, b1, "speculate")
	ctx := t.Context()
	pk := []byte("k")

	// write runs fn through b and returns what the function saw last.
	write := func(b *Backend, fn func(old []byte) (backend.Change, error)) ([]byte, *backend.WriteItemResult, error) {
		t.Helper()
		var saw []byte
		res, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func(old []byte) (backend.Change, error) {
			saw = old
			return fn(old)
		}})
		return saw, res, err
	}
	appendTo := func(s string) func([]byte) (backend.Change, error) {
		return func(old []byte) (backend.Change, error) {
			return backend.Change{Op: backend.Put, Item: append(append([]byte{}, old...), s...)}, nil
		}
	}
	stats := func(b *Backend, applied, refused int64) {
		t.Helper()
		a, r := b.SpeculationStats()
		if a != applied || r != refused {
			t.Fatalf("speculation applied %d refused %d, want %d and %d", a, r, applied, refused)
		}
	}

	// The first write learns the table's version on the locked path.
	if _, _, err := write(b1, appendTo("a")); err != nil {
		t.Fatal(err)
	}
	stats(b1, 0, 0)
	// b1 knows the item: one round trip.
	saw, res, err := write(b1, appendTo("b"))
	if err != nil || string(saw) != "a" || string(res.Old) != "a" {
		t.Fatalf("second write: saw %q old %v err %v", saw, res, err)
	}
	stats(b1, 1, 0)
	// Another pool changes it: b1's guess is stale.
	if _, _, err := write(b2, appendTo("c")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := write(b2, appendTo("d")); err != nil {
		t.Fatal(err)
	}
	stats(b2, 1, 0)
	saw, res, err = write(b1, appendTo("e"))
	if err != nil || string(saw) != "abcd" || string(res.Old) != "abcd" {
		t.Fatalf("write on a stale guess: saw %q res %v err %v", saw, res, err)
	}
	stats(b1, 1, 1)
	// A condition that holds on the guess but not on the item: b2 saw
	// "abcd", the item is "abcde".
	errChanged := errors.New("changed")
	_, _, err = write(b2, func(old []byte) (backend.Change, error) {
		if string(old) != "abcd" {
			return backend.Change{}, errChanged
		}
		return backend.Change{Op: backend.Put, Item: []byte("lost")}, nil
	})
	if !errors.Is(err, errChanged) {
		t.Fatalf("conditional write on a stale guess: %v, want the function's error", err)
	}
	stats(b2, 1, 1)
	// A condition that fails on the guess is decided on the real item.
	if _, _, err := write(b2, appendTo("f")); err != nil {
		t.Fatal(err)
	}
	saw, _, err = write(b1, func(old []byte) (backend.Change, error) {
		if string(old) == "abcde" {
			return backend.Change{}, errChanged
		}
		return backend.Change{Op: backend.Keep}, nil
	})
	if err != nil || string(saw) != "abcdef" {
		t.Fatalf("condition failing on the guess only: saw %q err %v", saw, err)
	}
	// Delete on a good guess, then a put on the guessed absence.
	if _, _, err := write(b1, func([]byte) (backend.Change, error) { return backend.Change{Op: backend.Delete}, nil }); err != nil {
		t.Fatal(err)
	}
	if got, err := b2.GetItem(ctx, backend.GetItemParams{Table: ref, PK: pk}); err != nil || got.Item != nil {
		t.Fatalf("after delete: %v %v", got, err)
	}
	a0, _ := b1.SpeculationStats()
	saw, _, err = write(b1, appendTo("g"))
	if err != nil || saw != nil {
		t.Fatalf("put after delete: saw %q err %v", saw, err)
	}
	if a, _ := b1.SpeculationStats(); a != a0+1 {
		t.Fatalf("put after delete did not run in one round trip")
	}
	if got, err := b2.GetItem(ctx, backend.GetItemParams{Table: ref, PK: pk}); err != nil || string(got.Item) != "g" {
		t.Fatalf("final item: %v %v", got, err)
	}
}

// TestSpeculativeCounters: 8 goroutines on each of two pools increment 10
// counters 40 times each (read-modify-write); every increment lands once,
// whether it ran on a guess or on the locked path.
func TestSpeculativeCounters(t *testing.T) {
	need(t)
	b1 := openT(t, Options{DSN: testDSN, MaxConns: 8})
	b2 := openT(t, Options{DSN: testDSN, MaxConns: 8})
	ref := createTable(t, b1, "speculate-counters")
	ctx := t.Context()
	const keys, per = 10, 40
	var wg sync.WaitGroup
	for w := range 16 {
		b := b1
		if w%2 == 1 {
			b = b2
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				pk := []byte(fmt.Sprintf("c%d", (w+i)%keys))
				_, err := b.WriteItem(ctx, backend.WriteItemParams{Table: ref, PK: pk, Fn: func(old []byte) (backend.Change, error) {
					n := 0
					if old != nil {
						fmt.Sscanf(string(old), "%d", &n)
					}
					return backend.Change{Op: backend.Put, Item: []byte(fmt.Sprint(n + 1))}, nil
				}})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	total := 0
	for k := range keys {
		got, err := b1.GetItem(ctx, backend.GetItemParams{Table: ref, PK: []byte(fmt.Sprintf("c%d", k))})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		fmt.Sscanf(string(got.Item), "%d", &n)
		total += n
	}
	if total != 16*per {
		t.Fatalf("counters sum to %d, want %d", total, 16*per)
	}
	a1, r1 := b1.SpeculationStats()
	a2, r2 := b2.SpeculationStats()
	t.Logf("speculation: applied %d+%d, refused %d+%d", a1, a2, r1, r2)
	if a1+a2 == 0 {
		t.Fatal("no write ran on a guess")
	}
}

// TestConformanceNoSpeculation runs the suite with speculation off (the
// locked path alone).
func TestConformanceNoSpeculation(t *testing.T) {
	need(t)
	if testing.Short() {
		t.Skip("short")
	}
	b := openT(t, Options{DSN: testDSN, WriteGuessBytes: -1})
	backendtest.Run(t, func(*testing.T) backend.Backend { return b })
}
