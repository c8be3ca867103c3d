package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

type CreateGSIAction struct {
	IndexName             string                 `json:"IndexName"`
	KeySchema             []KeySchemaElement     `json:"KeySchema"`
	Projection            *Projection            `json:"Projection"`
	ProvisionedThroughput *ProvisionedThroughput `json:"ProvisionedThroughput"`
}

type UpdateGSIAction struct {
	IndexName             string                 `json:"IndexName"`
	ProvisionedThroughput *ProvisionedThroughput `json:"ProvisionedThroughput"`
}

type DeleteGSIAction struct {
	IndexName string `json:"IndexName"`
}

type GlobalSecondaryIndexUpdate struct {
	Create *CreateGSIAction `json:"Create"`
	Update *UpdateGSIAction `json:"Update"`
	Delete *DeleteGSIAction `json:"Delete"`
}

type UpdateTableInput struct {
	TableName                   *string                      `json:"TableName"`
	AttributeDefinitions        []AttributeDefinition        `json:"AttributeDefinitions"`
	BillingMode                 string                       `json:"BillingMode"`
	ProvisionedThroughput       *ProvisionedThroughput       `json:"ProvisionedThroughput"`
	GlobalSecondaryIndexUpdates []GlobalSecondaryIndexUpdate `json:"GlobalSecondaryIndexUpdates"`
	StreamSpecification         *StreamSpecification         `json:"StreamSpecification"`
	SSESpecification            *SSESpecification            `json:"SSESpecification"`
	TableClass                  string                       `json:"TableClass"`
	DeletionProtectionEnabled   *bool                        `json:"DeletionProtectionEnabled"`
}

type UpdateTableOutput struct {
	TableDescription *TableDescription `json:"TableDescription"`
}

// UpdateTable changes billing, throughput, streams, SSE, table class,
// deletion protection, and creates (with a background backfill) or deletes
// global secondary indexes.
func (e *Engine) UpdateTable(ctx context.Context, account string, in *UpdateTableInput) (*UpdateTableOutput, error) {
	name, err := requireTableName(in.TableName)
	if err != nil {
		return nil, err
	}
	if err := checkUpdateTableRequest(in); err != nil {
		return nil, err
	}
	if err := e.refuseRestoreTarget(ctx, account, name); err != nil {
		return nil, err
	}
	res, err := e.commitTableUpdate(ctx, account, name, in)
	if err != nil {
		if e.missing(err, account, name) {
			return nil, tableNotFound(name)
		}
		return nil, err
	}
	e.tables.drop(account, name)
	t, err := parseTable(res.Table)
	if err != nil {
		return nil, err
	}
	e.applyTableUpdateEffects(ctx, t, name, in)
	return &UpdateTableOutput{TableDescription: withStats(t.describe(), e.peekStats(t.ref.ID))}, nil
}

// checkUpdateTableRequest checks what an UpdateTable request says on its
// own, before any table is read: enums, throughput, that it asks for
// something, and one index action per update with at most one index
// created or deleted.
func checkUpdateTableRequest(in *UpdateTableInput) error {
	var c constraintErrors
	if in.BillingMode != "" && in.BillingMode != "PROVISIONED" && in.BillingMode != "PAY_PER_REQUEST" {
		c.add(in.BillingMode, "billingMode", "Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]")
	}
	if in.ProvisionedThroughput != nil {
		checkThroughput(&c, "provisionedThroughput", in.ProvisionedThroughput)
	}
	for i, ad := range in.AttributeDefinitions {
		if ad.AttributeType != "S" && ad.AttributeType != "N" && ad.AttributeType != "B" {
			c.add(ad.AttributeType, "attributeDefinitions."+itoa(i+1)+".member.attributeType", "Member must satisfy enum value set: [B, N, S]")
		}
	}
	if err := c.err(); err != nil {
		return err
	}
	if in.BillingMode == "" && in.ProvisionedThroughput == nil && in.GlobalSecondaryIndexUpdates == nil &&
		in.StreamSpecification == nil && in.SSESpecification == nil && in.TableClass == "" && in.DeletionProtectionEnabled == nil {
		return validationf("At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates, SSESpecification, ReplicaUpdates, MultiAccountReplicaReady, ReplicaTransitRoleArn, MultiRegionConsistency, DeletionProtectionEnabled, OnDemandThroughput, WarmThroughput or TableClass is required")
	}
	if err := checkUpdateConcerns(in); err != nil {
		return err
	}
	creates, deletes := 0, 0
	for _, u := range in.GlobalSecondaryIndexUpdates {
		n := 0
		if u.Create != nil {
			n++
			creates++
		}
		if u.Update != nil {
			n++
		}
		if u.Delete != nil {
			n++
			deletes++
		}
		switch {
		case n == 0:
			return invalidParam("One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, GlobalSecondaryIndexUpdate.Delete must not be null")
		case n > 1:
			return invalidParam("Only one global secondary index action is allowed per GlobalSecondaryIndexUpdate object")
		}
	}
	if creates+deletes > 1 {
		return newErr(CodeLimitExceeded, "Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously per table")
	}
	return nil
}

