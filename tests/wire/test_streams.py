"""DynamoDB Streams on the wire: the boto3 ``dynamodbstreams`` client
(ListStreams, DescribeStream, GetShardIterator, GetRecords), every view
type, the record shapes and the errors."""

import contextlib
import os
import re
import shlex
import time

import pytest

from conftest import _make_client, extra_server, server_env, unique_table_name, wait_active
from wire_helpers import REGION, expect_error, read_shard, read_stream

VIEWS = ["KEYS_ONLY", "NEW_IMAGE", "OLD_IMAGE", "NEW_AND_OLD_IMAGES"]


def S(v):
    return {"S": v}


def _streams_client(endpoint, validate=True):
    return _make_client(endpoint, validate, service="dynamodbstreams")


@pytest.fixture(scope="module")
def streams(endpoint):
    return _streams_client(endpoint)


@pytest.fixture(scope="module")
def streams_raw(endpoint):
    return _streams_client(endpoint, validate=False)


def stream_table(make_table, view="NEW_AND_OLD_IMAGES", **kw):
    return make_table(StreamSpecification={"StreamEnabled": True, "StreamViewType": view}, **kw)


def latest_arn(ddb, table):
    return ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]


# ------------------------------------------------------------- listing

def test_list_and_describe(ddb, streams, make_table):
    plain = make_table()
    t = stream_table(make_table, "KEYS_ONLY")
    arn = latest_arn(ddb, t)
    assert streams.list_streams(TableName=plain)["Streams"] == []
    res = streams.list_streams(TableName=t)
    label = ddb.describe_table(TableName=t)["Table"]["LatestStreamLabel"]
    assert res["Streams"] == [{"StreamArn": arn, "TableName": t, "StreamLabel": label}]
    assert "LastEvaluatedStreamArn" not in res
    assert any(s["StreamArn"] == arn for s in streams.list_streams()["Streams"])
    d = streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert d["StreamArn"] == arn and d["StreamLabel"] == label and d["TableName"] == t
    assert d["StreamStatus"] == "ENABLED" and d["StreamViewType"] == "KEYS_ONLY"
    assert d["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert d["CreationRequestDateTime"]
    assert len(d["Shards"]) == 1
    sh = d["Shards"][0]
    assert re.fullmatch(r"shardId-\d{20}-[0-9a-f]{8}", sh["ShardId"])
    assert "StartingSequenceNumber" in sh["SequenceNumberRange"]
    assert "EndingSequenceNumber" not in sh["SequenceNumberRange"]
    assert "ParentShardId" not in sh


def test_list_streams_paging(ddb, streams, make_table):
    t = stream_table(make_table, "KEYS_ONLY")
    first = latest_arn(ddb, t)
    ddb.update_table(TableName=t, StreamSpecification={"StreamEnabled": False})
    time.sleep(0.01)
    ddb.update_table(TableName=t, StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
    second = latest_arn(ddb, t)
    assert second != first
    page = streams.list_streams(TableName=t, Limit=1)
    assert [s["StreamArn"] for s in page["Streams"]] == [first]
    assert page["LastEvaluatedStreamArn"] == first
    page = streams.list_streams(TableName=t, Limit=1, ExclusiveStartStreamArn=first)
    assert [s["StreamArn"] for s in page["Streams"]] == [second]
    old = streams.describe_stream(StreamArn=first)["StreamDescription"]
    assert old["StreamStatus"] in ("DISABLING", "DISABLED")
    assert "EndingSequenceNumber" in old["Shards"][-1]["SequenceNumberRange"]
    assert streams.describe_stream(StreamArn=second)["StreamDescription"]["StreamStatus"] == "ENABLED"


# ------------------------------------------------------------- records

@pytest.mark.parametrize("view", VIEWS)
def test_records_per_view_type(ddb, streams, make_table, view):
    t = stream_table(make_table, view, range_key=("sk", "N"))
    arn = latest_arn(ddb, t)
    key = {"pk": S("a"), "sk": {"N": "1"}}
    ddb.put_item(TableName=t, Item={**key, "v": S("one")})
    ddb.put_item(TableName=t, Item={**key, "v": S("one")})  # unchanged: no record
    ddb.update_item(TableName=t, Key=key, UpdateExpression="SET v = :v", ExpressionAttributeValues={":v": S("two")})
    ddb.delete_item(TableName=t, Key=key)
    ddb.delete_item(TableName=t, Key=key)  # absent: no record
    recs = read_stream(streams, arn)
    assert [r["eventName"] for r in recs] == ["INSERT", "MODIFY", "REMOVE"]
    seqs = [int(r["dynamodb"]["SequenceNumber"]) for r in recs]
    assert seqs == sorted(seqs) and len(set(seqs)) == 3
    for r in recs:
        assert r["eventSource"] == "aws:dynamodb" and r["eventVersion"] == "1.1" and r["awsRegion"] == REGION
        assert re.fullmatch(r"[0-9a-f]{32}", r["eventID"])
        d = r["dynamodb"]
        assert d["Keys"] == key and d["StreamViewType"] == view and d["SizeBytes"] > 0
        assert d["ApproximateCreationDateTime"]
        assert "userIdentity" not in r
        want_new = view in ("NEW_IMAGE", "NEW_AND_OLD_IMAGES") and r["eventName"] != "REMOVE"
        want_old = view in ("OLD_IMAGE", "NEW_AND_OLD_IMAGES") and r["eventName"] != "INSERT"
        assert ("NewImage" in d) == want_new, r
        assert ("OldImage" in d) == want_old, r
    if view == "NEW_AND_OLD_IMAGES":
        assert recs[1]["dynamodb"]["OldImage"]["v"] == S("one")
        assert recs[1]["dynamodb"]["NewImage"]["v"] == S("two")
        assert recs[2]["dynamodb"]["OldImage"]["v"] == S("two")


def test_batch_and_transactions(ddb, streams, make_table):
    t = stream_table(make_table)
    arn = latest_arn(ddb, t)
    ddb.batch_write_item(RequestItems={t: [{"PutRequest": {"Item": {"pk": S(f"b{i}")}}} for i in range(3)]})
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": t, "Item": {"pk": S("x"), "v": S("1")}}},
        {"Delete": {"TableName": t, "Key": {"pk": S("b0")}}},
        {"ConditionCheck": {"TableName": t, "Key": {"pk": S("b1")}, "ConditionExpression": "attribute_exists(pk)"}},
    ])
    with pytest.raises(ddb.exceptions.TransactionCanceledException):
        ddb.transact_write_items(TransactItems=[
            {"Put": {"TableName": t, "Item": {"pk": S("y")}}},
            {"ConditionCheck": {"TableName": t, "Key": {"pk": S("nope")}, "ConditionExpression": "attribute_exists(pk)"}},
        ])
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName=t, Item={"pk": S("z")}, ConditionExpression="attribute_exists(pk)")
    got = [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for r in read_stream(streams, arn)]
    # One record per changed item, none for the canceled transaction, the
    # condition check or the failed put. Streams order the records of one
    # item (b0: INSERT before REMOVE); records of different items may come
    # in any order (on the service they may be in different shards; a
    # backend that publishes records kept beside the items, MongoDB or
    # Cassandra, may publish a batch's items in any order).
    assert sorted(got) == sorted([("INSERT", "b0"), ("INSERT", "b1"), ("INSERT", "b2"), ("INSERT", "x"), ("REMOVE", "b0")]), got
    assert got.index(("INSERT", "b0")) < got.index(("REMOVE", "b0")), got


