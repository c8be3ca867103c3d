package engine

import (
	"encoding/json"
	"strconv"

	"github.com/extenddb/extenddb/internal/attr"
)

// The request and response shapes of the DynamoDB API (version 2012-08-10),
// with the wire's JSON member names. Pointers mark members whose absence
// differs from their zero value.

type KeySchemaElement struct {
	AttributeName string `json:"AttributeName"`
	KeyType       string `json:"KeyType"`
}

type AttributeDefinition struct {
	AttributeName string `json:"AttributeName"`
	AttributeType string `json:"AttributeType"`
}

type ProvisionedThroughput struct {
	ReadCapacityUnits  *int64 `json:"ReadCapacityUnits"`
	WriteCapacityUnits *int64 `json:"WriteCapacityUnits"`
}

type Projection struct {
	ProjectionType   string   `json:"ProjectionType,omitempty"`
	NonKeyAttributes []string `json:"NonKeyAttributes,omitempty"`
}

type GlobalSecondaryIndex struct {
	IndexName             string                 `json:"IndexName"`
	KeySchema             []KeySchemaElement     `json:"KeySchema"`
	Projection            *Projection            `json:"Projection"`
	ProvisionedThroughput *ProvisionedThroughput `json:"ProvisionedThroughput,omitempty"`
}

type LocalSecondaryIndex struct {
	IndexName  string             `json:"IndexName"`
	KeySchema  []KeySchemaElement `json:"KeySchema"`
	Projection *Projection        `json:"Projection"`
}

type StreamSpecification struct {
	StreamEnabled  *bool  `json:"StreamEnabled"`
	StreamViewType string `json:"StreamViewType,omitempty"`
}

type SSESpecification struct {
	Enabled        *bool  `json:"Enabled,omitempty"`
	SSEType        string `json:"SSEType,omitempty"`
	KMSMasterKeyId string `json:"KMSMasterKeyId,omitempty"`
}

type Tag struct {
	Key   *string `json:"Key"`
	Value *string `json:"Value"`
}

type CreateTableInput struct {
	TableName                 *string                `json:"TableName"`
	KeySchema                 []KeySchemaElement     `json:"KeySchema"`
	AttributeDefinitions      []AttributeDefinition  `json:"AttributeDefinitions"`
	BillingMode               string                 `json:"BillingMode"`
	ProvisionedThroughput     *ProvisionedThroughput `json:"ProvisionedThroughput"`
	GlobalSecondaryIndexes    []GlobalSecondaryIndex `json:"GlobalSecondaryIndexes"`
	LocalSecondaryIndexes     []LocalSecondaryIndex  `json:"LocalSecondaryIndexes"`
	StreamSpecification       *StreamSpecification   `json:"StreamSpecification"`
	SSESpecification          *SSESpecification      `json:"SSESpecification"`
	TableClass                string                 `json:"TableClass"`
	Tags                      []Tag                  `json:"Tags"`
	DeletionProtectionEnabled *bool                  `json:"DeletionProtectionEnabled"`
}

type ProvisionedThroughputDescription struct {
	LastIncreaseDateTime   *float64 `json:"LastIncreaseDateTime,omitempty"`
	LastDecreaseDateTime   *float64 `json:"LastDecreaseDateTime,omitempty"`
	NumberOfDecreasesToday int64    `json:"NumberOfDecreasesToday"`
	ReadCapacityUnits      int64    `json:"ReadCapacityUnits"`
	WriteCapacityUnits     int64    `json:"WriteCapacityUnits"`
}

type BillingModeSummary struct {
	BillingMode                       string   `json:"BillingMode"`
	LastUpdateToPayPerRequestDateTime *float64 `json:"LastUpdateToPayPerRequestDateTime,omitempty"`
}

