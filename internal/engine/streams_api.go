package engine

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/extenddb/extenddb/internal/backend"
)

// The DynamoDB Streams API (target prefix DynamoDBStreams_20120810):
// ListStreams, DescribeStream, GetShardIterator, GetRecords.

type ListStreamsInput struct {
	TableName               *string `json:"TableName"`
	Limit                   *int64  `json:"Limit"`
	ExclusiveStartStreamArn *string `json:"ExclusiveStartStreamArn"`
}

type StreamSummary struct {
	StreamArn   string `json:"StreamArn"`
	StreamLabel string `json:"StreamLabel"`
	TableName   string `json:"TableName"`
}

type ListStreamsOutput struct {
	Streams                []StreamSummary `json:"Streams"`
	LastEvaluatedStreamArn string          `json:"LastEvaluatedStreamArn,omitempty"`
}

type DescribeStreamInput struct {
	StreamArn             *string `json:"StreamArn"`
	Limit                 *int64  `json:"Limit"`
	ExclusiveStartShardId *string `json:"ExclusiveStartShardId"`
}

type SequenceNumberRange struct {
	StartingSequenceNumber string `json:"StartingSequenceNumber,omitempty"`
	EndingSequenceNumber   string `json:"EndingSequenceNumber,omitempty"`
}

type Shard struct {
	ShardId             string              `json:"ShardId"`
	SequenceNumberRange SequenceNumberRange `json:"SequenceNumberRange"`
	ParentShardId       string              `json:"ParentShardId,omitempty"`
}

type StreamDescription struct {
	StreamArn               string             `json:"StreamArn"`
	StreamLabel             string             `json:"StreamLabel"`
	StreamStatus            string             `json:"StreamStatus"`
	StreamViewType          string             `json:"StreamViewType"`
	CreationRequestDateTime float64            `json:"CreationRequestDateTime"`
	TableName               string             `json:"TableName"`
	KeySchema               []KeySchemaElement `json:"KeySchema"`
	Shards                  []Shard            `json:"Shards"`
	LastEvaluatedShardId    string             `json:"LastEvaluatedShardId,omitempty"`
}

type DescribeStreamOutput struct {
	StreamDescription *StreamDescription `json:"StreamDescription"`
}

type GetShardIteratorInput struct {
	StreamArn         *string `json:"StreamArn"`
	ShardId           *string `json:"ShardId"`
	ShardIteratorType *string `json:"ShardIteratorType"`
	SequenceNumber    *string `json:"SequenceNumber"`
}

type GetShardIteratorOutput struct {
	ShardIterator string `json:"ShardIterator"`
}

type GetRecordsInput struct {
	ShardIterator *string `json:"ShardIterator"`
	Limit         *int64  `json:"Limit"`
}

func streamNotFound(arn string) *Error {
	return newErr(CodeResourceNotFound, "Requested resource not found: Stream: %s not found", arn)
}

// streamRef is a parsed stream ARN.
type streamRef struct {
	arn, account, table, label string
}

// parseStreamArn checks a StreamArn member.
func (e *Engine) parseStreamArn(member string, arn *string) (streamRef, error) {
	var c constraintErrors
	if arn == nil {
		c.add(nil, member, "Member must not be null")
		return streamRef{}, c.err()
	}
	a := *arn
	checkLength(&c, a, member, 37, 1024)
	if err := c.err(); err != nil {
		return streamRef{}, err
	}
	// arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
	parts := strings.SplitN(a, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "dynamodb" {
		return streamRef{}, validationf("Invalid StreamArn")
	}
	res := parts[5]
	if !strings.HasPrefix(res, "table/") {
		return streamRef{}, validationf("Invalid StreamArn")
	}
	res = res[len("table/"):]
	i := strings.Index(res, "/stream/")
	if i <= 0 {
		return streamRef{}, validationf("Invalid StreamArn")
	}
	return streamRef{arn: a, account: parts[4], table: res[:i], label: res[i+len("/stream/"):]}, nil
}

// findStream loads the table and stream an ARN names.
func (e *Engine) findStream(ctx context.Context, account string, r streamRef) (*table, *streamState, error) {
	if r.account != account || !isNameChars(r.table) {
		return nil, nil, streamNotFound(r.arn)
	}
	t, err := e.loadTable(ctx, account, r.table)
	if err != nil {
		if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
			return nil, nil, streamNotFound(r.arn)
		}
		return nil, nil, err
	}
	if t.stored.Desc.TableArn+"/stream/"+r.label != r.arn {
		return nil, nil, streamNotFound(r.arn)
	}
	s := t.streamByLabel(r.label)
	if s == nil {
		return nil, nil, streamNotFound(r.arn)
	}
	return t, s, nil
}