def test_iterator_types_and_paging(ddb, streams, make_table):
    t = stream_table(make_table, "NEW_IMAGE")
    arn = latest_arn(ddb, t)
    for k in "abcde":
        ddb.put_item(TableName=t, Item={"pk": S(k)})
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    all_recs = read_shard(streams, arn, shard)
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in all_recs] == list("abcde")
    seq = all_recs[2]["dynamodb"]["SequenceNumber"]
    at = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="AT_SEQUENCE_NUMBER",
                                    SequenceNumber=seq)["ShardIterator"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in streams.get_records(ShardIterator=at)["Records"]] == list("cde")
    after = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="AFTER_SEQUENCE_NUMBER",
                                       SequenceNumber=seq)["ShardIterator"]
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in streams.get_records(ShardIterator=after)["Records"]] == list("de")
    latest = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
    res = streams.get_records(ShardIterator=latest)
    assert res["Records"] == [] and res["NextShardIterator"]
    ddb.put_item(TableName=t, Item={"pk": S("f")})
    res = streams.get_records(ShardIterator=res["NextShardIterator"])
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in res["Records"]] == ["f"]
    # Limit pages through the shard
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    seen = []
    for _ in range(10):
        res = streams.get_records(ShardIterator=it, Limit=2)
        assert len(res["Records"]) <= 2
        seen += [r["dynamodb"]["Keys"]["pk"]["S"] for r in res["Records"]]
        if not res["Records"]:
            break
        it = res["NextShardIterator"]
    assert seen == list("abcdef")


