package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/extenddb/extenddb/internal/backend"
)

type TimeToLiveSpecification struct {
	Enabled       *bool   `json:"Enabled"`
	AttributeName *string `json:"AttributeName"`
}

type UpdateTimeToLiveInput struct {
	TableName               *string                  `json:"TableName"`
	TimeToLiveSpecification *TimeToLiveSpecification `json:"TimeToLiveSpecification"`
}

type UpdateTimeToLiveOutput struct {
	TimeToLiveSpecification *TimeToLiveSpecification `json:"TimeToLiveSpecification"`
}

type TimeToLiveDescription struct {
	TimeToLiveStatus string `json:"TimeToLiveStatus"`
	AttributeName    string `json:"AttributeName,omitempty"`
}

type DescribeTimeToLiveOutput struct {
	TimeToLiveDescription TimeToLiveDescription `json:"TimeToLiveDescription"`
}

// UpdateTimeToLive enables or disables TTL on a table. Enabling backfills
// the internal TTL index in the background; the sweeper deletes expired
// items once it is built.
func (e *Engine) UpdateTimeToLive(ctx context.Context, account string, in *UpdateTimeToLiveInput) (*UpdateTimeToLiveOutput, error) {
	name, err := requireTableName(in.TableName)
	if err != nil {
		return nil, err
	}
	spec := in.TimeToLiveSpecification
	if spec == nil {
		return nil, validationf("1 validation error detected: Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null")
	}
	var c constraintErrors
	if spec.Enabled == nil {
		c.add(nil, "timeToLiveSpecification.enabled", "Member must not be null")
	}
	if spec.AttributeName == nil {
		c.add(nil, "timeToLiveSpecification.attributeName", "Member must not be null")
	} else if len(*spec.AttributeName) < 1 || len(*spec.AttributeName) > 255 {
		c.add(*spec.AttributeName, "timeToLiveSpecification.attributeName", "Member must have length between 1 and 255")
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	enable := *spec.Enabled
	attrName := *spec.AttributeName
	var createVersion int64
	var res *backend.UpdateTableResult
	for attempt := 1; ; attempt++ {
		if enable {
			if createVersion, err = e.clearIndex(ctx, account, name, ttlIndexName, func(t *table) bool { return t.ttl != nil }); err != nil {
				return nil, err
			}
		}
		res, err = e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: account, Name: name, Fn: func(old *backend.Table) ([]byte, error) {
			if createVersion != 0 && old.Version != createVersion {
				return nil, errDescriptionMoved
			}
			var st storedTable
			if err := json.Unmarshal(old.Desc, &st); err != nil {
				return nil, err
			}
			if beingRestored(&st) {
				return nil, tableNotFound(name)
			}
			// TTL on one attribute refuses any change naming another,
			// enabling or disabling, in the service's words.
			if st.TTL != nil && st.TTL.AttributeName != attrName {
				return nil, validationf("TimeToLive is active on a different AttributeName: current AttributeName is %s", st.TTL.AttributeName)
			}
			if enable {
				if st.TTL != nil {
					return nil, validationf("TimeToLive is already enabled")
				}
				st.TTL = &ttlSetting{AttributeName: attrName, Status: "ENABLING"}
			} else {
				if st.TTL == nil {
					return nil, validationf("TimeToLive is already disabled")
				}
				st.TTL = nil
			}
			return json.Marshal(&st)
		}})
		if err != errDescriptionMoved {
			break
		}
		if attempt >= maxVersionAttempts {
			return nil, backend.Errorf(backend.KindTableVersion, "table %q: description kept changing while TTL was being enabled", name)
		}
	}
	if err != nil {
		if e.missing(err, account, name) {
			return nil, tableNotFound(name)
		}
		return nil, err
	}
	e.tables.drop(account, name)
	ref := res.Table.Ref()
	if enable {
		e.startBackfill(ref, ttlIndexName)
	} else if err := e.dropIndexEntries(ctx, ref, ttlIndexName); err != nil {
		e.log.Error("dropping TTL index", "table", name, "err", err)
	}
	return &UpdateTimeToLiveOutput{TimeToLiveSpecification: spec}, nil
}

