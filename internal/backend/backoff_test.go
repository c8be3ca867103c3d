package backend

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestBackoff: a pause grows with the attempt up to the ceiling, at least
// half of it, and ends early with ctx's error.
func TestBackoff(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		attempt int
		ceiling time.Duration
		lo      time.Duration
	}{
		{-1, 64 * time.Millisecond, 500 * time.Microsecond},
		{3, 64 * time.Millisecond, 4 * time.Millisecond},
		{50, 16 * time.Millisecond, 8 * time.Millisecond},
	} {
		start := time.Now()
		if err := Backoff(ctx, tc.attempt, tc.ceiling); err != nil {
			t.Fatal(err)
		}
		if got := time.Since(start); got < tc.lo {
			t.Errorf("attempt %d, ceiling %v: paused %v, want at least %v", tc.attempt, tc.ceiling, got, tc.lo)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := Backoff(cctx, 10, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled context: %v", err)
	}
}