def test_disabled_stream_shard_is_closed(ddb, streams, make_table):
    t = stream_table(make_table, "KEYS_ONLY")
    arn = latest_arn(ddb, t)
    ddb.put_item(TableName=t, Item={"pk": S("a")})
    res = ddb.update_table(TableName=t, StreamSpecification={"StreamEnabled": False})
    assert "StreamSpecification" not in res["TableDescription"]
    assert res["TableDescription"]["LatestStreamArn"] == arn
    ddb.put_item(TableName=t, Item={"pk": S("b")})  # no stream: no record
    d = streams.describe_stream(StreamArn=arn)["StreamDescription"]
    assert d["StreamStatus"] == "DISABLED"
    sh = d["Shards"][-1]
    assert "EndingSequenceNumber" in sh["SequenceNumberRange"]
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=sh["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
    recs = []
    for _ in range(5):
        res = streams.get_records(ShardIterator=it)
        recs += res["Records"]
        if "NextShardIterator" not in res:
            break
        it = res["NextShardIterator"]
    else:
        pytest.fail("a closed shard never ended (NextShardIterator never null)")
    assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in recs] == ["a"]


# ------------------------------------------------------------- errors

def test_errors(ddb, streams, streams_raw, make_table):
    t = stream_table(make_table, "KEYS_ONLY")
    arn = latest_arn(ddb, t)
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    missing = arn.replace(f"table/{t}/", "table/no-such-table/")
    expect_error(streams.describe_stream, "ResourceNotFoundException", StreamArn=missing)
    expect_error(streams.get_shard_iterator, "ResourceNotFoundException", StreamArn=missing,
                 ShardId=shard, ShardIteratorType="LATEST")
    expect_error(streams.get_shard_iterator, "ResourceNotFoundException", StreamArn=arn,
                 ShardId="shardId-00000000000000000000-0000abcd", ShardIteratorType="LATEST")
    expect_error(streams.list_streams, "ResourceNotFoundException", TableName="no-such-table")
    expect_error(streams_raw.get_shard_iterator, "ValidationException", StreamArn=arn, ShardId=shard,
                 ShardIteratorType="SOMEWHERE")
    expect_error(streams_raw.get_shard_iterator, "ValidationException", StreamArn=arn, ShardId=shard,
                 ShardIteratorType="AT_SEQUENCE_NUMBER")
    expect_error(streams_raw.get_shard_iterator, "ValidationException", StreamArn=arn, ShardId=shard,
                 ShardIteratorType="AT_SEQUENCE_NUMBER", SequenceNumber="0" * 30 + "x")
    expect_error(streams_raw.describe_stream, "ValidationException", StreamArn="arn:nope" + "x" * 40)
    it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="LATEST")["ShardIterator"]
    expect_error(streams_raw.get_records, "ValidationException", ShardIterator=it, Limit=0)
    expect_error(streams_raw.get_records, "ValidationException", ShardIterator=it, Limit=1001)
    expect_error(streams_raw.list_streams, "ValidationException", Limit=0)
    expect_error(streams_raw.describe_stream, "ValidationException", StreamArn=arn, Limit=101)
    tampered = it[:-4] + ("AAAA" if not it.endswith("AAAA") else "BBBB")
    expect_error(streams_raw.get_records, "ValidationException", ShardIterator=tampered)
    # an iterator of a deleted table
    ddb.delete_table(TableName=t)
    expect_error(streams.get_records, "ResourceNotFoundException", ShardIterator=it)