// commitTableUpdate writes the updated description through the backend,
// preparing again while the description it was prepared against moves:
// an index being created is cleared of entries first, a stream being
// enabled starts after its log's current end.
func (e *Engine) commitTableUpdate(ctx context.Context, account, name string, in *UpdateTableInput) (*backend.UpdateTableResult, error) {
	now := e.now()
	createName, _ := in.indexChanges()
	var createVersion int64
	var res *backend.UpdateTableResult
	var err error
	// A stream being enabled starts after the log's current end: every
	// record it will hold is written after the UpdateTable commits.
	// It is read from the incarnation the update then applies to.
	var streamFrom, streamFromID int64
	enabling := in.StreamSpecification != nil && in.StreamSpecification.StreamEnabled != nil && *in.StreamSpecification.StreamEnabled
	if enabling {
		if _, ok := e.changeLog(); !ok {
			return nil, e.errNoStreams()
		}
	}
	for attempt := 1; ; attempt++ {
		if enabling {
			gt, err := e.backend.GetTable(ctx, backend.GetTableParams{Account: account, Name: name})
			switch {
			case err == nil:
				streamFromID = gt.Table.ID
				if streamFrom, err = e.logLast(ctx, gt.Table.Ref()); err != nil && !backend.IsKind(err, backend.KindTableNotFound) {
					return nil, err
				}
			case !backend.IsKind(err, backend.KindTableNotFound):
				return nil, err
			}
		}
		if createName != "" {
			if createVersion, err = e.clearIndex(ctx, account, name, createName, func(t *table) bool { return t.index(createName) != nil }); err != nil {
				return nil, err
			}
		}
		res, err = e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: account, Name: name, Fn: func(old *backend.Table) ([]byte, error) {
			if createVersion != 0 && old.Version != createVersion {
				return nil, errDescriptionMoved
			}
			if enabling && old.ID != streamFromID {
				return nil, errDescriptionMoved // another incarnation: read its log's end
			}
			st, err := e.updatedTable(old, account, name, in, now, streamFrom)
			if err != nil {
				return nil, err
			}
			return json.Marshal(st)
		}})
		if err != errDescriptionMoved {
			return res, err
		}
		if attempt >= maxVersionAttempts {
			return nil, backend.Errorf(backend.KindTableVersion, "table %q: description kept changing while it was prepared (index %q, stream %v)", name, createName, enabling)
		}
	}
}

// applyTableUpdateEffects starts what a committed update implies: a
// committed update applied every requested change, so they follow from
// the request alone. A deleted index's entries go, a created one is
// backfilled, a disabled stream's shards are closed.
func (e *Engine) applyTableUpdateEffects(ctx context.Context, t *table, name string, in *UpdateTableInput) {
	createName, deleteName := in.indexChanges()
	if deleteName != "" {
		if err := e.dropIndexEntries(ctx, t.ref, deleteName); err != nil {
			e.log.Error("dropping index entries", "table", name, "index", deleteName, "err", err)
		}
	}
	if createName != "" {
		e.startBackfill(t.ref, createName)
	}
	if ss := in.StreamSpecification; ss != nil && ss.StreamEnabled != nil && !*ss.StreamEnabled {
		if err := e.settleShards(ctx, t); err != nil {
			e.log.Warn("settling stream shards", "table", name, "err", err)
		}
	}
}

// indexChanges names the GSI the request creates and the one it deletes
// ("" for none; validation allows at most one of them).
func (in *UpdateTableInput) indexChanges() (create, del string) {
	for _, u := range in.GlobalSecondaryIndexUpdates {
		if u.Create != nil {
			create = u.Create.IndexName
		}
		if u.Delete != nil {
			del = u.Delete.IndexName
		}
	}
	return create, del
}

