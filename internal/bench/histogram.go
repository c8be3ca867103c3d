package bench

import (
	"math"
	"math/bits"
	"time"
)

// Histogram is a log-linear latency histogram over non-negative int64 values
// (nanoseconds here). Values below 2^subBits are recorded exactly; above,
// every power-of-two range is split into 2^(subBits-1) equal sub-buckets, so
// a recorded value is known to within a relative error of 2^-(subBits-1)
// (under 1 % with subBits = 8). Record is allocation-free and is meant to be
// used by one goroutine; merge the per-worker histograms at the end.
type Histogram struct {
	counts []uint64
	n      uint64
	sum    float64
	min    int64
	max    int64
}

const (
	subBits  = 8
	subCount = 1 << subBits // values [0, subCount) are exact
	subHalf  = subCount / 2 // sub-buckets per power of two above that
	// maxExp bounds the resolved range to 2^(subBits+maxExp) - 1 ns, about
	// 78 hours; larger values are counted in the last bucket.
	maxExp = 40
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	return &Histogram{counts: make([]uint64, subCount+maxExp*subHalf), min: math.MaxInt64}
}

// bucketIndex maps v >= 0 to its bucket.
func bucketIndex(v int64) int {
	if v < subCount {
		if v < 0 {
			return 0
		}
		return int(v)
	}
	// shift so that the top subBits bits remain: v>>shift is in [subHalf, subCount).
	shift := bits.Len64(uint64(v)) - subBits
	if shift > maxExp {
		return subCount + maxExp*subHalf - 1
	}
	return subCount + (shift-1)*subHalf + int(uint64(v)>>uint(shift)) - subHalf
}

// bucketRange returns the smallest and largest value that map to bucket i.
func bucketRange(i int) (lo, hi int64) {
	if i < subCount {
		return int64(i), int64(i)
	}
	j := i - subCount
	shift := j/subHalf + 1
	top := int64(j%subHalf + subHalf)
	lo = top << uint(shift)
	hi = lo + (int64(1) << uint(shift)) - 1
	return lo, hi
}

// Record adds one value.
func (h *Histogram) Record(v int64) {
	if v < 0 {
		v = 0
	}
	h.counts[bucketIndex(v)]++
	h.n++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// RecordDuration adds one duration.
func (h *Histogram) RecordDuration(d time.Duration) { h.Record(int64(d)) }

// Merge adds every value recorded in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o == nil || o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.sum += o.sum
	if o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Min is the smallest recorded value (0 when empty).
func (h *Histogram) Min() int64 {
	if h.n == 0 {
		return 0
	}
	return h.min
}

// Max is the largest recorded value (0 when empty).
func (h *Histogram) Max() int64 { return h.max }

// Mean is the arithmetic mean of the recorded values (0 when empty).
func (h *Histogram) Mean() float64 {
	if h.n == 0 {
		return 0
	}
	return h.sum / float64(h.n)
}

// Quantile returns the value at quantile q in [0, 1]: the value of the
// ceil(q*n)-th smallest recording (nearest-rank), reported as the midpoint
// of its bucket and clamped to the exact min and max. It returns 0 when the
// histogram is empty.
func (h *Histogram) Quantile(q float64) int64 {
	if h.n == 0 {
		return 0
	}
	if q <= 0 {
		return h.min
	}
	if q >= 1 {
		return h.max
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	if rank < 1 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += c
		if seen >= rank {
			if i == len(h.counts)-1 {
				return h.max // the overflow bucket
			}
			lo, hi := bucketRange(i)
			v := lo + (hi-lo)/2
			if v < h.min {
				v = h.min
			}
			if v > h.max {
				v = h.max
			}
			return v
		}
	}
	return h.max
}

// QuantileDuration is Quantile as a time.Duration.
func (h *Histogram) QuantileDuration(q float64) time.Duration {
	return time.Duration(h.Quantile(q))
}