def test_stream_on_create_and_describe_table(ddb, make_table):
    t = stream_table(make_table, "OLD_IMAGE")
    d = ddb.describe_table(TableName=t)["Table"]
    assert d["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "OLD_IMAGE"}
    assert d["LatestStreamArn"] == d["TableArn"] + "/stream/" + d["LatestStreamLabel"]


# ------------------------------------------- rollover, retention (own server)

@contextlib.contextmanager
def own_server(tmp_path, **env):
    """A server of its own, on the backend under test, with extra
    environment (short shard rollover and retention)."""
    extra = os.environ.get("EXTENDDB_SERVE_ARGS")
    args = shlex.split(extra) if extra else ["--memory"]
    with extra_server(tmp_path, args, server_env(tmp_path, **env), "streams.log") as (ep, _):
        yield _make_client(ep), _streams_client(ep), _streams_client(ep, validate=False)


def own_stream_table(ddb, prefix):
    """Creates a KEYS_ONLY stream table on an own_server (whose tables no
    make_table fixture deletes) and answers its name and stream ARN."""
    t = unique_table_name(prefix)
    ddb.create_table(TableName=t, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                     BillingMode="PAY_PER_REQUEST",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    wait_active(ddb, t)
    return t, latest_arn(ddb, t)


def test_rollover_and_retention(tmp_path):
    with own_server(tmp_path, EXTENDDB__STREAMS__SHARD_ROLLOVER="1s", EXTENDDB__STREAMS__RETENTION="10s") as (ddb, streams, raw):
        t, arn = own_stream_table(ddb, "rollover")
        first_shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        old_it = streams.get_shard_iterator(StreamArn=arn, ShardId=first_shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        written = []
        deadline = time.monotonic() + 30
        while True:
            k = f"k{len(written)}"
            ddb.put_item(TableName=t, Item={"pk": S(k)})
            written.append(k)
            shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
            if len(shards) >= 3:
                break
            assert time.monotonic() < deadline, f"no rollover: {shards}"
            time.sleep(0.2)
        for parent, child in zip(shards, shards[1:]):
            assert child["ParentShardId"] == parent["ShardId"]
        for sh in shards[:-1]:
            if "EndingSequenceNumber" not in sh["SequenceNumberRange"]:
                time.sleep(1)
                break
        got = [r["dynamodb"]["Keys"]["pk"]["S"] for r in read_stream(streams, arn)]
        assert got == written
        # retention: the first records go; an iterator at them is refused
        deadline = time.monotonic() + 90
        while True:
            try:
                raw.get_records(ShardIterator=old_it)
            except raw.exceptions.TrimmedDataAccessException:
                break
            except raw.exceptions.ExpiredIteratorException:
                pytest.fail("iterator expired before the trim")
            assert time.monotonic() < deadline, "records never trimmed"
            time.sleep(1)
        recs = read_stream(streams, arn)
        assert [r["dynamodb"]["Keys"]["pk"]["S"] for r in recs] == written[len(written) - len(recs):]
        assert len(recs) < len(written)


def test_sequence_number_of_another_shard(tmp_path):
    """AT_SEQUENCE_NUMBER and AFTER_SEQUENCE_NUMBER take a sequence number
    of the shard named: one of its parent or of its child is refused."""
    with own_server(tmp_path, EXTENDDB__STREAMS__SHARD_ROLLOVER="1s") as (ddb, streams, raw):
        t, arn = own_stream_table(ddb, "othershard")
        deadline = time.monotonic() + 30
        while True:
            ddb.put_item(TableName=t, Item={"pk": S(f"k{time.monotonic()}")})
            shards = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]
            if len(shards) >= 3:
                break
            assert time.monotonic() < deadline, f"no rollover: {shards}"
            time.sleep(0.2)
        seqs = {}
        for sh in shards[:2]:
            it = streams.get_shard_iterator(StreamArn=arn, ShardId=sh["ShardId"], ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
            recs = streams.get_records(ShardIterator=it)["Records"]
            assert recs, sh
            seqs[sh["ShardId"]] = recs[0]["dynamodb"]["SequenceNumber"]
        first, second = shards[0]["ShardId"], shards[1]["ShardId"]
        for typ in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            for shard, seq in ((first, seqs[second]), (second, seqs[first])):
                expect_error(raw.get_shard_iterator, "ValidationException", f"Invalid SequenceNumber for the shard: {seq}",
                             StreamArn=arn, ShardId=shard, ShardIteratorType=typ, SequenceNumber=seq)
            # Its own shard's numbers are taken.
            for shard in (first, second):
                streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType=typ, SequenceNumber=seqs[shard])


def test_stream_metrics(ddb, streams, make_table, endpoint):
    import urllib.request

    def metric(text, name):
        for line in text.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def scrape():
        with urllib.request.urlopen(endpoint + "/metrics", timeout=10) as r:
            return r.read().decode()

    before = scrape()
    t = stream_table(make_table, "KEYS_ONLY")
    arn = latest_arn(ddb, t)
    for k in "abc":
        ddb.put_item(TableName=t, Item={"pk": S(k)})
    assert len(read_stream(streams, arn)) == 3
    after = scrape()
    assert metric(after, "extenddb_stream_records_written_total") - metric(before, "extenddb_stream_records_written_total") >= 3
    assert metric(after, "extenddb_stream_records_read_total") - metric(before, "extenddb_stream_records_read_total") >= 3


def test_expired_iterator(tmp_path):
    with own_server(tmp_path, EXTENDDB__STREAMS__ITERATOR_LIFETIME="1s") as (ddb, streams, raw):
        t, arn = own_stream_table(ddb, "expiry")
        shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        nxt = streams.get_records(ShardIterator=it)["NextShardIterator"]
        time.sleep(1.5)
        e = expect_error(raw.get_records, "ExpiredIteratorException", ShardIterator=nxt)
        assert e.message.startswith("Iterator expired. The iterator was created at time ")
        # a fresh iterator reads again
        it = streams.get_shard_iterator(StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON")["ShardIterator"]
        assert streams.get_records(ShardIterator=it)["Records"] == []


def test_ttl_deletion_record(ddb, streams, make_table):
    t = stream_table(make_table, "NEW_AND_OLD_IMAGES")
    arn = latest_arn(ddb, t)
    ddb.update_time_to_live(TableName=t, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})
    ddb.put_item(TableName=t, Item={"pk": S("gone"), "exp": {"N": str(int(time.time()) - 60)}})
    ddb.put_item(TableName=t, Item={"pk": S("user")})
    ddb.delete_item(TableName=t, Key={"pk": S("user")})
    deadline = time.monotonic() + 60
    while True:
        recs = read_stream(streams, arn)
        ttl = [r for r in recs if r["eventName"] == "REMOVE" and r["dynamodb"]["Keys"]["pk"] == S("gone")]
        if ttl:
            break
        assert time.monotonic() < deadline, f"no TTL deletion record: {recs}"
        time.sleep(0.5)
    r = ttl[0]
    assert r["userIdentity"] == {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}
    assert r["dynamodb"]["OldImage"]["pk"] == S("gone") and "NewImage" not in r["dynamodb"]
    user = [r for r in recs if r["eventName"] == "REMOVE" and r["dynamodb"]["Keys"]["pk"] == S("user")]
    assert len(user) == 1 and "userIdentity" not in user[0]