// updatedTable is the pure part of UpdateTable: the stored table as the
// request leaves it, or the error the request answers. It reads and
// writes nothing, so the backend may run it more than once. The steps
// run in DynamoDB's order of checks, so the first failing one answers.
func (e *Engine) updatedTable(old *backend.Table, account, name string, in *UpdateTableInput, now time.Time, streamFrom int64) (*storedTable, error) {
	t, err := parseTable(old)
	if err != nil {
		return nil, err
	}
	st := t.stored
	d := &st.Desc
	d.GlobalSecondaryIndexes = append([]GlobalSecondaryIndexDescription(nil), d.GlobalSecondaryIndexes...)
	if err := checkTableIdle(d, in, name); err != nil {
		return nil, err
	}
	billing, err := updateBilling(d, in, now)
	if err != nil {
		return nil, err
	}
	if err := updateThroughput(d, in, billing, now); err != nil {
		return nil, err
	}
	defs, err := mergeAttributeDefinitions(d, in)
	if err != nil {
		return nil, err
	}
	if err := e.applyIndexUpdates(d, in, defs, billing); err != nil {
		return nil, err
	}
	if err := keepUsedAttributeDefinitions(d, in, defs); err != nil {
		return nil, err
	}
	if err := e.updateStream(&st, in, now, streamFrom); err != nil {
		return nil, err
	}
	if err := e.updateSSE(d, in, account); err != nil {
		return nil, err
	}
	if in.TableClass != "" {
		if in.TableClass != "STANDARD" && in.TableClass != "STANDARD_INFREQUENT_ACCESS" {
			return nil, validationf("1 validation error detected: Value '%s' at 'tableClass' failed to satisfy constraint: Member must satisfy enum value set: [STANDARD, STANDARD_INFREQUENT_ACCESS]", in.TableClass)
		}
		d.TableClassSummary = &TableClassSummary{TableClass: in.TableClass}
	}
	if in.DeletionProtectionEnabled != nil {
		d.DeletionProtectionEnabled = *in.DeletionProtectionEnabled
	}
	return &st, nil
}

// checkTableIdle refuses an update while the table, or (for index
// updates) one of its indexes, is still changing.
func checkTableIdle(d *TableDescription, in *UpdateTableInput, name string) error {
	if d.TableStatus != "ACTIVE" {
		return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being updated: %s", name)
	}
	for _, g := range d.GlobalSecondaryIndexes {
		if g.IndexStatus != "ACTIVE" && len(in.GlobalSecondaryIndexUpdates) > 0 {
			return newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being updated: %s", name)
		}
	}
	return nil
}