type GlobalSecondaryIndexDescription struct {
	IndexName             string                            `json:"IndexName"`
	KeySchema             []KeySchemaElement                `json:"KeySchema"`
	Projection            *Projection                       `json:"Projection"`
	IndexStatus           string                            `json:"IndexStatus"`
	Backfilling           *bool                             `json:"Backfilling,omitempty"`
	ProvisionedThroughput *ProvisionedThroughputDescription `json:"ProvisionedThroughput,omitempty"`
	IndexSizeBytes        int64                             `json:"IndexSizeBytes"`
	ItemCount             int64                             `json:"ItemCount"`
	IndexArn              string                            `json:"IndexArn"`
}

type LocalSecondaryIndexDescription struct {
	IndexName      string             `json:"IndexName"`
	KeySchema      []KeySchemaElement `json:"KeySchema"`
	Projection     *Projection        `json:"Projection"`
	IndexSizeBytes int64              `json:"IndexSizeBytes"`
	ItemCount      int64              `json:"ItemCount"`
	IndexArn       string             `json:"IndexArn"`
}

type SSEDescription struct {
	Status          string `json:"Status,omitempty"`
	SSEType         string `json:"SSEType,omitempty"`
	KMSMasterKeyArn string `json:"KMSMasterKeyArn,omitempty"`
}

type TableClassSummary struct {
	TableClass string `json:"TableClass"`
}

type TableDescription struct {
	TableName                 string                            `json:"TableName"`
	TableId                   string                            `json:"TableId"`
	TableArn                  string                            `json:"TableArn"`
	TableStatus               string                            `json:"TableStatus"`
	CreationDateTime          float64                           `json:"CreationDateTime"`
	KeySchema                 []KeySchemaElement                `json:"KeySchema"`
	AttributeDefinitions      []AttributeDefinition             `json:"AttributeDefinitions"`
	ProvisionedThroughput     *ProvisionedThroughputDescription `json:"ProvisionedThroughput,omitempty"`
	BillingModeSummary        *BillingModeSummary               `json:"BillingModeSummary,omitempty"`
	TableSizeBytes            int64                             `json:"TableSizeBytes"`
	ItemCount                 int64                             `json:"ItemCount"`
	GlobalSecondaryIndexes    []GlobalSecondaryIndexDescription `json:"GlobalSecondaryIndexes,omitempty"`
	LocalSecondaryIndexes     []LocalSecondaryIndexDescription  `json:"LocalSecondaryIndexes,omitempty"`
	StreamSpecification       *StreamSpecification              `json:"StreamSpecification,omitempty"`
	LatestStreamLabel         string                            `json:"LatestStreamLabel,omitempty"`
	LatestStreamArn           string                            `json:"LatestStreamArn,omitempty"`
	SSEDescription            *SSEDescription                   `json:"SSEDescription,omitempty"`
	TableClassSummary         *TableClassSummary                `json:"TableClassSummary,omitempty"`
	DeletionProtectionEnabled bool                              `json:"DeletionProtectionEnabled"`

	// RestoreSummary is set on tables made by RestoreTableFromBackup.
	RestoreSummary *RestoreSummary `json:"RestoreSummary,omitempty"`
}

type CreateTableOutput struct {
	TableDescription *TableDescription `json:"TableDescription"`
}

type TableNameInput struct {
	TableName *string `json:"TableName"`
}

type DescribeTableOutput struct {
	Table *TableDescription `json:"Table"`
}

type DeleteTableOutput struct {
	TableDescription *DeletedTableDescription `json:"TableDescription"`
}

// DeletedTableDescription is the part of a table's description that
// DeleteTable answers with: DynamoDB leaves out the key schema, attribute
// definitions, creation time and index descriptions.
type DeletedTableDescription struct {
	TableName                 string                            `json:"TableName"`
	TableId                   string                            `json:"TableId"`
	TableArn                  string                            `json:"TableArn"`
	TableStatus               string                            `json:"TableStatus"`
	ProvisionedThroughput     *ProvisionedThroughputDescription `json:"ProvisionedThroughput,omitempty"`
	BillingModeSummary        *BillingModeSummary               `json:"BillingModeSummary,omitempty"`
	TableSizeBytes            int64                             `json:"TableSizeBytes"`
	ItemCount                 int64                             `json:"ItemCount"`
	DeletionProtectionEnabled bool                              `json:"DeletionProtectionEnabled"`
}

