package blobstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// IdentityKey is the key of the store identity file.
const IdentityKey = "extenddb-store.json"

// maxIdentitySize bounds what ReadIdentity reads.
const maxIdentitySize = 64 << 10

// Identity is the content of extenddb-store.json: which store this is and
// which catalog owns it. It is created once, with PutIfAbsent, and
// rewritten only by `extenddb backup sync` (--adopt-store names the new
// owner and records the old one in the Adopted* fields; --move-store gives
// a copy a fresh store id).
type Identity struct {
	Version   int       `json:"version"`
	StoreID   string    `json:"store_id"`
	CatalogID string    `json:"catalog_id"`
	CreatedAt time.Time `json:"created_at"`
	// AdoptedFrom is the catalog the store was taken over from, AdoptedAt
	// when and AdoptedOn on which host (empty unless adopted; older
	// servers ignore these fields).
	AdoptedFrom string     `json:"adopted_from,omitempty"`
	AdoptedAt   *time.Time `json:"adopted_at,omitempty"`
	AdoptedOn   string     `json:"adopted_on,omitempty"`
}

// IdentityVersion is the version EnsureIdentity writes; ReadIdentity
// refuses newer ones.
const IdentityVersion = 1

// NewStoreID answers a fresh random store id.
func NewStoreID() string {
	var b [16]byte
	rand.Read(b[:])
	return "st-" + hex.EncodeToString(b[:])
}

// ReadIdentity reads and checks the identity file; ErrNotFound if missing.
func ReadIdentity(ctx context.Context, s Store) (Identity, error) {
	rc, err := s.Get(ctx, IdentityKey)
	if err != nil {
		return Identity{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxIdentitySize+1))
	if err != nil {
		return Identity{}, fmt.Errorf("store: read %s: %w", IdentityKey, err)
	}
	if len(data) > maxIdentitySize {
		return Identity{}, fmt.Errorf("store: %s is larger than %d bytes", IdentityKey, maxIdentitySize)
	}
	var id Identity
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&id); err != nil {
		return Identity{}, fmt.Errorf("store: %s is not valid: %w", IdentityKey, err)
	}
	switch {
	case id.Version > IdentityVersion:
		return Identity{}, fmt.Errorf("store: %s has version %d; this server reads up to %d", IdentityKey, id.Version, IdentityVersion)
	case id.Version < 1, id.StoreID == "", id.CatalogID == "":
		return Identity{}, fmt.Errorf("store: %s lacks version, store_id or catalog_id", IdentityKey)
	}
	return id, nil
}

// EnsureIdentity creates the identity file for catalogID with a new store
// id if none exists (PutIfAbsent, so of racing servers one wins) and
// answers the identity now in the store. It does not judge ownership: use
// CheckHealth for that before creating anything.
func EnsureIdentity(ctx context.Context, s Store, catalogID string) (Identity, error) {
	if catalogID == "" {
		return Identity{}, errors.New("store: EnsureIdentity: empty catalog id")
	}
	id := Identity{Version: IdentityVersion, StoreID: NewStoreID(), CatalogID: catalogID, CreatedAt: time.Now().UTC().Truncate(time.Second)}
	data, err := json.MarshalIndent(id, "", "  ")
	if err != nil {
		return Identity{}, err
	}
	data = append(data, '\n')
	err = s.PutIfAbsent(ctx, IdentityKey, bytes.NewReader(data))
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, ErrExists) {
		return Identity{}, fmt.Errorf("store: create %s: %w", IdentityKey, err)
	}
	return ReadIdentity(ctx, s)
}

// Health is the verdict on a store's identity.
type Health struct {
	// Identity is the identity found in the store (nil when missing).
	Identity *Identity
	// Problems, empty when healthy. Each is a sentence for the operator.
	Problems []string
	// NeedsIdentity: healthy, but the store has no identity yet and nothing
	// else either, so the caller should create one (EnsureIdentity).
	NeedsIdentity bool
}

// Healthy reports whether no rule failed.
func (h Health) Healthy() bool { return len(h.Problems) == 0 }

