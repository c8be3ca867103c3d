package blobstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// HeartbeatKey is the key of the owner's heartbeat, next to the identity.
const HeartbeatKey = "extenddb-heartbeat.json"

// HeartbeatVersion is the version WriteHeartbeat writes; ReadHeartbeat
// refuses newer ones.
const HeartbeatVersion = 1

// HeartbeatStaleFactor: a heartbeat is live for this many of its
// intervals after its time.
const HeartbeatStaleFactor = 3

// Heartbeat is the content of extenddb-heartbeat.json: a server of the
// catalog that owns the store rewrites it every interval while its backup
// jobs run over the store (a plain Put: the identity is never touched).
// `extenddb backup sync --adopt-store` reads it to refuse taking over a
// store whose owner is alive. Servers of one catalog share the object; the
// last writer wins, which is all a liveness check needs.
type Heartbeat struct {
	Version   int
	CatalogID string
	StoreID   string
	Owner     string // the server's owner name in job claims
	Host      string
	Store     string // the store as the writer named it (fs:/..., s3://...): differs in a copy
	Time      time.Time
	Interval  time.Duration
	// Stopped: written by a clean stop; such a heartbeat is never live.
	// (Another server of the same catalog still running rewrites it
	// within one interval.)
	Stopped bool
}

type heartbeatJSON struct {
	Version   int       `json:"version"`
	CatalogID string    `json:"catalog_id"`
	StoreID   string    `json:"store_id"`
	Owner     string    `json:"owner"`
	Host      string    `json:"host"`
	Store     string    `json:"store"`
	Time      time.Time `json:"time"`
	Interval  float64   `json:"interval_seconds"`
	Stopped   bool      `json:"stopped,omitempty"`
}

// StaleAfter is how long after its time the heartbeat counts as live.
func (h Heartbeat) StaleAfter() time.Duration { return HeartbeatStaleFactor * h.Interval }

// Age is how long ago the heartbeat was written, by now's clock (negative
// when the writer's clock is ahead).
func (h Heartbeat) Age(now time.Time) time.Duration { return now.Sub(h.Time) }

// Live reports whether the heartbeat is younger than StaleAfter at now and
// not Stopped. One from the future (the writer's clock is ahead) is live.
func (h Heartbeat) Live(now time.Time) bool { return !h.Stopped && h.Age(now) < h.StaleAfter() }

// WriteHeartbeat publishes h (Version defaults to HeartbeatVersion; Time is
// kept to the millisecond).
func WriteHeartbeat(ctx context.Context, s Store, h Heartbeat) error {
	if h.Version == 0 {
		h.Version = HeartbeatVersion
	}
	data, err := json.MarshalIndent(heartbeatJSON{Version: h.Version, CatalogID: h.CatalogID, StoreID: h.StoreID, Owner: h.Owner,
		Host: h.Host, Store: h.Store, Time: h.Time.UTC().Truncate(time.Millisecond), Interval: h.Interval.Seconds(), Stopped: h.Stopped}, "", "  ")
	if err != nil {
		return err
	}
	return s.Put(ctx, HeartbeatKey, bytes.NewReader(append(data, '\n')))
}

// ReadHeartbeat reads and checks the heartbeat; ErrNotFound if missing (a
// store written by an older server, or whose owner never ran over it).
func ReadHeartbeat(ctx context.Context, s Store) (Heartbeat, error) {
	rc, err := s.Get(ctx, HeartbeatKey)
	if err != nil {
		return Heartbeat{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxIdentitySize+1))
	if err != nil {
		return Heartbeat{}, fmt.Errorf("store: read %s: %w", HeartbeatKey, err)
	}
	if len(data) > maxIdentitySize {
		return Heartbeat{}, fmt.Errorf("store: %s is larger than %d bytes", HeartbeatKey, maxIdentitySize)
	}
	var j heartbeatJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Heartbeat{}, fmt.Errorf("store: %s is not valid: %w", HeartbeatKey, err)
	}
	switch {
	case j.Version > HeartbeatVersion:
		return Heartbeat{}, fmt.Errorf("store: %s has version %d; this server reads up to %d", HeartbeatKey, j.Version, HeartbeatVersion)
	case j.Version < 1, j.CatalogID == "", j.Time.IsZero(), j.Interval <= 0:
		return Heartbeat{}, fmt.Errorf("store: %s lacks version, catalog_id, time or interval_seconds", HeartbeatKey)
	}
	return Heartbeat{Version: j.Version, CatalogID: j.CatalogID, StoreID: j.StoreID, Owner: j.Owner, Host: j.Host, Store: j.Store,
		Time: j.Time, Interval: time.Duration(j.Interval * float64(time.Second)), Stopped: j.Stopped}, nil
}
