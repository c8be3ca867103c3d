package engine

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/backend"
)

// storedTable is the engine's description of a table as the backend keeps
// it (backend.Table.Desc): what DescribeTable answers plus settings that
// other operations read.
type storedTable struct {
	Desc TableDescription `json:"desc"`
	Tags []Tag            `json:"tags,omitempty"`
	TTL  *ttlSetting      `json:"ttl,omitempty"`
	// Streams are the table's DynamoDB streams, oldest first (streams.go);
	// ShardGen is the Gen of the newest shard ever made.
	Streams  []streamState `json:"streams,omitempty"`
	ShardGen int64         `json:"shardGen,omitempty"`
	// PITR is the point-in-time recovery setting, nil while it is off
	// (pitr.go).
	PITR *pitrSetting `json:"pitr,omitempty"`
	// RestoreJob is the key of the point-in-time restore job loading
	// this table while it is CREATING (IsRestoreTarget).
	RestoreJob string `json:"restoreJob,omitempty"`
	// ImportJob is the id of the import loading this table while it is
	// CREATING (IsImportTarget).
	ImportJob string `json:"importJob,omitempty"`
}

type ttlSetting struct {
	AttributeName string `json:"attr"`
	// Status is ENABLING (the internal TTL index is being backfilled) or
	// ENABLED.
	Status string `json:"status"`
}

// keyAttr is one key attribute of a table or index.
type keyAttr struct {
	Name string
	Type attr.Type
}

// index is a secondary index as item operations need it.
type index struct {
	Name     string
	Global   bool
	Hash     keyAttr
	Range    *keyAttr
	ProjType string // ALL, KEYS_ONLY, INCLUDE
	Include  map[string]bool
	Status   string
	// ttl marks the internal TTL index: its partition is constant, its
	// sort key the TTL attribute; items whose attribute is not a number
	// are simply absent.
	ttl bool
}

// table is a parsed table: schema and indexes ready for item operations.
type table struct {
	ref     backend.TableRef
	version int64
	stored  storedTable
	Hash    keyAttr
	Range   *keyAttr
	indexes []*index    // the user's secondary indexes
	ttl     *index      // the internal TTL index, when TTL is enabled
	stream  *liveStream // the enabled stream, nil when none
	pitr    bool        // point-in-time recovery is on: every write logs full images
	loaded  time.Time
}

// allIndexes lists every index the writes maintain.
func (t *table) allIndexes() []*index {
	if t.ttl == nil {
		return t.indexes
	}
	return append(append([]*index(nil), t.indexes...), t.ttl)
}

// anyIndex finds a user or internal index by name.
func (t *table) anyIndex(name string) *index {
	if t.ttl != nil && name == t.ttl.Name {
		return t.ttl
	}
	return t.index(name)
}

func (t *table) name() string { return t.ref.Name }

func (t *table) index(name string) *index {
	for _, ix := range t.indexes {
		if ix.Name == name {
			return ix
		}
	}
	return nil
}

// isKeyAttr reports whether name is a key attribute of the table.
func (t *table) isKeyAttr(name string) bool {
	return name == t.Hash.Name || (t.Range != nil && name == t.Range.Name)
}

func parseTable(st *backend.Table) (*table, error) {
	t := &table{ref: st.Ref(), version: st.Version, loaded: time.Now()}
	if err := json.Unmarshal(st.Desc, &t.stored); err != nil {
		return nil, fmt.Errorf("table %s: corrupt description: %w", st.Name, err)
	}
	d := &t.stored.Desc
	types := map[string]attr.Type{}
	for _, ad := range d.AttributeDefinitions {
		ty, _ := attr.TypeFromName(ad.AttributeType)
		types[ad.AttributeName] = ty
	}
	ks := func(schema []KeySchemaElement) (keyAttr, *keyAttr) {
		var h keyAttr
		var r *keyAttr
		for _, e := range schema {
			ka := keyAttr{Name: e.AttributeName, Type: types[e.AttributeName]}
			if e.KeyType == "HASH" {
				h = ka
			} else {
				r = &ka
			}
		}
		return h, r
	}
	t.Hash, t.Range = ks(d.KeySchema)
	proj := func(p *Projection) (string, map[string]bool) {
		if p == nil {
			return "ALL", nil
		}
		inc := map[string]bool{}
		for _, n := range p.NonKeyAttributes {
			inc[n] = true
		}
		return p.ProjectionType, inc
	}
	for _, g := range d.GlobalSecondaryIndexes {
		ix := &index{Name: g.IndexName, Global: true, Status: g.IndexStatus}
		ix.Hash, ix.Range = ks(g.KeySchema)
		ix.ProjType, ix.Include = proj(g.Projection)
		t.indexes = append(t.indexes, ix)
	}
	for _, l := range d.LocalSecondaryIndexes {
		ix := &index{Name: l.IndexName, Status: "ACTIVE"}
		ix.Hash, ix.Range = ks(l.KeySchema)
		ix.ProjType, ix.Include = proj(l.Projection)
		t.indexes = append(t.indexes, ix)
	}
	if tt := t.stored.TTL; tt != nil {
		status := "ACTIVE"
		if tt.Status == "ENABLING" {
			status = "CREATING"
		}
		t.ttl = &index{Name: ttlIndexName, Global: true, Hash: keyAttr{Name: tt.AttributeName, Type: attr.N},
			ProjType: "KEYS_ONLY", Status: status, ttl: true}
	}
	t.parseStreams()
	t.pitr = t.stored.PITR != nil
	return t, nil
}

