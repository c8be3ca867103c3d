package backend

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff waits before attempt+1 of an operation that met contention or
// a transient failure: d = min(1 ms << attempt, ceiling), and the pause a
// random duration from d/2 to 3d/2 (d on average), so that contenders
// spread out instead of retrying in step. It answers ctx's error when ctx
// ends first. Every backend's retry loops use it.
func Backoff(ctx context.Context, attempt int, ceiling time.Duration) error {
	d := ceiling
	if attempt < 0 {
		attempt = 0
	}
	if attempt < 40 {
		d = min(time.Millisecond<<attempt, ceiling)
	}
	if d <= 0 {
		return ctx.Err()
	}
	d = d/2 + rand.N(d+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
