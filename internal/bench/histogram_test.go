package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketIndexRoundTrip(t *testing.T) {
	prev := -1
	for _, v := range []int64{0, 1, 255, 256, 257, 511, 512, 1000, 123456, 1 << 30, 1<<40 + 12345, math.MaxInt64 / 4} {
		i := bucketIndex(v)
		lo, hi := bucketRange(i)
		if v < (int64(1)<<(subBits+maxExp)) && (v < lo || v > hi) {
			t.Errorf("value %d in bucket %d = [%d, %d]", v, i, lo, hi)
		}
		if i < prev {
			t.Errorf("bucket index not monotonic at %d", v)
		}
		prev = i
		if v >= subCount && v < int64(1)<<(subBits+maxExp) {
			if rel := float64(hi-lo) / float64(lo); rel > 1.0/float64(subHalf)+1e-12 {
				t.Errorf("value %d: bucket width %d is %.4f relative", v, hi-lo, rel)
			}
		}
	}
	// Every bucket is contiguous with the next.
	for i := 0; i < len(NewHistogram().counts)-1; i++ {
		_, hi := bucketRange(i)
		lo, _ := bucketRange(i + 1)
		if lo != hi+1 {
			t.Fatalf("gap between bucket %d (hi %d) and %d (lo %d)", i, hi, i+1, lo)
		}
		if bucketIndex(lo) != i+1 || bucketIndex(hi) != i {
			t.Fatalf("bucket %d/%d edges map wrongly", i, i+1)
		}
	}
}

func TestHistogramExactSmallValues(t *testing.T) {
	h := NewHistogram()
	for v := int64(1); v <= 100; v++ {
		h.Record(v)
	}
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 50}, {0.99, 99}, {0.999, 100}, {0.01, 1}, {0, 1}, {1, 100}} {
		if got := h.Quantile(c.q); got != c.want {
			t.Errorf("Quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	if h.Count() != 100 || h.Min() != 1 || h.Max() != 100 || h.Mean() != 50.5 {
		t.Errorf("count/min/max/mean = %d/%d/%d/%v", h.Count(), h.Min(), h.Max(), h.Mean())
	}
}

func TestHistogramQuantilesAgainstSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var vals []int64
	h := NewHistogram()
	for range 200000 {
		// Log-normal-ish latencies from 50µs to seconds.
		v := int64(math.Exp(r.NormFloat64()*1.2+math.Log(2e6))) + 50_000
		vals = append(vals, v)
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 0.9999} {
		exact := vals[int(math.Ceil(q*float64(len(vals))))-1]
		got := h.Quantile(q)
		if rel := math.Abs(float64(got-exact)) / float64(exact); rel > 0.005 {
			t.Errorf("q%v: got %d, exact %d (%.3f%% off)", q, got, exact, rel*100)
		}
	}
	if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] {
		t.Errorf("min/max %d/%d, want %d/%d", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
}

func TestHistogramMerge(t *testing.T) {
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	for i := range int64(1000) {
		v := int64(time.Duration(i) * time.Microsecond)
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		all.Record(v)
	}
	m := NewHistogram()
	m.Merge(a)
	m.Merge(b)
	m.Merge(NewHistogram()) // empty: no effect on min
	m.Merge(nil)
	for _, q := range []float64{0.1, 0.5, 0.99, 0.999} {
		if m.Quantile(q) != all.Quantile(q) {
			t.Errorf("merged q%v = %d, want %d", q, m.Quantile(q), all.Quantile(q))
		}
	}
	if m.Count() != 1000 || m.Min() != 0 || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Errorf("merged count/min/max/mean %d/%d/%d/%v", m.Count(), m.Min(), m.Max(), m.Mean())
	}
}

func TestHistogramEmptyAndClamp(t *testing.T) {
	h := NewHistogram()
	if h.Quantile(0.99) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram not zero")
	}
	h.Record(-5)
	h.Record(math.MaxInt64)
	if h.Quantile(0.25) != 0 || h.Quantile(1) != math.MaxInt64 || h.Quantile(0.99) != math.MaxInt64 {
		t.Errorf("clamped quantiles %d %d", h.Quantile(0.25), h.Quantile(0.99))
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	h := NewHistogram()
	for i := 0; b.Loop(); i++ {
		h.Record(int64(i) * 997)
	}
}
