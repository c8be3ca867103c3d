package snapepoch

import (
	"fmt"
	"testing"
	"time"
)

func TestOpenExpired(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	eps := map[int64]time.Time{
		3: now.Add(time.Hour),         // open
		1: now.Add(-30 * time.Second), // expired, within grace
		2: now.Add(-2 * time.Minute),  // expired beyond grace
	}
	if got := fmt.Sprint(Open(eps, now, time.Minute)); got != "[1 3]" {
		t.Fatalf("Open = %s, want [1 3]", got)
	}
	if got := fmt.Sprint(Expired(eps, now, time.Minute)); got != "[2]" {
		t.Fatalf("Expired = %s, want [2]", got)
	}
	if Live(eps, 1, now) || !Live(eps, 3, now) || Live(eps, 9, now) {
		t.Fatalf("Live: a reader may read only an unexpired epoch it holds")
	}
}

func TestResolve(t *testing.T) {
	if it, ok := Resolve([]byte("now"), true, nil); !ok || string(it) != "now" {
		t.Fatalf("no pre-image: the stored item")
	}
	if _, ok := Resolve([]byte("now"), true, &PreImage{}); ok {
		t.Fatalf("an absent pre-image: created after the instant")
	}
	if it, ok := Resolve(nil, false, &PreImage{Item: []byte("then"), Exists: true}); !ok || string(it) != "then" {
		t.Fatalf("deleted after the instant: the pre-image")
	}
	if _, ok := Resolve(nil, false, nil); ok {
		t.Fatalf("a ghost without pre-image did not exist at the instant")
	}
}
