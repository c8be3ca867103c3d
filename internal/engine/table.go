package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/extenddb/extenddb/internal/attr"
	"github.com/extenddb/extenddb/internal/storage"
)

// storedTable is the engine's description of a table as the backend keeps
// it (storage.Table.Desc): what DescribeTable answers plus settings that
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
	ref     storage.TableRef
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

func parseTable(st *storage.Table) (*table, error) {
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
}

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
}

// notFound is the item operations' ResourceNotFoundException.
func notFound(name string) *Error {
	return newErr(CodeResourceNotFound, "Requested resource not found")
}

// missing reports whether err is the backend's "table not found" (the
// table, or the incarnation a cached description named, is gone); when it
// is, the cached descriptions of names are forgotten. Every place that
// meets a missing table answers through it.
func (e *Engine) missing(err error, account string, names ...string) bool {
	if !storage.IsKind(err, storage.KindTableNotFound) {
		return false
	}
	for _, n := range names {
		e.tables.drop(account, n)
	}
	return true
}

// tableNotFound is the table operations' ResourceNotFoundException.
func tableNotFound(name string) *Error {
	return newErr(CodeResourceNotFound, "Requested resource not found: Table: %s not found", name)
}

// loadTableForTableOp is loadTable with the table operations' message.
func (e *Engine) loadTableForTableOp(ctx context.Context, account, name string) (*table, error) {
	t, err := e.loadTable(ctx, account, name)
	if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
		return nil, tableNotFound(name)
	}
	return t, err
}

