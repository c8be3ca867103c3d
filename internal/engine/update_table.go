package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/extenddb/extenddb/internal/storage"
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
		return nil, err
	}
	if in.BillingMode == "" && in.ProvisionedThroughput == nil && in.GlobalSecondaryIndexUpdates == nil &&
		in.StreamSpecification == nil && in.SSESpecification == nil && in.TableClass == "" && in.DeletionProtectionEnabled == nil {
		return nil, validationf("At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates, SSESpecification, ReplicaUpdates, MultiAccountReplicaReady, ReplicaTransitRoleArn, MultiRegionConsistency, DeletionProtectionEnabled, OnDemandThroughput, WarmThroughput or TableClass is required")
	}
	if err := checkUpdateConcerns(in); err != nil {
		return nil, err
	}
	if err := e.refuseRestoreTarget(ctx, account, name); err != nil {
		return nil, err
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
			return nil, invalidParam("One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, GlobalSecondaryIndexUpdate.Delete must not be null")
		case n > 1:
			return nil, invalidParam("Only one global secondary index action is allowed per GlobalSecondaryIndexUpdate object")
		}
	}
	if creates+deletes > 1 {
		return nil, newErr(CodeLimitExceeded, "Subscriber limit exceeded: Only 1 online index can be created or deleted simultaneously per table")
	}
	now := e.now()
	createName, deleteName := in.indexChanges()
	var createVersion int64
	var res *storage.UpdateTableResult
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
			gt, err := e.backend.GetTable(ctx, storage.GetTableParams{Account: account, Name: name})
			switch {
			case err == nil:
				streamFromID = gt.Table.ID
				if streamFrom, err = e.logLast(ctx, gt.Table.Ref()); err != nil && !storage.IsKind(err, storage.KindTableNotFound) {
					return nil, err
				}
			case !storage.IsKind(err, storage.KindTableNotFound):
				return nil, err
			}
		}
		if createName != "" {
			if createVersion, err = e.clearIndex(ctx, account, name, createName, func(t *table) bool { return t.index(createName) != nil }); err != nil {
				return nil, err
			}
		}
		res, err = e.backend.UpdateTable(ctx, storage.UpdateTableParams{Account: account, Name: name, Fn: func(old *storage.Table) ([]byte, error) {
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
			break
		}
		if attempt >= maxVersionAttempts {
			return nil, storage.Errorf(storage.KindTableVersion, "table %q: description kept changing while it was prepared (index %q, stream %v)", name, createName, enabling)
		}
	}
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
	// The effects of the committed update: a committed update applied every
	// requested change, so they follow from the request alone.
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
	return &UpdateTableOutput{TableDescription: withStats(t.describe(), e.peekStats(t.ref.ID))}, nil
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
// writes nothing, so the backend may run it more than once.
func (e *Engine) updatedTable(old *storage.Table, account, name string, in *UpdateTableInput, now time.Time, streamFrom int64) (*storedTable, error) {
	t, err := parseTable(old)
	if err != nil {
		return nil, err
	}
	st := t.stored
	d := &st.Desc
	d.GlobalSecondaryIndexes = append([]GlobalSecondaryIndexDescription(nil), d.GlobalSecondaryIndexes...)
	if d.TableStatus != "ACTIVE" {
		return nil, newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being updated: %s", name)
	}
	for _, g := range d.GlobalSecondaryIndexes {
		if g.IndexStatus != "ACTIVE" && len(in.GlobalSecondaryIndexUpdates) > 0 {
			return nil, newErr(CodeResourceInUse, "Attempt to change a resource which is still in use: Table is being updated: %s", name)
		}
	}
	billing := "PROVISIONED"
	if d.BillingModeSummary != nil {
		billing = d.BillingModeSummary.BillingMode
	}
	if in.BillingMode != "" && in.BillingMode != billing {
		billing = in.BillingMode
		if billing == "PAY_PER_REQUEST" {
			if in.ProvisionedThroughput != nil {
				return nil, invalidParam("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
			}
			d.BillingModeSummary = &BillingModeSummary{BillingMode: billing, LastUpdateToPayPerRequestDateTime: ptrFloat(epochSeconds(now))}
			d.ProvisionedThroughput = &ProvisionedThroughputDescription{}
			for i := range d.GlobalSecondaryIndexes {
				d.GlobalSecondaryIndexes[i].ProvisionedThroughput = &ProvisionedThroughputDescription{}
			}
		} else {
			if in.ProvisionedThroughput == nil {
				return nil, invalidParam("ProvisionedThroughput must be specified when BillingMode is PROVISIONED")
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
					return nil, invalidParam("ProvisionedThroughput must be specified for index: %s", g.IndexName)
				}
			}
		}
	}
	if in.ProvisionedThroughput != nil {
		if billing == "PAY_PER_REQUEST" {
			return nil, invalidParam("Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
		pt, err := billingThroughput(billing, in.ProvisionedThroughput, "")
		if err != nil {
			return nil, err
		}
		if old := d.ProvisionedThroughput; old != nil && in.BillingMode == "" &&
			old.ReadCapacityUnits == pt.ReadCapacityUnits && old.WriteCapacityUnits == pt.WriteCapacityUnits {
			return nil, validationf("The provisioned throughput for the table will not change. The requested value equals the current value. Current ReadCapacityUnits provisioned for the table: %d. Requested ReadCapacityUnits: %d. Current WriteCapacityUnits provisioned for the table: %d. Requested WriteCapacityUnits: %d. Refer to the Amazon DynamoDB Developer Guide for current limits and how to request higher limits.",
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
	}
	// Attribute definitions: merge, then every definition must be used.
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
	for _, u := range in.GlobalSecondaryIndexUpdates {
		switch {
		case u.Create != nil:
			names := map[string]bool{}
			for _, g := range d.GlobalSecondaryIndexes {
				names[g.IndexName] = true
			}
			for _, l := range d.LocalSecondaryIndexes {
				names[l.IndexName] = true
			}
			if names[u.Create.IndexName] {
				return nil, validationf("Attempting to create an index which already exists")
			}
			if len(in.AttributeDefinitions) == 0 {
				return nil, invalidParam("AttributeDefinitions is not specified for index: %s", u.Create.IndexName)
			}
			if len(d.GlobalSecondaryIndexes) >= 20 {
				return nil, newErr(CodeLimitExceeded, "Subscriber limit exceeded: The number of global secondary indexes exceeds the per-table limit of 20")
			}
			used := map[string]bool{}
			gd, err := e.newGSI(GlobalSecondaryIndex{IndexName: u.Create.IndexName, KeySchema: u.Create.KeySchema,
				Projection: u.Create.Projection, ProvisionedThroughput: u.Create.ProvisionedThroughput}, defs, used, names, billing, d.TableArn)
			if err != nil {
				return nil, err
			}
			gd.IndexStatus = "CREATING"
			gd.Backfilling = ptrBool(true)
			d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes, *gd)
			d.TableStatus = "UPDATING"
		case u.Delete != nil:
			idx := -1
			for i, g := range d.GlobalSecondaryIndexes {
				if g.IndexName == u.Delete.IndexName {
					idx = i
				}
			}
			if idx < 0 {
				return nil, newErr(CodeResourceNotFound, "Requested resource not found: Index: %s not found", u.Delete.IndexName)
			}
			d.GlobalSecondaryIndexes = append(d.GlobalSecondaryIndexes[:idx], d.GlobalSecondaryIndexes[idx+1:]...)
		case u.Update != nil:
			found := false
			for i := range d.GlobalSecondaryIndexes {
				g := &d.GlobalSecondaryIndexes[i]
				if g.IndexName != u.Update.IndexName {
					continue
				}
				found = true
				if billing == "PAY_PER_REQUEST" {
					return nil, invalidParam("ProvisionedThroughput should not be specified for index: %s when BillingMode is PAY_PER_REQUEST", g.IndexName)
				}
				pt, err := billingThroughput(billing, u.Update.ProvisionedThroughput, g.IndexName)
				if err != nil {
					return nil, err
				}
				g.ProvisionedThroughput = pt
			}
			if !found {
				return nil, newErr(CodeResourceNotFound, "Requested resource not found: Index: %s not found", u.Update.IndexName)
			}
		}
	}
	// Keep only the attribute definitions that some key schema uses.
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
			return nil, invalidParam("Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
		}
	}
	var newDefs []AttributeDefinition
	for _, n := range sortedNames(defs) {
		if used[n] {
			newDefs = append(newDefs, AttributeDefinition{AttributeName: n, AttributeType: defs[n]})
		}
	}
	d.AttributeDefinitions = newDefs
	if in.StreamSpecification != nil {
		ss := in.StreamSpecification
		if ss.StreamEnabled == nil {
			return nil, validationf("1 validation error detected: Value null at 'streamSpecification.streamEnabled' failed to satisfy constraint: Member must not be null")
		}
		enabled := d.StreamSpecification != nil && d.StreamSpecification.StreamEnabled != nil && *d.StreamSpecification.StreamEnabled
		if *ss.StreamEnabled {
			if enabled {
				return nil, validationf("Table already has an enabled stream: TableName: %s", d.TableName)
			}
			switch ss.StreamViewType {
			case "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES", "KEYS_ONLY":
			default:
				return nil, invalidParam("If stream is being enabled then UpdateViewType is required")
			}
			if _, ok := e.changeLog(); !ok {
				return nil, e.errNoStreams()
			}
			d.StreamSpecification = ss
			st.Streams = append([]streamState(nil), st.Streams...)
			st.enableStream(ss.StreamViewType, now, streamFrom)
		} else {
			if ss.StreamViewType != "" {
				return nil, invalidParam("If stream is being disabled, then UpdateViewType must not be specified")
			}
			if !enabled {
				return nil, validationf("Table has no stream to disable: TableName: %s", d.TableName)
			}
			d.StreamSpecification = nil
			st.Streams = cloneStreams(st.Streams)
			st.disableStream(now)
		}
	}
	if in.SSESpecification != nil {
		sse, err := checkSSE(in.SSESpecification)
		if err != nil {
			return nil, err
		}
		if sse {
			d.SSEDescription = &SSEDescription{Status: "ENABLED", SSEType: "KMS",
				KMSMasterKeyArn: "arn:aws:kms:" + e.region + ":" + account + ":key/extenddb-managed"}
		} else if in.SSESpecification.Enabled != nil {
			d.SSEDescription = nil
		}
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

func ptrBool(b bool) *bool { return &b }

func itoa(i int) string { return jsonInt(int64(i)) }
