package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Workload names.
const (
	WorkloadPutItem    = "putitem-1kb"
	WorkloadGetItem    = "getitem-1kb"
	WorkloadUpdateItem = "updateitem-1kb"
	WorkloadQuery      = "query"
	WorkloadBatchWrite = "batchwrite"
	WorkloadGSIQuery   = "gsi-query"
	WorkloadMixed      = "mixed"
	WorkloadTransact   = "transact"

	// PartiQL (ExecuteStatement) twins of getitem-1kb and updateitem-1kb:
	// the same items and keys, so their server CPU per request compares
	// directly.
	WorkloadPartiQLSelect = "partiql-select-1kb"
	WorkloadPartiQLUpdate = "partiql-update-1kb"
)

// DefaultWorkloads are run when Options.Workloads is empty.
var DefaultWorkloads = []string{WorkloadPutItem, WorkloadGetItem, WorkloadUpdateItem, WorkloadQuery}

// AllWorkloads lists every workload in its canonical order.
var AllWorkloads = []string{WorkloadPutItem, WorkloadGetItem, WorkloadUpdateItem, WorkloadQuery, WorkloadBatchWrite, WorkloadGSIQuery,
	WorkloadMixed, WorkloadTransact, WorkloadPartiQLSelect, WorkloadPartiQLUpdate}

// Table layout. Every table has a string partition key pk, a string sort key
// sk and one GSI (gsi1: gpk/gsk, projection ALL). Preloaded items carry the
// GSI keys; items written by putitem and batchwrite do not (a sparse index),
// so those workloads measure base-table writes.
const (
	attrPK      = "pk"
	attrSK      = "sk"
	attrGPK     = "gpk"
	attrGSK     = "gsk"
	attrPayload = "payload"
	attrVer     = "ver"
	gsiName     = "gsi1"

	// itemsPerPartition is the size of every preloaded partition, in the
	// base table and in the GSI.
	itemsPerPartition = 100
	queryLimit        = 25
	batchSize         = 25
	transactSize      = 4
)

type workload struct {
	name        string
	preload     bool // needs the preloaded partitions
	itemsPerOp  int  // for the report; the op itself returns the exact count
	description string
	op          func(ctx context.Context, w *worker) (items int, code string, err error)
}

var workloads = map[string]workload{
	WorkloadPutItem: {
		name: WorkloadPutItem, itemsPerOp: 1,
		description: "PutItem of a new ItemSize item (own keys per worker)",
		op:          opPutItem,
	},
	WorkloadGetItem: {
		name: WorkloadGetItem, preload: true, itemsPerOp: 1,
		description: "GetItem of a random preloaded ItemSize item",
		op:          opGetItem,
	},
	WorkloadUpdateItem: {
		name: WorkloadUpdateItem, preload: true, itemsPerOp: 1,
		description: "UpdateItem SET payload (ItemSize) ADD ver on a random preloaded item",
		op:          opUpdateItem,
	},
	WorkloadPartiQLSelect: {
		name: WorkloadPartiQLSelect, preload: true, itemsPerOp: 1,
		description: "ExecuteStatement SELECT * by full key of a random preloaded ItemSize item (getitem-1kb in PartiQL)",
		op:          opPartiQLSelect,
	},
	WorkloadPartiQLUpdate: {
		name: WorkloadPartiQLUpdate, preload: true, itemsPerOp: 1,
		description: "ExecuteStatement UPDATE SET payload, ver = ver + 1 on a random preloaded item (updateitem-1kb in PartiQL)",
		op:          opPartiQLUpdate,
	},
	WorkloadQuery: {
		name: WorkloadQuery, preload: true, itemsPerOp: queryLimit,
		description: "Query Limit 25 on a random preloaded 100-item partition",
		op:          opQuery,
	},
	WorkloadBatchWrite: {
		name: WorkloadBatchWrite, itemsPerOp: batchSize,
		description: "BatchWriteItem of 25 new ItemSize items",
		op:          opBatchWrite,
	},
	WorkloadGSIQuery: {
		name: WorkloadGSIQuery, preload: true, itemsPerOp: queryLimit,
		description: "Query Limit 25 on gsi1, a random preloaded 100-item GSI partition",
		op:          opGSIQuery,
	},
	WorkloadMixed: {
		name: WorkloadMixed, preload: true, itemsPerOp: 1,
		description: "50% GetItem of a random preloaded item, 50% PutItem of a new ItemSize item",
		op:          opMixed,
	},
	WorkloadTransact: {
		name: WorkloadTransact, itemsPerOp: transactSize,
		description: "TransactWriteItems of 4 new ItemSize items (each put conditional on its absence)",
		op:          opTransact,
	},
}