// checkLength adds the service's length constraint errors of a member.
func checkLength(c *constraintErrors, v, member string, lo, hi int) {
	if len(v) < lo {
		c.add(v, member, fmt.Sprintf("Member must have length greater than or equal to %d", lo))
	}
	if len(v) > hi {
		c.add(v, member, fmt.Sprintf("Member must have length less than or equal to %d", hi))
	}
}

func streamLimit(c *constraintErrors, limit *int64, hi int64) int {
	if limit == nil {
		return int(hi)
	}
	v := *limit
	if v < 1 {
		c.add(strconv.FormatInt(v, 10), "limit", "Member must have value greater than or equal to 1")
	} else if v > hi {
		c.add(strconv.FormatInt(v, 10), "limit", fmt.Sprintf("Member must have value less than or equal to %d", hi))
	}
	return int(max(1, min(v, hi)))
}

// ListStreams lists the account's streams (of one table when TableName
// is given), by table name and then label.
func (e *Engine) ListStreams(ctx context.Context, account string, in *ListStreamsInput) (*ListStreamsOutput, error) {
	var c constraintErrors
	limit := streamLimit(&c, in.Limit, 100)
	if in.TableName != nil {
		checkTableName(&c, "tableName", in.TableName)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	var start streamRef
	if in.ExclusiveStartStreamArn != nil {
		var err error
		if start, err = e.parseStreamArn("exclusiveStartStreamArn", in.ExclusiveStartStreamArn); err != nil {
			return nil, err
		}
	}
	var names []string
	if in.TableName != nil {
		names = []string{*in.TableName}
	} else {
		res, err := e.backend.ListTables(ctx, backend.ListTablesParams{Account: account, StartAfter: ""})
		if err != nil {
			return nil, err
		}
		names = res.Names
	}
	out := &ListStreamsOutput{Streams: []StreamSummary{}}
	for _, n := range names {
		if in.ExclusiveStartStreamArn != nil && n < start.table {
			continue
		}
		t, err := e.loadTable(ctx, account, n)
		if err != nil {
			if ee, ok := err.(*Error); ok && ee.Code == CodeResourceNotFound {
				if in.TableName != nil {
					return nil, newErr(CodeResourceNotFound, "Requested resource not found: Table: %s not found", n)
				}
				continue
			}
			return nil, err
		}
		for _, s := range t.stored.Streams {
			if in.ExclusiveStartStreamArn != nil && n == start.table && s.Label <= start.label {
				continue
			}
			if len(out.Streams) == limit {
				out.LastEvaluatedStreamArn = out.Streams[limit-1].StreamArn
				return out, nil
			}
			out.Streams = append(out.Streams, StreamSummary{StreamArn: t.stored.Desc.TableArn + "/stream/" + s.Label,
				StreamLabel: s.Label, TableName: n})
		}
	}
	return out, nil
}

func seqString(seq int64) string {
	s := strconv.FormatInt(seq, 10)
	if len(s) < 21 {
		s = strings.Repeat("0", 21-len(s)) + s
	}
	return s
}

func parseSeq(s string) (int64, bool) {
	if s == "" || len(s) > 40 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(strings.TrimLeft(s, "0")+"0", 10, 64)
	if err != nil {
		return 0, false
	}
	return v / 10, true
}

func shardID(sh *shardState) string {
	return fmt.Sprintf("shardId-%020d-%08x", sh.Created, sh.Gen)
}

func findShard(s *streamState, id string) (*shardState, *shardState) {
	for i := range s.Shards {
		if shardID(&s.Shards[i]) == id {
			var parent *shardState
			if i > 0 {
				parent = &s.Shards[i-1]
			}
			return &s.Shards[i], parent
		}
	}
	return nil, nil
}

// shardEnd is the Seq bound of a closed shard's records (open: false).
func (e *Engine) shardEnd(ctx context.Context, t *table, sh *shardState) (int64, bool, error) {
	if sh.Closed == 0 {
		return 0, false, nil
	}
	if sh.End != 0 {
		return sh.End, true, nil
	}
	// Closed but not yet settled: every record of the shard committed
	// before the close, which committed before t was read.
	last, err := e.logLast(ctx, t.ref)
	if err != nil {
		return 0, false, err
	}
	return max(last, sh.From), true, nil
}

func streamStatus(s *streamState) string {
	if s.Ended == 0 {
		return "ENABLED"
	}
	for _, sh := range s.Shards {
		if sh.End == 0 {
			return "DISABLING"
		}
	}
	return "DISABLED"
}

// DescribeStream describes a stream and its shards.
func (e *Engine) DescribeStream(ctx context.Context, account string, in *DescribeStreamInput) (*DescribeStreamOutput, error) {
	var c constraintErrors
	limit := streamLimit(&c, in.Limit, 100)
	if in.ExclusiveStartShardId != nil {
		checkLength(&c, *in.ExclusiveStartShardId, "exclusiveStartShardId", 28, 65)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	r, err := e.parseStreamArn("streamArn", in.StreamArn)
	if err != nil {
		return nil, err
	}
	t, s, err := e.findStream(ctx, account, r)
	if err != nil {
		return nil, err
	}
	d := &StreamDescription{StreamArn: r.arn, StreamLabel: s.Label, StreamStatus: streamStatus(s), StreamViewType: s.View,
		CreationRequestDateTime: float64(s.Created) / 1000, TableName: t.name(), KeySchema: t.stored.Desc.KeySchema, Shards: []Shard{}}
	started := in.ExclusiveStartShardId == nil
	for i := range s.Shards {
		sh := &s.Shards[i]
		id := shardID(sh)
		if !started {
			started = id == *in.ExclusiveStartShardId
			continue
		}
		if len(d.Shards) == limit {
			d.LastEvaluatedShardId = d.Shards[limit-1].ShardId
			break
		}
		out := Shard{ShardId: id, SequenceNumberRange: SequenceNumberRange{StartingSequenceNumber: seqString(sh.From + 1)}}
		if i > 0 {
			out.ParentShardId = shardID(&s.Shards[i-1])
		}
		if end, closed, err := e.shardEnd(ctx, t, sh); err != nil {
			return nil, err
		} else if closed {
			out.SequenceNumberRange.EndingSequenceNumber = seqString(end)
		}
		d.Shards = append(d.Shards, out)
	}
	return &DescribeStreamOutput{StreamDescription: d}, nil
}

// iterator is a decoded shard iterator.
type iterator struct {
	tableID int64
	account string
	table   string
	label   string
	gen     int64
	after   int64 // the position: records with Seq > after
	issued  int64 // unix ms
}

// iteratorKey authenticates iterators against accidental or casual
// modification (an iterator only ever reads the caller's own account).
var iteratorKey = []byte("extenddb shard iterator v1")

const iteratorMAC = 12

func (it *iterator) encode() string {
	b := make([]byte, 0, 96)
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(it.tableID))
	b = appendBytes(b, []byte(it.account))
	b = appendBytes(b, []byte(it.table))
	b = appendBytes(b, []byte(it.label))
	b = binary.AppendUvarint(b, uint64(it.gen))
	b = binary.AppendUvarint(b, uint64(it.after))
	b = binary.AppendUvarint(b, uint64(it.issued))
	m := hmac.New(sha256.New, iteratorKey)
	m.Write(b)
	b = m.Sum(b)[:len(b)+iteratorMAC]
	return base64.RawURLEncoding.EncodeToString(b)
}

var errBadIterator = validationf("Invalid ShardIterator")

func decodeIterator(s string) (*iterator, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1+iteratorMAC || b[0] != 1 {
		return nil, errBadIterator
	}
	body, mac := b[:len(b)-iteratorMAC], b[len(b)-iteratorMAC:]
	m := hmac.New(sha256.New, iteratorKey)
	m.Write(body)
	if !hmac.Equal(m.Sum(nil)[:iteratorMAC], mac) {
		return nil, errBadIterator
	}
	it := &iterator{}
	rest := body[1:]
	u := func() uint64 {
		if rest == nil {
			return 0
		}
		v, k := binary.Uvarint(rest)
		if k <= 0 {
			rest = nil
			return 0
		}
		rest = rest[k:]
		return v
	}
	str := func() string {
		if rest == nil {
			return ""
		}
		v, r, err := readBytes(rest)
		if err != nil {
			rest = nil
			return ""
		}
		rest = r
		return string(v)
	}
	it.tableID = int64(u())
	it.account, it.table, it.label = str(), str(), str()
	it.gen, it.after, it.issued = int64(u()), int64(u()), int64(u())
	if rest == nil || len(rest) != 0 {
		return nil, errBadIterator
	}
	return it, nil
}

// GetShardIterator returns an iterator on a shard.
func (e *Engine) GetShardIterator(ctx context.Context, account string, in *GetShardIteratorInput) (*GetShardIteratorOutput, error) {
	var c constraintErrors
	if in.ShardId == nil {
		c.add(nil, "shardId", "Member must not be null")
	} else {
		checkLength(&c, *in.ShardId, "shardId", 28, 65)
	}
	typ := ""
	if in.ShardIteratorType == nil {
		c.add(nil, "shardIteratorType", "Member must not be null")
	} else {
		typ = *in.ShardIteratorType
		switch typ {
		case "TRIM_HORIZON", "LATEST", "AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER":
		default:
			c.add(typ, "shardIteratorType", "Member must satisfy enum value set: [AFTER_SEQUENCE_NUMBER, LATEST, AT_SEQUENCE_NUMBER, TRIM_HORIZON]")
		}
	}
	if in.SequenceNumber != nil {
		checkLength(&c, *in.SequenceNumber, "sequenceNumber", 21, 40)
	}
	if in.StreamArn == nil {
		c.add(nil, "streamArn", "Member must not be null")
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	r, err := e.parseStreamArn("streamArn", in.StreamArn)
	if err != nil {
		return nil, err
	}
	var seq int64
	if typ == "AT_SEQUENCE_NUMBER" || typ == "AFTER_SEQUENCE_NUMBER" {
		if in.SequenceNumber == nil {
			return nil, validationf("Must specify a sequence number with iterator type %s", typ)
		}
		var ok bool
		if seq, ok = parseSeq(*in.SequenceNumber); !ok {
			return nil, validationf("Invalid SequenceNumber: %s", *in.SequenceNumber)
		}
	} else if in.SequenceNumber != nil {
		return nil, validationf("Must not specify a sequence number with iterator type %s", typ)
	}
	t, s, err := e.findStream(ctx, account, r)
	if err != nil {
		return nil, err
	}
	sh, _ := findShard(s, *in.ShardId)
	if sh == nil {
		return nil, newErr(CodeResourceNotFound, "Requested resource not found: Shard does not exist")
	}
	cl, ok := e.changeLog()
	if !ok {
		return nil, e.errNoStreams()
	}
	info, err := cl.LogInfo(ctx, backend.LogInfoParams{Table: t.ref})
	if err != nil {
		return nil, err
	}
	end, closed, err := e.shardEnd(ctx, t, sh)
	if err != nil {
		return nil, err
	}
	first := info.First // the oldest record still present
	if info.Count == 0 {
		first = info.Last + 1
	}
	it := &iterator{tableID: t.ref.ID, account: account, table: t.name(), label: s.Label, gen: sh.Gen, issued: e.now().UnixMilli()}
	switch typ {
	case "TRIM_HORIZON":
		it.after = max(sh.From, first-1)
	case "LATEST":
		it.after = max(sh.From, info.Last)
		if closed {
			it.after = end
		}
	default:
		at := seq
		if typ == "AFTER_SEQUENCE_NUMBER" {
			at = seq + 1
		}
		if seq <= sh.From || (closed && seq > end) || seq > info.Last {
			return nil, validationf("Invalid SequenceNumber for the shard: %s", *in.SequenceNumber)
		}
		if seq < first {
			return nil, newErr(CodeTrimmedDataAccess, "The operation attempted to read past the oldest stream record in a shard.")
		}
		// A closed shard's End is an upper bound (the log's last record
		// when it closed), so its range can overlap its child's first
		// records; the record's own generation tag says whose it is.
		res, err := cl.ReadLog(ctx, backend.ReadLogParams{Table: t.ref, After: seq - 1, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(res.Records) == 1 && res.Records[0].Seq == seq {
			_, label, gen, err := decodeHeader(res.Records[0].Data)
			if err != nil {
				return nil, err
			}
			if gen != sh.Gen || string(label) != s.Label {
				return nil, validationf("Invalid SequenceNumber for the shard: %s", *in.SequenceNumber)
			}
		}
		it.after = at - 1
	}
	return &GetShardIteratorOutput{ShardIterator: it.encode()}, nil
}

// GetRecordsOutput is GetRecords' answer; it writes its own JSON (records
// embed the stored item bytes).
type GetRecordsOutput struct {
	region  string
	view    string
	tableID int64
	recs    []backend.LogRecord
	next    string
}

const getRecordsMaxBytes = 1 << 20

// GetRecords reads the records of a shard from an iterator's position.
func (e *Engine) GetRecords(ctx context.Context, account string, in *GetRecordsInput) (*GetRecordsOutput, error) {
	var c constraintErrors
	limit := streamLimit(&c, in.Limit, 1000)
	if in.ShardIterator == nil {
		c.add(nil, "shardIterator", "Member must not be null")
	} else {
		checkLength(&c, *in.ShardIterator, "shardIterator", 1, 2048)
	}
	if err := c.err(); err != nil {
		return nil, err
	}
	it, err := decodeIterator(*in.ShardIterator)
	if err != nil {
		return nil, err
	}
	now := e.now()
	if issued := time.UnixMilli(it.issued); now.Sub(issued) > e.iteratorLifetime {
		return nil, newErr(CodeExpiredIterator, "Iterator expired. The iterator was created at time %s while right now it is %s which is further in the future than the tolerated delay of %d milliseconds.",
			issued.UTC().Format(time.UnixDate), now.UTC().Format(time.UnixDate), e.iteratorLifetime.Milliseconds())
	}
	arn := e.tableArn(it.account, it.table) + "/stream/" + it.label
	if it.account != account {
		return nil, streamNotFound(arn)
	}
	t, s, err := e.findStream(ctx, account, streamRef{arn: arn, account: account, table: it.table, label: it.label})
	if err != nil {
		return nil, err
	}
	if t.ref.ID != it.tableID {
		return nil, streamNotFound(arn)
	}
	var sh *shardState
	for i := range s.Shards {
		if s.Shards[i].Gen == it.gen {
			sh = &s.Shards[i]
		}
	}
	if sh == nil {
		return nil, newErr(CodeResourceNotFound, "Requested resource not found: Shard does not exist")
	}
	cl, ok := e.changeLog()
	if !ok {
		return nil, e.errNoStreams()
	}
	end, closed, err := e.shardEnd(ctx, t, sh)
	if err != nil {
		return nil, err
	}
	out := &GetRecordsOutput{region: e.region, view: s.View, tableID: t.ref.ID}
	pos := it.after
	budget := getRecordsMaxBytes
	exhausted := closed && pos >= end
	checked := false
	for round := 0; round < 16 && !exhausted && len(out.recs) < limit && budget > 0; round++ {
		want := limit - len(out.recs)
		res, err := cl.ReadLog(ctx, backend.ReadLogParams{Table: t.ref, After: pos, Limit: want, MaxBytes: budget})
		if err != nil {
			return nil, err
		}
		if !checked {
			checked = true
			if len(res.Records) == 0 || res.Records[0].Seq != pos+1 {
				// Something before the first record returned may have been
				// trimmed.
				info, err := cl.LogInfo(ctx, backend.LogInfoParams{Table: t.ref})
				if err != nil {
					return nil, err
				}
				first := info.First
				if info.Count == 0 {
					first = info.Last + 1
				}
				if pos+1 < first && (!closed || pos < end) && pos < info.Last {
					return nil, newErr(CodeTrimmedDataAccess, "The operation attempted to read past the oldest stream record in a shard.")
				}
			}
		}
		for _, rec := range res.Records {
			if closed && rec.Seq > end {
				exhausted = true
				break
			}
			pos = rec.Seq
			flags, label, gen, err := decodeHeader(rec.Data)
			if err != nil {
				return nil, err
			}
			if gen != it.gen || string(label) != it.label || flags&flagHidden != 0 {
				continue
			}
			out.recs = append(out.recs, rec)
			budget -= len(rec.Data)
		}
		if len(res.Records) == 0 {
			// caught up with the log
			exhausted = closed
			break
		}
		if len(res.Records) < want {
			break // caught up, or the page is full
		}
	}
	if closed && pos >= end {
		exhausted = true
	}
	if !exhausted {
		next := *it
		next.after = pos
		next.issued = now.UnixMilli()
		out.next = next.encode()
	}
	e.sm.read.Add(float64(len(out.recs)))
	return out, nil
}

// AppendJSON writes the GetRecords answer.
func (o *GetRecordsOutput) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"Records":[`...)
	for i, rec := range o.recs {
		r, err := decodeRecord(rec.Data)
		if err != nil {
			return dst, err
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"awsRegion":"`...)
		dst = append(dst, o.region...)
		dst = append(dst, `","dynamodb":{"ApproximateCreationDateTime":`...)
		dst = strconv.AppendInt(dst, r.ms/1000, 10)
		dst = append(dst, `,"Keys":`...)
		dst = append(dst, r.keys...)
		if r.flags&flagFull != 0 {
			// Point-in-time recovery keeps both images: show what the
			// stream's view type shows, sized as shown.
			r.newRaw, r.oldRaw = viewImages(viewCode(o.view), r.newRaw, r.oldRaw)
			r.size = int64(rawSize(r.keys) + rawSize(r.newRaw) + rawSize(r.oldRaw))
		}
		if len(r.newRaw) > 0 {
			dst = append(dst, `,"NewImage":`...)
			dst = append(dst, r.newRaw...)
		}
		if len(r.oldRaw) > 0 {
			dst = append(dst, `,"OldImage":`...)
			dst = append(dst, r.oldRaw...)
		}
		dst = append(dst, `,"SequenceNumber":"`...)
		dst = append(dst, seqString(rec.Seq)...)
		dst = append(dst, `","SizeBytes":`...)
		dst = strconv.AppendInt(dst, r.size, 10)
		dst = append(dst, `,"StreamViewType":"`...)
		dst = append(dst, o.view...)
		dst = append(dst, `"},"eventID":"`...)
		dst = fmt.Appendf(dst, "%016x%016x", uint64(o.tableID)*0x9e3779b97f4a7c15, uint64(rec.Seq))
		dst = append(dst, `","eventName":"`...)
		switch r.event {
		case eventInsert:
			dst = append(dst, "INSERT"...)
		case eventModify:
			dst = append(dst, "MODIFY"...)
		default:
			dst = append(dst, "REMOVE"...)
		}
		dst = append(dst, `","eventSource":"aws:dynamodb","eventVersion":"1.1"`...)
		if r.service {
			dst = append(dst, `,"userIdentity":{"PrincipalId":"dynamodb.amazonaws.com","Type":"Service"}`...)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, ']')
	if o.next != "" {
		dst = append(dst, `,"NextShardIterator":"`...)
		dst = append(dst, o.next...)
		dst = append(dst, '"')
	}
	return append(dst, '}'), nil
}