type ListTablesInput struct {
	ExclusiveStartTableName *string `json:"ExclusiveStartTableName"`
	Limit                   *int64  `json:"Limit"`
}

type ListTablesOutput struct {
	TableNames             []string `json:"TableNames"`
	LastEvaluatedTableName string   `json:"LastEvaluatedTableName,omitempty"`
}

// ConsumedCapacity is reported when ReturnConsumedCapacity asks for it.
type ConsumedCapacity struct {
	TableName              string              `json:"TableName"`
	CapacityUnits          float64             `json:"CapacityUnits"`
	ReadCapacityUnits      *float64            `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits     *float64            `json:"WriteCapacityUnits,omitempty"`
	Table                  *Capacity           `json:"Table,omitempty"`
	GlobalSecondaryIndexes map[string]Capacity `json:"GlobalSecondaryIndexes,omitempty"`
	LocalSecondaryIndexes  map[string]Capacity `json:"LocalSecondaryIndexes,omitempty"`
}

type Capacity struct {
	CapacityUnits      float64  `json:"CapacityUnits"`
	ReadCapacityUnits  *float64 `json:"ReadCapacityUnits,omitempty"`
	WriteCapacityUnits *float64 `json:"WriteCapacityUnits,omitempty"`
}

// ExpectedAttributeValue is the legacy Expected condition shape.
type ExpectedAttributeValue struct {
	Value              *attr.Value  `json:"Value"`
	Exists             *bool        `json:"Exists"`
	ComparisonOperator string       `json:"ComparisonOperator"`
	AttributeValueList []attr.Value `json:"AttributeValueList"`
}

// Condition is the legacy KeyConditions/QueryFilter/ScanFilter shape.
type Condition struct {
	ComparisonOperator string       `json:"ComparisonOperator"`
	AttributeValueList []attr.Value `json:"AttributeValueList"`
}

// AttributeValueUpdate is the legacy AttributeUpdates shape.
type AttributeValueUpdate struct {
	Value  *attr.Value `json:"Value"`
	Action string      `json:"Action"`
}

type PutItemInput struct {
	TableName                           *string                           `json:"TableName"`
	Item                                attr.Item                         `json:"Item"`
	ConditionExpression                 *string                           `json:"ConditionExpression"`
	ExpressionAttributeNames            map[string]string                 `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues           map[string]attr.Value             `json:"ExpressionAttributeValues"`
	ReturnValues                        string                            `json:"ReturnValues"`
	ReturnConsumedCapacity              string                            `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics         string                            `json:"ReturnItemCollectionMetrics"`
	ReturnValuesOnConditionCheckFailure string                            `json:"ReturnValuesOnConditionCheckFailure"`
	Expected                            map[string]ExpectedAttributeValue `json:"Expected"`
	ConditionalOperator                 string                            `json:"ConditionalOperator"`
}

type ItemOutput struct {
	Attributes       attr.Item         `json:"Attributes,omitempty"`
	ConsumedCapacity *ConsumedCapacity `json:"ConsumedCapacity,omitempty"`
}

type GetItemInput struct {
	TableName                *string           `json:"TableName"`
	Key                      attr.Item         `json:"Key"`
	ProjectionExpression     *string           `json:"ProjectionExpression"`
	ExpressionAttributeNames map[string]string `json:"ExpressionAttributeNames"`
	AttributesToGet          []string          `json:"AttributesToGet"`
	ConsistentRead           *bool             `json:"ConsistentRead"`
	ReturnConsumedCapacity   string            `json:"ReturnConsumedCapacity"`
}

type GetItemOutput struct {
	Item             RawJSON           `json:"Item,omitempty"`
	ConsumedCapacity *ConsumedCapacity `json:"ConsumedCapacity,omitempty"`
}

type DeleteItemInput struct {
	TableName                           *string                           `json:"TableName"`
	Key                                 attr.Item                         `json:"Key"`
	ConditionExpression                 *string                           `json:"ConditionExpression"`
	ExpressionAttributeNames            map[string]string                 `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues           map[string]attr.Value             `json:"ExpressionAttributeValues"`
	ReturnValues                        string                            `json:"ReturnValues"`
	ReturnConsumedCapacity              string                            `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics         string                            `json:"ReturnItemCollectionMetrics"`
	ReturnValuesOnConditionCheckFailure string                            `json:"ReturnValuesOnConditionCheckFailure"`
	Expected                            map[string]ExpectedAttributeValue `json:"Expected"`
	ConditionalOperator                 string                            `json:"ConditionalOperator"`
}

type UpdateItemInput struct {
	TableName                           *string                           `json:"TableName"`
	Key                                 attr.Item                         `json:"Key"`
	UpdateExpression                    *string                           `json:"UpdateExpression"`
	ConditionExpression                 *string                           `json:"ConditionExpression"`
	ExpressionAttributeNames            map[string]string                 `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues           map[string]attr.Value             `json:"ExpressionAttributeValues"`
	ReturnValues                        string                            `json:"ReturnValues"`
	ReturnConsumedCapacity              string                            `json:"ReturnConsumedCapacity"`
	ReturnItemCollectionMetrics         string                            `json:"ReturnItemCollectionMetrics"`
	ReturnValuesOnConditionCheckFailure string                            `json:"ReturnValuesOnConditionCheckFailure"`
	AttributeUpdates                    map[string]AttributeValueUpdate   `json:"AttributeUpdates"`
	Expected                            map[string]ExpectedAttributeValue `json:"Expected"`
	ConditionalOperator                 string                            `json:"ConditionalOperator"`
}