// keyspace fixes the preloaded key layout: worker w owns partitions
// pk(w, 0..parts-1) with sort keys sk(0..99), and GSI partitions
// gpk(w, 0..parts-1), each again with 100 items.
type keyspace struct {
	parts int // partitions per worker
}

func pkOf(w, p int) string { return fmt.Sprintf("r%04d-%05d", w, p) }
func skOf(i int) string    { return fmt.Sprintf("%03d", i) }
func gpkOf(w, g int) string {
	return fmt.Sprintf("g%04d-%05d", w, g)
}

// preloadItem is item i of partition p of worker w. Its GSI partition is
// (p*100+i) mod parts, so every GSI partition holds exactly 100 items and
// mixes items of different base partitions.
func (k keyspace) preloadItem(w, p, i int, payload string) map[string]types.AttributeValue {
	g := (p*itemsPerPartition + i) % k.parts
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: pkOf(w, p)},
		attrSK:      &types.AttributeValueMemberS{Value: skOf(i)},
		attrGPK:     &types.AttributeValueMemberS{Value: gpkOf(w, g)},
		attrGSK:     &types.AttributeValueMemberS{Value: fmt.Sprintf("%05d-%03d", p, i)},
		attrPayload: &types.AttributeValueMemberS{Value: payload},
		attrVer:     &types.AttributeValueMemberN{Value: "0"},
	}
}

// payloadLen is the payload length that makes an item of the preload layout
// about size bytes by DynamoDB's item size rules (attribute name lengths
// plus value lengths; a small number counts about 2 bytes).
func payloadLen(size int) int {
	overhead := len(attrPK) + len("r0000-00000") + len(attrSK) + len("000") +
		len(attrGPK) + len("g0000-00000") + len(attrGSK) + len("00000-000") +
		len(attrPayload) + len(attrVer) + 2
	if n := size - overhead; n > 0 {
		return n
	}
	return 1
}

const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func randomPayload(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = letters[r.IntN(len(letters))]
	}
	return b
}

// worker is the state of one closed-loop client. Nothing in it is shared.
type worker struct {
	id      int
	client  *dynamodb.Client
	table   *string
	rng     *rand.Rand
	ks      keyspace
	payload []byte
	seq     uint64
	n       int // the scale benchmark: items in the table, keys drawn from [0, n)
}

// nextPayload returns the worker's payload stamped with a fresh sequence
// number, so successive writes do not carry identical values.
func (w *worker) nextPayload() string {
	w.seq++
	s := strconv.FormatUint(w.seq, 36)
	copy(w.payload, s)
	return string(w.payload)
}

func (w *worker) newItem(prefix byte) map[string]types.AttributeValue {
	w.seq++
	pk := string(prefix) + strconv.Itoa(w.id) + "-" + strconv.FormatUint(w.seq, 10)
	return map[string]types.AttributeValue{
		attrPK:      &types.AttributeValueMemberS{Value: pk},
		attrSK:      &types.AttributeValueMemberS{Value: "0"},
		attrPayload: &types.AttributeValueMemberS{Value: w.nextPayload()},
		attrVer:     &types.AttributeValueMemberN{Value: "0"},
	}
}

func (w *worker) randomKey() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrPK: &types.AttributeValueMemberS{Value: pkOf(w.id, w.rng.IntN(w.ks.parts))},
		attrSK: &types.AttributeValueMemberS{Value: skOf(w.rng.IntN(itemsPerPartition))},
	}
}

func opPutItem(ctx context.Context, w *worker) (int, string, error) {
	_, err := w.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: w.table, Item: w.newItem('p')})
	return 1, "", err
}

func opGetItem(ctx context.Context, w *worker) (int, string, error) {
	out, err := w.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: w.table, Key: w.randomKey()})
	if err != nil {
		return 0, "", err
	}
	if out.Item == nil {
		return 0, codeItemNotFound, nil
	}
	return 1, "", nil
}

var (
	updateExpr  = aws.String("SET #p = :p ADD #v :one")
	updateNames = map[string]string{"#p": attrPayload, "#v": attrVer}
)