// DescribeTimeToLive describes a table's TTL setting.
func (e *Engine) DescribeTimeToLive(ctx context.Context, account string, in *TableNameInput) (*DescribeTimeToLiveOutput, error) {
	t, err := e.freshTable(ctx, account, in.TableName)
	if err != nil {
		return nil, err
	}
	if beingRestored(&t.stored) {
		return nil, tableNotFound(t.name())
	}
	out := &DescribeTimeToLiveOutput{TimeToLiveDescription: TimeToLiveDescription{TimeToLiveStatus: "DISABLED"}}
	if tt := t.stored.TTL; tt != nil {
		out.TimeToLiveDescription = TimeToLiveDescription{TimeToLiveStatus: "ENABLED", AttributeName: tt.AttributeName}
	}
	return out, nil
}

// Tags.

type TagResourceInput struct {
	ResourceArn *string `json:"ResourceArn"`
	Tags        []Tag   `json:"Tags"`
}

type UntagResourceInput struct {
	ResourceArn *string  `json:"ResourceArn"`
	TagKeys     []string `json:"TagKeys"`
}

type ListTagsOfResourceInput struct {
	ResourceArn *string `json:"ResourceArn"`
	NextToken   *string `json:"NextToken"`
}

type ListTagsOfResourceOutput struct {
	Tags      []Tag  `json:"Tags"`
	NextToken string `json:"NextToken,omitempty"`
}

type Empty struct{}

// AppendJSON writes nothing: DynamoDB answers TagResource and UntagResource
// with an empty body (HTTP 200, Content-Length 0), which every SDK accepts.
func (Empty) AppendJSON(b []byte) ([]byte, error) { return b, nil }

var tableArnRE = regexp.MustCompile(`^arn:aws[a-z-]*:dynamodb:([a-z0-9-]+):([0-9]{12}):table/([a-zA-Z0-9_.-]{3,255})$`)

// badResourceArn is the ValidationException for a resource ARN that does
// not name a table: not an ARN, another service's, a DynamoDB ARN of
// another resource type (an index, a backup), or a malformed one.
func badResourceArn(arn string) error {
	parts := strings.SplitN(arn, ":", 6)
	switch {
	case !strings.HasPrefix(arn, "arn:"):
		return invalidParam("ARNs must start with 'arn:': %s", arn)
	case len(parts) == 6 && parts[2] != "dynamodb":
		return invalidParam("Provided Arn is not a DynamoDB resource arn: %s", arn)
	case len(parts) == 6 && strings.HasPrefix(parts[5], "table/") && strings.Count(parts[5], "/") > 1 &&
		!strings.Contains(parts[5], "/stream/"):
		return invalidParam("Invalid resource arn provided, only table or stream is accepted. Provided resource arn: %s", arn)
	}
	return validationf("Invalid TableArn: Invalid ResourceArn provided as input %s", arn)
}

// tableFromArn resolves a table ARN of this account and region.
func (e *Engine) tableFromArn(account string, arn *string) (string, error) {
	if arn == nil {
		return "", validationf("1 validation error detected: Value null at 'resourceArn' failed to satisfy constraint: Member must not be null")
	}
	if len(*arn) < 1 || len(*arn) > 1283 {
		return "", validationf("1 validation error detected: Value '%s' at 'resourceArn' failed to satisfy constraint: Member must have length less than or equal to 1283", *arn)
	}
	m := tableArnRE.FindStringSubmatch(*arn)
	if m == nil {
		return "", badResourceArn(*arn)
	}
	if m[1] != e.region || m[2] != account {
		// "ResourcArn" is DynamoDB's own spelling in this message (clients
		// and conformance suites match the text), not a typo to fix.
		return "", newErr(CodeResourceNotFound, "Requested resource not found: ResourcArn: %s not found", *arn)
	}
	return m[3], nil
}