// updateBilling applies a change of billing mode to d and returns the
// billing mode the table has after the request.
func updateBilling(d *TableDescription, in *UpdateTableInput, now time.Time) (string, error) {
	billing := "PROVISIONED"
	if d.BillingModeSummary != nil {
		billing = d.BillingModeSummary.BillingMode
	}
	if in.BillingMode == "" || in.BillingMode == billing {
		return billing, nil
	}
	billing = in.BillingMode
	if billing == "PAY_PER_REQUEST" {
		if in.ProvisionedThroughput != nil {
			return "", invalidParam("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
		d.BillingModeSummary = &BillingModeSummary{BillingMode: billing, LastUpdateToPayPerRequestDateTime: ptrFloat(epochSeconds(now))}
		d.ProvisionedThroughput = &ProvisionedThroughputDescription{}
		for i := range d.GlobalSecondaryIndexes {
			d.GlobalSecondaryIndexes[i].ProvisionedThroughput = &ProvisionedThroughputDescription{}
		}
		return billing, nil
	}
	if in.ProvisionedThroughput == nil {
		return "", invalidParam("ProvisionedThroughput must be specified when BillingMode is PROVISIONED")
	}
	d.BillingModeSummary = &BillingModeSummary{BillingMode: billing}
	for i := range d.GlobalSecondaryIndexes {
		g := &d.GlobalSecondaryIndexes[i]
		found := false
		for _, u := range in.GlobalSecondaryIndexUpdates {
			if u.Update != nil && u.Update.IndexName == g.IndexName {
				found = true
			}
		}
		if !found {
			return "", invalidParam("ProvisionedThroughput must be specified for index: %s", g.IndexName)
		}
	}
	return billing, nil
}

// updateThroughput applies the table's new provisioned throughput, with
// the increase and decrease bookkeeping DynamoDB reports.
func updateThroughput(d *TableDescription, in *UpdateTableInput, billing string, now time.Time) error {
	if in.ProvisionedThroughput == nil {
		return nil
	}
	if billing == "PAY_PER_REQUEST" {
		return invalidParam("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
	}
	pt, err := billingThroughput(billing, in.ProvisionedThroughput, "")
	if err != nil {
		return err
	}
	if old := d.ProvisionedThroughput; old != nil && in.BillingMode == "" &&
		old.ReadCapacityUnits == pt.ReadCapacityUnits && old.WriteCapacityUnits == pt.WriteCapacityUnits {
		return validationf("The provisioned throughput for the table will not change. The requested value equals the current value. Current ReadCapacityUnits provisioned for the table: %d. Requested ReadCapacityUnits: %d. Current WriteCapacityUnits provisioned for the table: %d. Requested WriteCapacityUnits: %d. Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits.",
			old.ReadCapacityUnits, pt.ReadCapacityUnits, old.WriteCapacityUnits, pt.WriteCapacityUnits)
	}
	if old := d.ProvisionedThroughput; old != nil {
		pt.NumberOfDecreasesToday = old.NumberOfDecreasesToday
		if pt.ReadCapacityUnits > old.ReadCapacityUnits || pt.WriteCapacityUnits > old.WriteCapacityUnits {
			pt.LastIncreaseDateTime = ptrFloat(epochSeconds(now))
		}
		if pt.ReadCapacityUnits < old.ReadCapacityUnits || pt.WriteCapacityUnits < old.WriteCapacityUnits {
			pt.LastDecreaseDateTime = ptrFloat(epochSeconds(now))
			pt.NumberOfDecreasesToday++
		}
	}
	d.ProvisionedThroughput = pt
	return nil
}

// mergeAttributeDefinitions merges the request's attribute definitions
// into the table's, by name; a key attribute keeps its type.
func mergeAttributeDefinitions(d *TableDescription, in *UpdateTableInput) (map[string]string, error) {
	defs := map[string]string{}
	for _, ad := range d.AttributeDefinitions {
		defs[ad.AttributeName] = ad.AttributeType
	}
	for _, ad := range in.AttributeDefinitions {
		if t, ok := defs[ad.AttributeName]; ok && t != ad.AttributeType {
			return nil, invalidParam("Cannot change the type of an existing key attribute: %s", ad.AttributeName)
		}
		defs[ad.AttributeName] = ad.AttributeType
	}
	return defs, nil
}

// applyIndexUpdates applies the GlobalSecondaryIndexUpdates in order:
// a created index starts CREATING with a backfill, a deleted one goes, an
// updated one takes its new throughput.
func (e *Engine) applyIndexUpdates(d *TableDescription, in *UpdateTableInput, defs map[string]string, billing string) error {
	for _, u := range in.GlobalSecondaryIndexUpdates {
		var err error
		switch {
		case u.Create != nil:
			err = e.createIndex(d, u.Create, len(in.AttributeDefinitions) > 0, defs, billing)
		case u.Delete != nil:
			err = deleteIndex(d, u.Delete.IndexName)
		case u.Update != nil:
			err = updateIndexThroughput(d, u.Update, billing)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// createIndex adds a new global secondary index, CREATING, to d.
func (e *Engine) createIndex(d *TableDescription, c *CreateGSIAction, hasDefs bool, defs map[string]string, billing string) error {
	names := map[string]bool{}
	for _, g := range d.GlobalSecondaryIndexes {
		names[g.IndexName] = true
	}
	for _, l := range d.LocalSecondaryIndexes {
		names[l.IndexName] = true
	}
	if names[c.IndexName] {
		return validationf("Attempting to create an index which already exists")
	}
	if !hasDefs {
		return invalidParam("AttributeDefinitions is not specified for index: %s", c.IndexName)
	}
	if len(d.GlobalSecondaryIndexes) >= 20 {
		return newErr(CodeLimitExceeded, "Subscriber limit exceeded: The number of global secondary indexes exceeds the per-table limit of 20")
	}
	used := map[string]bool{}
	gd, err := e.newGSI(GlobalSecondaryIndex{IndexName: c.IndexName, KeySchema: c.KeySchema,
		Projection: c.Projection, ProvisionedThroughput: c.ProvisionedThroughput}, defs, used, names, billing, d.TableArn)
	if err != nil {
		return err
	}
	gd.IndexStatus = "CREATING"
	gd.Backfilling = ptrBool(true)
	d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, *gd)
	d.TableStatus = "UPDATING"
	return nil
}

// deleteIndex removes the named global secondary index from d.
func deleteIndex(d *TableDescription, name string) error {
	idx := -1
	for i, g := range d.GlobalSecondaryIndexes {
		if g.IndexName == name {
			idx = i
		}
	}
	if idx < 0 {
		return newErr(CodeResourceNotFound, "Requested resource not found: Index: %s not found", name)
	}
	d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes[:idx], d.GlobalSecondaryIndexes[idx+1:]...)
	return nil
}

// updateIndexThroughput sets a global secondary index's provisioned
// throughput.
func updateIndexThroughput(d *TableDescription, u *UpdateGSIAction, billing string) error {
	found := false
	for i := range d.GlobalSecondaryIndexes {
		g := &d.GlobalSecondaryIndexes[i]
		if g.IndexName != u.IndexName {
			continue
		}
		found = true
		if billing == "PAY_PER_REQUEST" {
			return invalidParam("ProvisionedThroughput should not be specified for index: %s when BillingMode is PAY_PER_REQUEST", g.IndexName)
		}
		pt, err := billingThroughput(billing, u.ProvisionedThroughput, g.IndexName)
		if err != nil {
			return err
		}
		g.ProvisionedThroughput = pt
	}
	if !found {
		return newErr(CodeResourceNotFound, "Requested resource not found: Index: %s not found", u.IndexName)
	}
	return nil
}

// keepUsedAttributeDefinitions sets d's attribute definitions to those
// some key schema uses; a definition in the request that none uses is an
// error.
func keepUsedAttributeDefinitions(d *TableDescription, in *UpdateTableInput, defs map[string]string) error {
	used := map[string]bool{}
	for _, k := range d.KeySchema {
		used[k.AttributeName] = true
	}
	for _, g := range d.GlobalSecondaryIndexes {
		for _, k := range g.KeySchema {
			used[k.AttributeName] = true
		}
	}
	for _, l := range d.LocalSecondaryIndexes {
		for _, k := range l.KeySchema {
			used[k.AttributeName] = true
		}
	}
	for _, ad := range in.AttributeDefinitions {
		if !used[ad.AttributeName] {
			return invalidParam("Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
		}
	}
	var newDefs []AttributeDefinition
	for _, n := range sortedNames(defs) {
		if used[n] {
			newDefs = append(newDefs, AttributeDefinition{AttributeName: n, AttributeType: defs[n]})
		}
	}
	d.AttributeDefinitions = newDefs
	return nil
}

// updateStream enables or disables the table's stream as the request's
// StreamSpecification says.
func (e *Engine) updateStream(st *storedTable, in *UpdateTableInput, now time.Time, streamFrom int64) error {
	ss := in.StreamSpecification
	if ss == nil {
		return nil
	}
	d := &st.Desc
	if ss.StreamEnabled == nil {
		return validationf("1 validation error detected: Value null at 'streamSpecification.streamEnabled' failed to satisfy constraint: Member must not be null")
	}
	enabled := d.StreamSpecification != nil && d.StreamSpecification.StreamEnabled != nil && *d.StreamSpecification.StreamEnabled
	if !*ss.StreamEnabled {
		if ss.StreamViewType != "" {
			return invalidParam("If stream is being disabled, then UpdateViewType must not be specified")
		}
		if !enabled {
			return validationf("Table has no stream to disable: TableName: %s", d.TableName)
		}
		d.StreamSpecification = nil
		st.Streams = cloneStreams(st.Streams)
		st.disableStream(now)
		return nil
	}
	if enabled {
		return validationf("Table already has an enabled stream: TableName: %s", d.TableName)
	}
	switch ss.StreamViewType {
	case "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY":
	default:
		return invalidParam("If stream is being enabled then UpdateViewType is required")
	}
	if _, ok := e.changeLog(); !ok {
		return e.errNoStreams()
	}
	d.StreamSpecification = ss
	st.Streams = append([]streamState(nil), st.Streams...)
	st.enableStream(ss.StreamViewType, now, streamFrom)
	return nil
}

// updateSSE applies the request's SSESpecification: enabled names the
// account's managed key, disabled removes the description.
func (e *Engine) updateSSE(d *TableDescription, in *UpdateTableInput, account string) error {
	if in.SSESpecification == nil {
		return nil
	}
	sse, err := checkSSE(in.SSESpecification)
	if err != nil {
		return err
	}
	if sse {
		d.SSEDescription = &SSEDescription{Status: "ENABLED", SSEType: "KMS",
			KMSMasterKeyArn: "arn:aws:kms:" + e.region + ":" + account + ":key/extenddb-managed"}
	} else if in.SSESpecification.Enabled != nil {
		d.SSEDescription = nil
	}
	return nil
}

func ptrBool(b bool) *bool { return &b }

func itoa(i int) string { return jsonInt(int64(i)) }