// Err answers nil when healthy, else an error wrapping ErrUnhealthy that
// lists the problems.
func (h Health) Err() error {
	if h.Healthy() {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrUnhealthy, strings.Join(h.Problems, "; "))
}

// EvaluateHealth applies the health rules of docs/backup-design.md section 2 to
// what is known, without I/O:
//
//   - id is the store's identity (nil when the file is missing);
//   - storeHasObjects: the store holds objects other than the identity;
//   - catalogID is this server's catalog;
//   - knownStoreIDs are the store ids recorded in the catalog's backup rows
//     (duplicates and empty strings are ignored).
//
// Unhealthy when: the identity names another catalog; the identity is
// missing but backups exist (in the store, or rows in the catalog); or more
// than one store id is in play (rows naming two ids, or rows naming an id
// other than the store's). An empty store with no identity and no rows is
// healthy with NeedsIdentity set.
func EvaluateHealth(id *Identity, storeHasObjects bool, catalogID string, knownStoreIDs []string) Health {
	h := Health{Identity: id}
	var known []string
	for _, k := range knownStoreIDs {
		if k != "" && !slices.Contains(known, k) {
			known = append(known, k)
		}
	}
	slices.Sort(known)
	if len(known) > 1 {
		h.Problems = append(h.Problems, fmt.Sprintf("the catalog's backups name %d stores (%s); one catalog uses one store", len(known), strings.Join(known, ", ")))
	}
	if id == nil {
		switch {
		case storeHasObjects:
			h.Problems = append(h.Problems, fmt.Sprintf("the store holds objects but no %s: it was not created by this server or its identity was lost", IdentityKey))
		case len(known) > 0:
			h.Problems = append(h.Problems, fmt.Sprintf("the catalog has backups in store %s but the store has no %s: wrong or wiped store", strings.Join(known, ", "), IdentityKey))
		}
		if len(h.Problems) == 0 {
			h.NeedsIdentity = true
		}
		return h
	}
	if id.CatalogID != catalogID {
		p := fmt.Sprintf("the store belongs to catalog %s, not to this catalog %s", id.CatalogID, catalogID)
		if id.AdoptedFrom == catalogID && id.AdoptedAt != nil {
			p += fmt.Sprintf(" (it was taken over from this catalog at %s on host %s by `extenddb backup sync --adopt-store`: "+
				"point backup.store at another store, or take it back with `extenddb backup sync --adopt-store` once catalog %s stops)",
				id.AdoptedAt.UTC().Format(time.RFC3339), orUnknown(id.AdoptedOn), id.CatalogID)
		}
		h.Problems = append(h.Problems, p)
	}
	if len(known) == 1 && known[0] != id.StoreID {
		h.Problems = append(h.Problems, fmt.Sprintf("the catalog's backups are in store %s but this store is %s", known[0], id.StoreID))
	}
	return h
}

// CheckHealth reads the identity and applies EvaluateHealth. When create is
// set and the verdict is NeedsIdentity, it creates the identity with
// EnsureIdentity and evaluates again (another server may have won the race
// with another catalog id). The error is for I/O failures only; the health
// verdict is in Health.
func CheckHealth(ctx context.Context, s Store, catalogID string, knownStoreIDs []string, create bool) (Health, error) {
	var idp *Identity
	id, err := ReadIdentity(ctx, s)
	switch {
	case err == nil:
		idp = &id
	case errors.Is(err, ErrNotFound):
	default:
		return Health{}, err
	}
	hasObjects := false
	if idp == nil {
		objs, err := s.List(ctx, "")
		if err != nil {
			return Health{}, err
		}
		for _, o := range objs {
			if o.Key != IdentityKey {
				hasObjects = true
				break
			}
		}
	}
	h := EvaluateHealth(idp, hasObjects, catalogID, knownStoreIDs)
	if h.NeedsIdentity && create {
		id, err := EnsureIdentity(ctx, s, catalogID)
		if err != nil {
			return Health{}, err
		}
		h = EvaluateHealth(&id, false, catalogID, knownStoreIDs)
	}
	return h, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
