package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

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
	if _, err := e.backend.CreateTable(ctx, backend.CreateTableParams{Account: account, Name: name, Desc: raw}); err != nil {
		if backend.IsKind(err, backend.KindTableExists) {
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
	defs, used, err := tableKeyDefinitions(in)
	if err != nil {
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
	if err := e.addCreatedIndexes(&desc, in, defs, used, billing); err != nil {
		return nil, err
	}
	if desc.StreamSpecification, err = e.createdStream(in.StreamSpecification); err != nil {
		return nil, err
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

// tableKeyDefinitions checks the table's key schema's shape first, then
// the attribute definitions against it. It returns the definitions by
// name and the set of attributes key schemas use so far (the indexes add
// theirs).
func tableKeyDefinitions(in *CreateTableInput) (defs map[string]string, used map[string]bool, err error) {
	used = map[string]bool{}
	if err := checkKeySchemaShape(in.KeySchema); err != nil {
		return nil, nil, err
	}
	if err := checkAttributeDefinitions(in); err != nil {
		return nil, nil, err
	}
	defs = map[string]string{}
	for _, ad := range in.AttributeDefinitions {
		defs[ad.AttributeName] = ad.AttributeType
	}
	if err := checkKeySchema(in.KeySchema, defs, used, ""); err != nil {
		return nil, nil, err
	}
	return defs, used, nil
}

// addCreatedIndexes checks the request's local and global secondary
// indexes (counts, names, key schemas, projections, throughput) and adds
// their descriptions to desc.
func (e *Engine) addCreatedIndexes(desc *TableDescription, in *CreateTableInput, defs map[string]string, used map[string]bool, billing string) error {
	indexNames := map[string]bool{}
	if in.LocalSecondaryIndexes != nil && len(in.LocalSecondaryIndexes) == 0 {
		return invalidParam("List of LocalSecondaryIndexes is empty")
	}
	if in.GlobalSecondaryIndexes != nil && len(in.GlobalSecondaryIndexes) == 0 {
		return invalidParam("List of GlobalSecondaryIndexes is empty")
	}
	if len(in.LocalSecondaryIndexes) > 5 {
		return invalidParam("Number of LocalSecondaryIndexes exceeds per-table limit of 5")
	}
	if len(in.GlobalSecondaryIndexes) > 20 {
		return newErr(CodeLimitExceeded, "Subscriber limit exceeded: The number of global secondary indexes exceeds the per-table limit of 20")
	}
	for _, l := range in.LocalSecondaryIndexes {
		ld, err := newLSI(l, in.KeySchema, defs, used, indexNames, desc.TableArn)
		if err != nil {
			return err
		}
		desc.LocalSecondaryIndexes = append(desc.LocalSecondaryIndexes, *ld)
	}
	for _, g := range in.GlobalSecondaryIndexes {
		if billing == "PROVISIONED" && g.ProvisionedThroughput == nil {
			return invalidParam("ProvisionedThroughput is not specified for index: %s", g.IndexName)
		}
		gd, err := e.newGSI(g, defs, used, indexNames, billing, desc.TableArn)
		if err != nil {
			return err
		}
		desc.GlobalSecondaryIndexes = append(desc.GlobalSecondaryIndexes, *gd)
	}
	return nil
}

// newLSI checks one local secondary index of a CreateTable request
// against the table's key schema and describes it.
func newLSI(l LocalSecondaryIndex, tableKeys []KeySchemaElement, defs map[string]string, used, indexNames map[string]bool, tableArn string) (*LocalSecondaryIndexDescription, error) {
	hashName, rangeName := "", ""
	for _, k := range tableKeys {
		switch k.KeyType {
		case "HASH":
			hashName = k.AttributeName
		case "RANGE":
			rangeName = k.AttributeName
		}
	}
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
	return &LocalSecondaryIndexDescription{
		IndexName: l.IndexName, KeySchema: l.KeySchema, Projection: p,
		IndexArn: tableArn + "/index/" + l.IndexName,
	}, nil
}

// createdStream checks a CreateTable request's StreamSpecification and
// returns the specification the table keeps: nil when no stream is
// enabled.
func (e *Engine) createdStream(ss *StreamSpecification) (*StreamSpecification, error) {
	if ss == nil {
		return nil, nil
	}
	if ss.StreamEnabled == nil {
		return nil, validationf("1 validation error detected: Value null at 'streamSpecification.streamEnabled' failed to satisfy constraint: Member must not be null")
	}
	if !*ss.StreamEnabled {
		if ss.StreamViewType != "" {
			return nil, invalidParam("Table is being created with a stream disabled, UpdateViewType should not be specified")
		}
		return nil, nil
	}
	switch ss.StreamViewType {
	case "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY":
	default:
		return nil, invalidParam("Table is being created with a stream enabled, UpdateViewType is required")
	}
	if _, ok := e.changeLog(); !ok {
		return nil, e.errNoStreams()
	}
	return ss, nil
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
	if indexName != "" {
		if err := checkIndexKeyTypes(ks); err != nil {
			return err
		}
	}
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

// checkIndexKeyTypes answers an index key schema with two keys of one
// type, the RANGE key first or one attribute twice in the service's
// words for indexes (a table's key schema has its own, in
// checkKeySchemaShape).
func checkIndexKeyTypes(ks []KeySchemaElement) error {
	if len(ks) != 2 {
		return nil
	}
	switch {
	case ks[0].KeyType == ks[1].KeyType && (ks[0].KeyType == "HASH" || ks[0].KeyType == "RANGE"):
		return invalidParam("The KeySchema exceeds the maximum allowed number of %s key attributes", ks[0].KeyType)
	case ks[0].KeyType == "RANGE" && ks[1].KeyType == "HASH":
		return invalidParam("All HASH key attributes must precede RANGE key attributes in the KeySchema")
	case ks[0].AttributeName == ks[1].AttributeName:
		return validationf("The KeySchema contains multiple key attributes with the same name")
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

// DescribeTable describes a table.
func (e *Engine) DescribeTable(ctx context.Context, account string, in *TableNameInput) (*DescribeTableOutput, error) {
	t, err := e.freshTable(ctx, account, in.TableName)
	if err != nil {
		return nil, err
	}
	var st *backend.TableStatsResult
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
	res, err := e.backend.DeleteTable(ctx, backend.DeleteTableParams{Account: account, Name: name})
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
	res, err := e.backend.ListTables(ctx, backend.ListTablesParams{Account: account, StartAfter: start, Limit: limit + 1})
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

// keepSystemBackup takes, before a table with point-in-time recovery on
// is deleted, the SYSTEM backup the service keeps of it:
// "<table>$DeletedTableBackup", expiring after the recovery period,
// listed with BackupType SYSTEM or ALL, restorable, not deletable. The
// table is deleted once the backup is AVAILABLE (its snapshot read whole),
// so a backend whose snapshot does not outlive its table loses nothing;
// a backup that cannot be taken keeps the table and says why.
func (e *Engine) keepSystemBackup(ctx context.Context, account string, t *table) error {
	p := t.stored.PITR
	if p == nil || e.backups == nil {
		return nil
	}
	name := t.name() + "$DeletedTableBackup"
	rec, err := e.backups.CreateSystemBackup(ctx, account, t.name(), name, e.now().Add(time.Duration(p.Days)*24*time.Hour))
	if err != nil {
		return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: the SYSTEM backup of %s, which has point-in-time recovery on, could not be taken, so the table is not deleted: %s",
			t.name(), backupErr(err, t.name()).Error())
	}
	ctx, cancel := context.WithTimeout(ctx, systemBackupWait)
	defer cancel()
	for {
		r, err := e.backups.GetBackup(ctx, rec.ARN)
		switch {
		case err != nil:
			return backupErr(err, t.name())
		case r != nil && r.Status == backend.BackupAvailable:
			return nil
		case r == nil || r.Status != backend.BackupCreating:
			msg := "it is gone"
			if r != nil {
				msg = r.Status + ": " + r.Message
			}
			return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: the SYSTEM backup of %s, which has point-in-time recovery on, failed (%s), so the table is not deleted",
				t.name(), msg)
		}
		select {
		case <-ctx.Done():
			return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: the SYSTEM backup of %s is still being taken; retry the delete", t.name())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
