package api

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	latency  *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "extenddb_requests_total",
			Help: "DynamoDB API requests by operation and error code (empty code: success).",
		}, []string{"operation", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "extenddb_request_duration_seconds",
			Help:    "DynamoDB API request latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
		}, []string{"operation"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.latency)
	}
	return m
}

func (m *metrics) observe(op, code string, start time.Time) {
	m.requests.WithLabelValues(op, code).Inc()
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
}