func opUpdateItem(ctx context.Context, w *worker) (int, string, error) {
	_, err := w.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                w.table,
		Key:                      w.randomKey(),
		UpdateExpression:         updateExpr,
		ExpressionAttributeNames: updateNames,
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":p":   &types.AttributeValueMemberS{Value: w.nextPayload()},
			":one": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	return 1, "", err
}

// keyParams returns a random preloaded key as PartiQL parameters (pk, sk).
func (w *worker) keyParams() []types.AttributeValue {
	return []types.AttributeValue{
		&types.AttributeValueMemberS{Value: pkOf(w.id, w.rng.IntN(w.ks.parts))},
		&types.AttributeValueMemberS{Value: skOf(w.rng.IntN(itemsPerPartition))},
	}
}

func opPartiQLSelect(ctx context.Context, w *worker) (int, string, error) {
	out, err := w.client.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{
		Statement:  aws.String(`SELECT * FROM "` + *w.table + `" WHERE ` + attrPK + ` = ? AND ` + attrSK + ` = ?`),
		Parameters: w.keyParams(),
	})
	if err != nil {
		return 0, "", err
	}
	if len(out.Items) == 0 {
		return 0, codeItemNotFound, nil
	}
	return len(out.Items), "", nil
}

func opPartiQLUpdate(ctx context.Context, w *worker) (int, string, error) {
	params := append([]types.AttributeValue{&types.AttributeValueMemberS{Value: w.nextPayload()}}, w.keyParams()...)
	_, err := w.client.ExecuteStatement(ctx, &dynamodb.ExecuteStatementInput{
		Statement: aws.String(`UPDATE "` + *w.table + `" SET ` + attrPayload + ` = ? SET ` + attrVer + ` = ` + attrVer +
			` + 1 WHERE ` + attrPK + ` = ? AND ` + attrSK + ` = ?`),
		Parameters: params,
	})
	return 1, "", err
}

var (
	queryExpr    = aws.String("#k = :k")
	queryNames   = map[string]string{"#k": attrPK}
	gsiQueryName = map[string]string{"#k": attrGPK}
)

func opQuery(ctx context.Context, w *worker) (int, string, error) {
	return w.query(ctx, nil, queryNames, pkOf(w.id, w.rng.IntN(w.ks.parts)))
}

func opGSIQuery(ctx context.Context, w *worker) (int, string, error) {
	return w.query(ctx, aws.String(gsiName), gsiQueryName, gpkOf(w.id, w.rng.IntN(w.ks.parts)))
}

func (w *worker) query(ctx context.Context, index *string, names map[string]string, key string) (int, string, error) {
	out, err := w.client.Query(ctx, &dynamodb.QueryInput{
		TableName:                 w.table,
		IndexName:                 index,
		KeyConditionExpression:    queryExpr,
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: key}},
		Limit:                     aws.Int32(queryLimit),
	})
	if err != nil {
		return 0, "", err
	}
	n := len(out.Items)
	if n < queryLimit {
		return n, codeShortQuery, nil
	}
	return n, "", nil
}

// opBatchWrite writes 25 new items; items left in UnprocessedItems are not
// retried (retries are off) and not counted as written.
func opBatchWrite(ctx context.Context, w *worker) (int, string, error) {
	reqs := make([]types.WriteRequest, batchSize)
	for i := range reqs {
		reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: w.newItem('b')}}
	}
	out, err := w.client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
		RequestItems: map[string][]types.WriteRequest{*w.table: reqs},
	})
	if err != nil {
		return 0, "", err
	}
	return batchSize - len(out.UnprocessedItems[*w.table]), "", nil
}

// opMixed alternates reads and writes at random, half and half.
func opMixed(ctx context.Context, w *worker) (int, string, error) {
	if w.rng.IntN(2) == 0 {
		return opGetItem(ctx, w)
	}
	return opPutItem(ctx, w)
}

var absent = aws.String("attribute_not_exists(" + attrPK + ")")

// opTransact writes 4 new items in one TransactWriteItems, each put
// conditional on the item being absent (the conditions always hold).
func opTransact(ctx context.Context, w *worker) (int, string, error) {
	items := make([]types.TransactWriteItem, transactSize)
	for i := range items {
		items[i] = types.TransactWriteItem{Put: &types.Put{TableName: w.table, Item: w.newItem('t'), ConditionExpression: absent}}
	}
	if _, err := w.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}); err != nil {
		return 0, "", err
	}
	return transactSize, "", nil
}