type QueryInput struct {
	TableName                 *string               `json:"TableName"`
	IndexName                 *string               `json:"IndexName"`
	KeyConditionExpression    *string               `json:"KeyConditionExpression"`
	FilterExpression          *string               `json:"FilterExpression"`
	ProjectionExpression      *string               `json:"ProjectionExpression"`
	ExpressionAttributeNames  map[string]string     `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues map[string]attr.Value `json:"ExpressionAttributeValues"`
	Select                    string                `json:"Select"`
	Limit                     *int64                `json:"Limit"`
	ConsistentRead            *bool                 `json:"ConsistentRead"`
	ScanIndexForward          *bool                 `json:"ScanIndexForward"`
	ExclusiveStartKey         attr.Item             `json:"ExclusiveStartKey"`
	ReturnConsumedCapacity    string                `json:"ReturnConsumedCapacity"`
	AttributesToGet           []string              `json:"AttributesToGet"`
	KeyConditions             map[string]Condition  `json:"KeyConditions"`
	QueryFilter               map[string]Condition  `json:"QueryFilter"`
	ConditionalOperator       string                `json:"ConditionalOperator"`

	// pageBytes bounds the page below 1 MB when a PartiQL SELECT reads
	// several partitions into one page; 0 = 1 MB.
	pageBytes int
}

type ScanInput struct {
	TableName                 *string               `json:"TableName"`
	IndexName                 *string               `json:"IndexName"`
	FilterExpression          *string               `json:"FilterExpression"`
	ProjectionExpression      *string               `json:"ProjectionExpression"`
	ExpressionAttributeNames  map[string]string     `json:"ExpressionAttributeNames"`
	ExpressionAttributeValues map[string]attr.Value `json:"ExpressionAttributeValues"`
	Select                    string                `json:"Select"`
	Limit                     *int64                `json:"Limit"`
	ConsistentRead            *bool                 `json:"ConsistentRead"`
	ExclusiveStartKey         attr.Item             `json:"ExclusiveStartKey"`
	Segment                   *int64                `json:"Segment"`
	TotalSegments             *int64                `json:"TotalSegments"`
	ReturnConsumedCapacity    string                `json:"ReturnConsumedCapacity"`
	AttributesToGet           []string              `json:"AttributesToGet"`
	ScanFilter                map[string]Condition  `json:"ScanFilter"`
	ConditionalOperator       string                `json:"ConditionalOperator"`
}

type QueryOutput struct {
	Items            *[]RawJSON        `json:"Items,omitempty"`
	Count            int               `json:"Count"`
	ScannedCount     int               `json:"ScannedCount"`
	LastEvaluatedKey attr.Item         `json:"LastEvaluatedKey,omitempty"`
	ConsumedCapacity *ConsumedCapacity `json:"ConsumedCapacity,omitempty"`

	scannedBytes int // the bytes read, for a PartiQL page spanning partitions
}

// RawJSON is pre-encoded JSON written to the wire as it is.
type RawJSON []byte

// MarshalJSON returns the bytes unchanged.
func (r RawJSON) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	return r, nil
}

var _ json.Marshaler = RawJSON(nil)

// Appender is implemented by responses that write their own JSON, so that
// pre-encoded items are copied to the wire without being re-validated.
type Appender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// appendMember appends `"name":` + the JSON of v.
func appendMember(dst []byte, first bool, name string, v any) ([]byte, error) {
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// AppendJSON writes the Query/Scan response.
func (o *QueryOutput) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	if o.Items != nil {
		dst = append(dst, `"Items":[`...)
		for i, it := range *o.Items {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, it...)
		}
		dst = append(dst, ']')
		first = false
	}
	if !first {
		dst = append(dst, ',')
	}
	dst = append(dst, `"Count":`...)
	dst = strconv.AppendInt(dst, int64(o.Count), 10)
	dst = append(dst, `,"ScannedCount":`...)
	dst = strconv.AppendInt(dst, int64(o.ScannedCount), 10)
	if o.LastEvaluatedKey != nil {
		dst = append(dst, `,"LastEvaluatedKey":`...)
		dst = attr.AppendItem(dst, o.LastEvaluatedKey)
	}
	var err error
	if o.ConsumedCapacity != nil {
		if dst, err = appendMember(dst, false, "ConsumedCapacity", o.ConsumedCapacity); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendJSON writes the GetItem response.
func (o *GetItemOutput) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, '{')
	first := true
	if o.Item != nil {
		dst = append(dst, `"Item":`...)
		dst = append(dst, o.Item...)
		first = false
	}
	var err error
	if o.ConsumedCapacity != nil {
		if dst, err = appendMember(dst, first, "ConsumedCapacity", o.ConsumedCapacity); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

func jsonInt(i int64) string {
	b, _ := json.Marshal(i)
	return string(b)
}

type PointInTimeRecoveryDescription struct {
	PointInTimeRecoveryStatus  string   `json:"PointInTimeRecoveryStatus"`
	RecoveryPeriodInDays       *int64   `json:"RecoveryPeriodInDays,omitempty"`
	EarliestRestorableDateTime *float64 `json:"EarliestRestorableDateTime,omitempty"`
	LatestRestorableDateTime   *float64 `json:"LatestRestorableDateTime,omitempty"`
}

type ContinuousBackupsDescription struct {
	ContinuousBackupsStatus        string                          `json:"ContinuousBackupsStatus"`
	PointInTimeRecoveryDescription *PointInTimeRecoveryDescription `json:"PointInTimeRecoveryDescription"`
}

type ContinuousBackupsOutput struct {
	ContinuousBackupsDescription *ContinuousBackupsDescription `json:"ContinuousBackupsDescription"`
}

type RestoreSummary struct {
	SourceBackupArn   string  `json:"SourceBackupArn,omitempty"`
	SourceTableArn    string  `json:"SourceTableArn,omitempty"`
	RestoreDateTime   float64 `json:"RestoreDateTime"`
	RestoreInProgress bool    `json:"RestoreInProgress"`
}