// tableCache keeps parsed tables. Local changes invalidate entries at
// once; entries also expire after a short time so that changes made by
// other servers on a shared backend are seen.
type tableCache struct {
	mu  sync.RWMutex
	m   map[string]*table
	ttl time.Duration
	// gen counts drops: every local change of a table drops its entry, so
	// a list of tables built at one generation is current while it holds.
	gen atomic.Uint64
}

func (c *tableCache) generation() uint64 { return c.gen.Load() }

func cacheKey(account, name string) string { return account + "\x00" + name }

func (c *tableCache) get(account, name string) *table {
	c.mu.RLock()
	t := c.m[cacheKey(account, name)]
	c.mu.RUnlock()
	if t != nil && time.Since(t.loaded) > c.ttl {
		return nil
	}
	return t
}

// put caches t unless a newer description of the same incarnation is
// cached already (a slow reader must not bring back an old version).
func (c *tableCache) put(t *table) {
	k := cacheKey(t.ref.Account, t.ref.Name)
	c.mu.Lock()
	if old := c.m[k]; old == nil || old.ref.ID != t.ref.ID || old.version <= t.version {
		c.m[k] = t
	}
	c.mu.Unlock()
}

func (c *tableCache) drop(account, name string) {
	c.mu.Lock()
	delete(c.m, cacheKey(account, name))
	c.mu.Unlock()
	c.gen.Add(1)
}

// notFound is the item operations' ResourceNotFoundException.
func notFound(name string) *Error {
	return newErr(CodeResourceNotFound, "Requested resource not found")
}

// tableNotFound is the table operations' ResourceNotFoundException.
func tableNotFound(name string) *Error {
	return newErr(CodeResourceNotFound, "Requested resource not found: Table: %s not found", name)
}

const tableNamePattern = "[a-zA-Z0-9_.-]+"

// isNameChars reports whether s is non-empty and made only of
// [a-zA-Z0-9_.-], the characters of table and index names (a byte loop:
// every request checks its table name).
func isNameChars(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

// checkTableName adds the service's constraint errors for a table name.
func checkTableName(c *constraintErrors, member string, name *string) {
	if name == nil {
		c.add(nil, member, "Member must not be null")
		return
	}
	n := *name
	if len(n) < 3 {
		c.add(n, member, "Member must have length greater than or equal to 3")
	}
	if len(n) > 255 {
		c.add(n, member, "Member must have length less than or equal to 255")
	}
	if !isNameChars(n) {
		c.add(n, member, "Member must satisfy regular expression pattern: "+tableNamePattern)
	}
}

// requireTableName validates a TableName member of an item or table request.
func requireTableName(name *string) (string, error) {
	var c constraintErrors
	checkTableName(&c, "tableName", name)
	if err := c.err(); err != nil {
		return "", err
	}
	return *name, nil
}

func epochSeconds(t time.Time) float64 {
	return float64(t.UnixMilli()) / 1000
}

// describe returns the table's description as DescribeTable answers it.
func (t *table) describe() *TableDescription {
	d := t.stored.Desc
	return &d
}

// pitrSetting is a table's point-in-time recovery setting.
type pitrSetting struct {
	// Days is the recovery period (1 to 35).
	Days int64 `json:"days"`
	// Since is when it was turned on (unix ms).
	Since int64 `json:"since"`
}

// ttlIndexName is the internal index that orders items by their TTL
// attribute. '$' cannot appear in a DynamoDB index name, so no user index
// can collide with it, and it is never described or queryable.
const ttlIndexName = "$ttl"