func (e *Engine) updateTags(ctx context.Context, account string, arn *string, fn func(tags []Tag) ([]Tag, error)) error {
	name, err := e.tableFromArn(account, arn)
	if err != nil {
		return err
	}
	_, err = e.backend.UpdateTable(ctx, backend.UpdateTableParams{Account: account, Name: name, Fn: func(old *backend.Table) ([]byte, error) {
		var st storedTable
		if err := json.Unmarshal(old.Desc, &st); err != nil {
			return nil, err
		}
		if beingRestored(&st) {
			return nil, tableNotFound(name)
		}
		tags, err := fn(st.Tags)
		if err != nil {
			return nil, err
		}
		st.Tags = tags
		return json.Marshal(&st)
	}})
	if e.missing(err, account, name) {
		return newErr(CodeResourceNotFound, "Requested resource not found: ResourcArn: %s not found", *arn)
	}
	if err == nil {
		e.tables.drop(account, name)
	}
	return err
}

// maxTags is DynamoDB's limit on user tags per table.
const maxTags = 50

// tagCharsRE is DynamoDB's tagging restriction: letters, white space and
// numbers (any script), plus + - = . _ : /.
var tagCharsRE = regexp.MustCompile(`^[\p{L}\p{Z}\p{N}+\-=._:/]*$`)

// checkTagList validates the Tags of TagResource and CreateTable: the
// member lengths first (counted in characters, as DynamoDB counts them,
// not bytes), then the allowed characters, the reserved aws: prefix and
// duplicate keys.
func checkTagList(tags []Tag) error {
	var c constraintErrors
	for i, t := range tags {
		switch {
		case t.Key == nil:
			c.add(nil, fmt.Sprintf("tags.%d.member.key", i+1), "Member must not be null")
		case utf8.RuneCountInString(*t.Key) < 1:
			c.add(*t.Key, fmt.Sprintf("tags.%d.member.key", i+1), "Member must have length greater than or equal to 1")
		case utf8.RuneCountInString(*t.Key) > 128:
			c.add(*t.Key, fmt.Sprintf("tags.%d.member.key", i+1), "Member must have length less than or equal to 128")
		}
		if t.Value != nil && utf8.RuneCountInString(*t.Value) > 256 {
			c.add(*t.Value, fmt.Sprintf("tags.%d.member.value", i+1), "Member must have length less than or equal to 256")
		}
	}
	if err := c.err(); err != nil {
		return err
	}
	seen := make(map[string]bool, len(tags))
	for _, t := range tags {
		if !tagCharsRE.MatchString(*t.Key) {
			return validationf("The Tag Key provided is invalid, Key: %s", *t.Key)
		}
		if t.Value == nil {
			// The service answers a missing value this way, not with a
			// "Member must not be null" constraint error.
			return validationf("The Tag Value provided is invalid, Value: null")
		}
		if !tagCharsRE.MatchString(*t.Value) {
			return validationf("The Tag Value provided is invalid, Value: %s", *t.Value)
		}
		if strings.HasPrefix(*t.Key, "aws:") {
			return validationf("Tag Key cannot be prefixed with aws:, Key: %s", *t.Key)
		}
		if seen[*t.Key] {
			return validationf("Duplicate Tag Keys provided as input: Duplicate Tag Key found %s", *t.Key)
		}
		seen[*t.Key] = true
	}
	if len(tags) > maxTags {
		return errTooManyTags
	}
	return nil
}

var errTooManyTags = validationf("Number of Tags exceed the current limit for the provided ResourceArn")

// TagResource adds or replaces tags of a table.
func (e *Engine) TagResource(ctx context.Context, account string, in *TagResourceInput) (*Empty, error) {
	if in.Tags == nil {
		return nil, validationf("1 validation error detected: Value null at 'tags' failed to satisfy constraint: Member must not be null")
	}
	if len(in.Tags) == 0 {
		return nil, validationf("Atleast one Tag needs to be provided as Input.")
	}
	if err := checkTagList(in.Tags); err != nil {
		return nil, err
	}
	err := e.updateTags(ctx, account, in.ResourceArn, func(tags []Tag) ([]Tag, error) {
		m := map[string]string{}
		for _, t := range tags {
			m[*t.Key] = *t.Value
		}
		for _, t := range in.Tags {
			m[*t.Key] = *t.Value
		}
		if len(m) > maxTags {
			return nil, errTooManyTags
		}
		return tagList(m), nil
	})
	if err != nil {
		return nil, err
	}
	return &Empty{}, nil
}