// loadTable returns the parsed table, from the cache when fresh (and
// always from the backend when ctx comes from a write being recomputed
// after a version refusal, see fenced).
func (e *Engine) loadTable(ctx context.Context, account, name string) (*table, error) {
	if ctx.Value(reloadTables{}) == nil {
		if t := e.tables.get(account, name); t != nil {
			return t, nil
		}
	}
	res, err := e.backend.GetTable(ctx, storage.GetTableParams{Account: account, Name: name})
	if err != nil {
		if e.missing(err, account, name) {
			return nil, notFound(name)
		}
		return nil, err
	}
	t, err := parseTable(res.Table)
	if err != nil {
		return nil, err
	}
	e.tables.put(t)
	return t, nil
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

func (e *Engine) tableArn(account, name string) string {
	return "arn:aws:dynamodb:" + e.region + ":" + account + ":table/" + name
}

func epochSeconds(t time.Time) float64 {
	return float64(t.UnixMilli()) / 1000
}

// CreateTable creates a table.
func (e *Engine) CreateTable(ctx context.Context, account string, in *CreateTableInput) (*CreateTableOutput, error) {
	if err := checkCreateTable(in); err != nil {
		return nil, err
	}
	st, err := e.newTable(account, in, e.now())
	if err != nil {
		return nil, err
	}
	desc := st.Desc
	name := desc.TableName
	raw, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	if _, err := e.backend.CreateTable(ctx, storage.CreateTableParams{Account: account, Name: name, Desc: raw}); err != nil {
		if storage.IsKind(err, storage.KindTableExists) {
			return nil, newErr(CodeResourceInUse, "Table already exists: %s", name)
		}
		return nil, err
	}
	e.tables.drop(account, name)
	out := st.Desc
	out.TableStatus = "CREATING"
	for i := range out.GlobalSecondaryIndexes {
		out.GlobalSecondaryIndexes[i].IndexStatus = "CREATING"
	}
	return &CreateTableOutput{TableDescription: &out}, nil
}

// checkCreateTable validates the members of a CreateTable request, with
// the service's "1 validation error detected" wording.
func checkCreateTable(in *CreateTableInput) error {
	var c constraintErrors
	checkTableName(&c, "tableName", in.TableName)
	if in.KeySchema == nil {
		c.add(nil, "keySchema", "Member must not be null")
	} else {
		if len(in.KeySchema) < 1 {
			c.add("[]", "keySchema", "Member must have length greater than or equal to 1")
		}
		if len(in.KeySchema) > 2 {
			c.add(fmt.Sprint(len(in.KeySchema)), "keySchema", "Member must have length less than or equal to 2")
		}
		checkKeySchemaMembers(&c, "", in.KeySchema)
	}
	// An index's key schema is held to the same constraints, named by
	// the index's place in its list.
	for i, g := range in.GlobalSecondaryIndexes {
		checkKeySchemaMembers(&c, fmt.Sprintf("globalSecondaryIndexes.%d.member.", i+1), g.KeySchema)
	}
	for i, l := range in.LocalSecondaryIndexes {
		checkKeySchemaMembers(&c, fmt.Sprintf("localSecondaryIndexes.%d.member.", i+1), l.KeySchema)
	}
	if in.AttributeDefinitions == nil {
		c.add(nil, "attributeDefinitions", "Member must not be null")
	}
	for i, ad := range in.AttributeDefinitions {
		if ad.AttributeType != "S" && ad.AttributeType != "N" && ad.AttributeType != "B" {
			c.add(ad.AttributeType, fmt.Sprintf("attributeDefinitions.%d.member.attributeType", i+1), "Member must satisfy enum value set: [B, N, S]")
		}
	}
	if in.BillingMode != "" && in.BillingMode != "PROVISIONED" && in.BillingMode != "PAY_PER_REQUEST" {
		c.add(in.BillingMode, "billingMode", "Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]")
	}
	if in.ProvisionedThroughput != nil {
		checkThroughput(&c, "provisionedThroughput", in.ProvisionedThroughput)
	}
	if in.TableClass != "" && in.TableClass != "STANDARD" && in.TableClass != "STANDARD_INFREQUENT_ACCESS" {
		c.add(in.TableClass, "tableClass", "Member must satisfy enum value set: [STANDARD, STANDARD_INFREQUENT_ACCESS]")
	}
	return c.err()
}

// checkKeySchemaMembers checks each KeySchemaElement's members; prefix
// is the path of the schema's owner ("" for the table).
func checkKeySchemaMembers(c *constraintErrors, prefix string, ks []KeySchemaElement) {
	for i, k := range ks {
		if k.KeyType != "HASH" && k.KeyType != "RANGE" {
			c.add(k.KeyType, fmt.Sprintf("%skeySchema.%d.member.keyType", prefix, i+1), "Member must satisfy enum value set: [HASH, RANGE]")
		}
		if len(k.AttributeName) < 1 || len(k.AttributeName) > 255 {
			c.add(k.AttributeName, fmt.Sprintf("%skeySchema.%d.member.attributeName", prefix, i+1), "Member must have length between 1 and 255")
		}
	}
}

// newTable builds the stored description of the table a (checked)
// CreateTable request creates, or the error it answers. It reads and
// writes nothing.
func (e *Engine) newTable(account string, in *CreateTableInput, now time.Time) (*storedTable, error) {
	name := *in.TableName

	// Attribute definitions: the table's key schema's shape first, then
	// the definitions against every key schema of the request.
	used := map[string]bool{}
	if err := checkKeySchemaShape(in.KeySchema); err != nil {
		return nil, err
	}
	if err := checkAttributeDefinitions(in); err != nil {
		return nil, err
	}
	defs := map[string]string{}
	for _, ad := range in.AttributeDefinitions {
		defs[ad.AttributeName] = ad.AttributeType
	}
	if err := checkKeySchema(in.KeySchema, defs, used, ""); err != nil {
		return nil, err
	}
	billing := in.BillingMode
	if billing == "" {
		billing = "PROVISIONED"
	}
	desc := TableDescription{
		TableName:            name,
		TableId:              newUUID(),
		TableArn:             e.tableArn(account, name),
		TableStatus:          "ACTIVE",
		CreationDateTime:     epochSeconds(now),
		KeySchema:            in.KeySchema,
		AttributeDefinitions: in.AttributeDefinitions,
	}
	pt, err := billingThroughput(billing, in.ProvisionedThroughput, "")
	if err != nil {
		return nil, err
	}
	desc.ProvisionedThroughput = pt
	if billing == "PAY_PER_REQUEST" {
		desc.BillingModeSummary = &BillingModeSummary{BillingMode: billing, LastUpdateToPayPerRequestDateTime: ptrFloat(epochSeconds(now))}
	}

	// Indexes.
	hashName := ""
	for _, k := range in.KeySchema {
		if k.KeyType == "HASH" {
			hashName = k.AttributeName
		}
	}
	rangeName := ""
	for _, k := range in.KeySchema {
		if k.KeyType == "RANGE" {
			rangeName = k.AttributeName
		}
	}
	indexNames := map[string]bool{}
	if in.LocalSecondaryIndexes != nil && len(in.LocalSecondaryIndexes) == 0 {
		return nil, invalidParam("List of LocalSecondaryIndexes is empty")
	}
	if in.GlobalSecondaryIndexes != nil && len(in.GlobalSecondaryIndexes) == 0 {
		return nil, invalidParam("List of GlobalSecondaryIndexes is empty")
	}
	if len(in.LocalSecondaryIndexes) > 5 {
		return nil, invalidParam("Number of LocalSecondaryIndexes exceeds per-table limit of 5")
	}
	if len(in.GlobalSecondaryIndexes) > 20 {
		return nil, newErr(CodeLimitExceeded, "Subscriber limit exceeded: The number of global secondary indexes exceeds the per-table limit of 20")
	}
	for _, l := range in.LocalSecondaryIndexes {
		if err := checkIndexName(l.IndexName, indexNames); err != nil {
			return nil, err
		}
		if rangeName == "" {
			return nil, invalidParam("Table KeySchema does not have a range key, which is required when specifying a LocalSecondaryIndex")
		}
		if err := checkKeySchema(l.KeySchema, defs, used, l.IndexName); err != nil {
			return nil, err
		}
		if len(l.KeySchema) != 2 {
			return nil, invalidParam("Index KeySchema does not have a range key for index: %s", l.IndexName)
		}
		if l.KeySchema[0].AttributeName != hashName {
			return nil, invalidParam("Index KeySchema does not have the same leading hash key as table KeySchema for index: %s. index hash key: %s, table hash key: %s", l.IndexName, l.KeySchema[0].AttributeName, hashName)
		}
		p, err := checkProjection(l.Projection, l.IndexName)
		if err != nil {
			return nil, err
		}
		desc.LocalSecondaryIndexes = append(desc.LocalSecondaryIndexes, LocalSecondaryIndexDescription{
			IndexName: l.IndexName, KeySchema: l.KeySchema, Projection: p,
			IndexArn: desc.TableArn + "/index/" + l.IndexName,
		})
	}
	for _, g := range in.GlobalSecondaryIndexes {
		if billing == "PROVISIONED" && g.ProvisionedThroughput == nil {
			return nil, invalidParam("ProvisionedThroughput is not specified for index: %s", g.IndexName)
		}
		gd, err := e.newGSI(g, defs, used, indexNames, billing, desc.TableArn)
		if err != nil {
			return nil, err
		}
		desc.GlobalSecondaryIndexes = append(desc.GlobalSecondaryIndexes, *gd)
	}
	if in.StreamSpecification != nil {
		ss := in.StreamSpecification
		if ss.StreamEnabled == nil {
			return nil, validationf("1 validation error detected: Value null at 'streamSpecification.streamEnabled' failed to satisfy constraint: Member must not be null")
		}
		if *ss.StreamEnabled {
			switch ss.StreamViewType {
			case "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY":
			default:
				return nil, invalidParam("Table is being created with a stream enabled, UpdateViewType is required")
			}
			if _, ok := e.changeLog(); !ok {
				return nil, e.errNoStreams()
			}
			desc.StreamSpecification = ss
		} else if ss.StreamViewType != "" {
			return nil, invalidParam("Table is being created with a stream disabled, UpdateViewType should not be specified")
		}
	}
	sse, err := checkSSE(in.SSESpecification)
	if err != nil {
		return nil, err
	}
	if sse {
		desc.SSEDescription = &SSEDescription{Status: "ENABLED", SSEType: "KMS",
			KMSMasterKeyArn: "arn:aws:kms:" + e.region + ":" + account + ":key/extenddb-managed"}
	}
	if in.TableClass != "" {
		desc.TableClassSummary = &TableClassSummary{TableClass: in.TableClass}
	}
	if in.DeletionProtectionEnabled != nil {
		desc.DeletionProtectionEnabled = *in.DeletionProtectionEnabled
	}
	st := storedTable{Desc: desc}
	if ss := desc.StreamSpecification; ss != nil {
		st.enableStream(ss.StreamViewType, now, 0)
	}
	if len(in.Tags) > 0 {
		if err := checkTags(in.Tags); err != nil {
			return nil, err
		}
		st.Tags = in.Tags
	}
	return &st, nil
}

func ptrFloat(f float64) *float64 { return &f }

func checkThroughput(c *constraintErrors, member string, pt *ProvisionedThroughput) {
	if pt.ReadCapacityUnits == nil {
		c.add(nil, member+".readCapacityUnits", "Member must not be null")
	} else if *pt.ReadCapacityUnits < 1 {
		c.add(fmt.Sprint(*pt.ReadCapacityUnits), member+".readCapacityUnits", "Member must have value greater than or equal to 1")
	}
	if pt.WriteCapacityUnits == nil {
		c.add(nil, member+".writeCapacityUnits", "Member must not be null")
	} else if *pt.WriteCapacityUnits < 1 {
		c.add(fmt.Sprint(*pt.WriteCapacityUnits), member+".writeCapacityUnits", "Member must have value greater than or equal to 1")
	}
}

// billingThroughput checks throughput against the billing mode and returns
// the description to store. indexName is "" for the table.
func billingThroughput(billing string, pt *ProvisionedThroughput, indexName string) (*ProvisionedThroughputDescription, error) {
	if billing == "PAY_PER_REQUEST" {
		if pt != nil {
			if indexName != "" {
				return nil, invalidParam("ProvisionedThroughput should not be specified for index: %s when BillingMode is PAY_PER_REQUEST", indexName)
			}
			return nil, invalidParam("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
		return &ProvisionedThroughputDescription{}, nil
	}
	if pt == nil {
		if indexName != "" {
			return nil, invalidParam("ProvisionedThroughput must be specified for index: %s", indexName)
		}
		return nil, invalidParam("ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED")
	}
	if *pt.ReadCapacityUnits > 40000 || *pt.WriteCapacityUnits > 40000 {
		return nil, newErr(CodeLimitExceeded, "Subscriber limit exceeded: Provisioned throughput for the table can not exceed 40000 read and write capacity units")
	}
	return &ProvisionedThroughputDescription{ReadCapacityUnits: *pt.ReadCapacityUnits, WriteCapacityUnits: *pt.WriteCapacityUnits}, nil
}

func checkIndexName(name string, seen map[string]bool) error {
	if len(name) < 3 || len(name) > 255 || !isNameChars(name) {
		return validationf("1 validation error detected: Value '%s' at 'indexName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s and length between 3 and 255", name, tableNamePattern)
	}
	if seen[name] {
		return invalidParam("Duplicate index name: %s", name)
	}
	seen[name] = true
	return nil
}

// checkKeySchema validates a table or index key schema against the
// attribute definitions and records the attributes it uses.
func checkKeySchema(ks []KeySchemaElement, defs map[string]string, used map[string]bool, indexName string) error {
	if err := checkKeySchemaShape(ks); err != nil {
		return err
	}
	var missing []string
	for _, k := range ks {
		if _, ok := defs[k.AttributeName]; !ok {
			missing = append(missing, k.AttributeName)
		}
		used[k.AttributeName] = true
	}
	if len(missing) > 0 {
		return invalidParam("Some index key attributes are not defined in AttributeDefinitions. Keys: [%s], AttributeDefinitions: [%s]",
			strings.Join(missing, ", "), strings.Join(sortedNames(defs), ", "))
	}
	return nil
}

// checkKeySchemaShape checks a key schema's elements: a HASH key, then
// at most one RANGE key of another name.
func checkKeySchemaShape(ks []KeySchemaElement) error {
	if len(ks) == 0 || len(ks) > 2 {
		return invalidParam("Invalid KeySchema: must have 1 or 2 elements")
	}
	if ks[0].KeyType != "HASH" {
		return validationf("Invalid KeySchema: The first KeySchemaElement is not a HASH key type")
	}
	if len(ks) == 2 {
		if ks[1].KeyType != "RANGE" {
			return validationf("Invalid KeySchema: The second KeySchemaElement is not a RANGE key type")
		}
		if ks[0].AttributeName == ks[1].AttributeName {
			return validationf("Both the Hash Key and the Range Key element in the KeySchema have the same name")
		}
	}
	return nil
}

func checkProjection(p *Projection, indexName string) (*Projection, error) {
	if p == nil {
		return nil, validationf("1 validation error detected: Value null at 'projection' failed to satisfy constraint: Member must not be null")
	}
	switch p.ProjectionType {
	case "ALL", "KEYS_ONLY":
		if len(p.NonKeyAttributes) > 0 {
			return nil, invalidParam("ProjectionType is %s, but NonKeyAttributes is specified", p.ProjectionType)
		}
	case "INCLUDE":
		if len(p.NonKeyAttributes) == 0 {
			return nil, invalidParam("ProjectionType is INCLUDE, but NonKeyAttributes is not specified")
		}
		if len(p.NonKeyAttributes) > 100 {
			return nil, invalidParam("The number of projected attributes exceeds the limit of 100")
		}
		seen := map[string]bool{}
		for _, n := range p.NonKeyAttributes {
			if seen[n] {
				return nil, invalidParam("Duplicate element in NonKeyAttributes: %s", n)
			}
			seen[n] = true
		}
	case "":
		return nil, invalidParam("Unknown ProjectionType: null")
	default:
		return nil, validationf("1 validation error detected: Value '%s' at 'projection.projectionType' failed to satisfy constraint: Member must satisfy enum value set: [ALL, INCLUDE, KEYS_ONLY]", p.ProjectionType)
	}
	return p, nil
}

func (e *Engine) newGSI(g GlobalSecondaryIndex, defs map[string]string, used map[string]bool, names map[string]bool, billing, tableArn string) (*GlobalSecondaryIndexDescription, error) {
	if err := checkIndexName(g.IndexName, names); err != nil {
		return nil, err
	}
	if err := checkKeySchema(g.KeySchema, defs, used, g.IndexName); err != nil {
		return nil, err
	}
	p, err := checkProjection(g.Projection, g.IndexName)
	if err != nil {
		return nil, err
	}
	pt, err := billingThroughput(billing, g.ProvisionedThroughput, g.IndexName)
	if err != nil {
		return nil, err
	}
	return &GlobalSecondaryIndexDescription{
		IndexName: g.IndexName, KeySchema: g.KeySchema, Projection: p, IndexStatus: "ACTIVE",
		ProvisionedThroughput: pt, IndexArn: tableArn + "/index/" + g.IndexName,
	}, nil
}

func checkTags(tags []Tag) error { return checkTagList(tags) }

// describe returns the table's description as DescribeTable answers it.
func (t *table) describe() *TableDescription {
	d := t.stored.Desc
	return &d
}

// freshTable validates a TableName member and reads the table afresh
// (not from the cache), for the table operations.
func (e *Engine) freshTable(ctx context.Context, account string, tableName *string) (*table, error) {
	name, err := requireTableName(tableName)
	if err != nil {
		return nil, err
	}
	e.tables.drop(account, name)
	return e.loadTableForTableOp(ctx, account, name)
}

// DescribeTable describes a table.
func (e *Engine) DescribeTable(ctx context.Context, account string, in *TableNameInput) (*DescribeTableOutput, error) {
	t, err := e.freshTable(ctx, account, in.TableName)
	if err != nil {
		return nil, err
	}
	var st *storage.TableStatsResult
	if countsStats(t) {
		st = e.tableStats(ctx, t)
	}
	return &DescribeTableOutput{Table: withStats(t.describe(), st)}, nil
}

// DeleteTable deletes a table and its items.
func (e *Engine) DeleteTable(ctx context.Context, account string, in *TableNameInput) (*DeleteTableOutput, error) {
	t, err := e.freshTable(ctx, account, in.TableName)
	if err != nil {
		return nil, err
	}
	name := t.name()
	if t.stored.Desc.DeletionProtectionEnabled {
		return nil, validationf("Resource cannot be deleted as it is currently protected against deletion. Disable deletion protection first.")
	}
	if err := restoringTable(t); err != nil {
		return nil, err
	}
	if err := e.keepSystemBackup(ctx, account, t); err != nil {
		return nil, err
	}
	res, err := e.backend.DeleteTable(ctx, storage.DeleteTableParams{Account: account, Name: name})
	e.tables.drop(account, name)
	if err != nil {
		if e.missing(err, account, name) {
			return nil, tableNotFound(name)
		}
		return nil, err
	}
	dt, err := parseTable(res.Table)
	if err != nil {
		return nil, err
	}
	d := withStats(dt.describe(), e.peekStats(dt.ref.ID))
	e.forgetStats(dt.ref.ID)
	e.sm.backlog.DeleteLabelValues(account, name) // the log went with the table
	return &DeleteTableOutput{TableDescription: &DeletedTableDescription{
		TableName: d.TableName, TableId: d.TableId, TableArn: d.TableArn, TableStatus: "DELETING",
		ProvisionedThroughput: d.ProvisionedThroughput, BillingModeSummary: d.BillingModeSummary,
		TableSizeBytes: d.TableSizeBytes, ItemCount: d.ItemCount,
		DeletionProtectionEnabled: d.DeletionProtectionEnabled,
	}}, nil
}

// ListTables lists table names.
func (e *Engine) ListTables(ctx context.Context, account string, in *ListTablesInput) (*ListTablesOutput, error) {
	var c constraintErrors
	limit := 100
	if in.Limit != nil {
		if *in.Limit < 1 {
			c.add(strconv.FormatInt(*in.Limit, 10), "limit", "Member must have value greater than or equal to 1")
		} else if *in.Limit > 100 {
			c.add(strconv.FormatInt(*in.Limit, 10), "limit", "Member must have value less than or equal to 100")
		} else {
			limit = int(*in.Limit)
		}
	}
	start := ""
	if in.ExclusiveStartTableName != nil {
		checkTableName(&c, "exclusiveStartTableName", in.ExclusiveStartTableName)
		start = *in.ExclusiveStartTableName
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	res, err := e.backend.ListTables(ctx, storage.ListTablesParams{Account: account, StartAfter: start, Limit: limit + 1})
	if err != nil {
		return nil, err
	}
	out := &ListTablesOutput{TableNames: res.Names}
	if out.TableNames == nil {
		out.TableNames = []string{}
	}
	if len(out.TableNames) > limit {
		out.TableNames = out.TableNames[:limit]
		out.LastEvaluatedTableName = out.TableNames[limit-1]
	}
	return out, nil
}