// UntagResource removes tags of a table.
func (e *Engine) UntagResource(ctx context.Context, account string, in *UntagResourceInput) (*Empty, error) {
	if in.TagKeys == nil {
		return nil, validationf("1 validation error detected: Value null at 'tagKeys' failed to satisfy constraint: Member must not be null")
	}
	if len(in.TagKeys) == 0 {
		return nil, validationf("Atleast one Tag Key needs to be provided as Input.")
	}
	var c constraintErrors
	for i, k := range in.TagKeys {
		if n := utf8.RuneCountInString(k); n < 1 {
			c.add(k, fmt.Sprintf("tagKeys.%d.member", i+1), "Member must have length greater than or equal to 1")
		} else if n > 128 {
			c.add(k, fmt.Sprintf("tagKeys.%d.member", i+1), "Member must have length less than or equal to 128")
		}
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	for _, k := range in.TagKeys {
		if !tagCharsRE.MatchString(k) {
			return nil, validationf("The Tag Key provided is invalid, Key: %s", k)
		}
	}
	if len(in.TagKeys) > maxTags {
		return nil, errTooManyTags
	}
	err := e.updateTags(ctx, account, in.ResourceArn, func(tags []Tag) ([]Tag, error) {
		m := map[string]string{}
		for _, t := range tags {
			m[*t.Key] = *t.Value
		}
		for _, k := range in.TagKeys {
			delete(m, k)
		}
		return tagList(m), nil
	})
	if err != nil {
		return nil, err
	}
	return &Empty{}, nil
}

func tagList(m map[string]string) []Tag {
	keys := sortedNames(m)
	out := make([]Tag, len(keys))
	for i, k := range keys {
		k, v := k, m[k]
		out[i] = Tag{Key: &k, Value: &v}
	}
	return out
}

// ListTagsOfResource lists a table's tags.
func (e *Engine) ListTagsOfResource(ctx context.Context, account string, in *ListTagsOfResourceInput) (*ListTagsOfResourceOutput, error) {
	name, err := e.tableFromArn(account, in.ResourceArn)
	if err != nil {
		return nil, err
	}
	e.tables.drop(account, name)
	t, err := e.loadTable(ctx, account, name)
	if err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
			return nil, newErr(CodeResourceNotFound, "Requested resource not found: ResourcArn: %s not found", *in.ResourceArn)
		}
		return nil, err
	}
	if beingRestored(&t.stored) {
		return nil, tableNotFound(name)
	}
	tags := t.stored.Tags
	if tags == nil {
		tags = []Tag{}
	}
	return &ListTagsOfResourceOutput{Tags: tags}, nil
}

// Limits and endpoints.

type DescribeLimitsOutput struct {
	AccountMaxReadCapacityUnits  int64 `json:"AccountMaxReadCapacityUnits"`
	AccountMaxWriteCapacityUnits int64 `json:"AccountMaxWriteCapacityUnits"`
	TableMaxReadCapacityUnits    int64 `json:"TableMaxReadCapacityUnits"`
	TableMaxWriteCapacityUnits   int64 `json:"TableMaxWriteCapacityUnits"`
}

// DescribeLimits reports the provisioned capacity limits.
func (e *Engine) DescribeLimits(ctx context.Context, account string, in *Empty) (*DescribeLimitsOutput, error) {
	return &DescribeLimitsOutput{AccountMaxReadCapacityUnits: 80000, AccountMaxWriteCapacityUnits: 80000,
		TableMaxReadCapacityUnits: 40000, TableMaxWriteCapacityUnits: 40000}, nil
}
