"""Time to live: UpdateTimeToLive, DescribeTimeToLive and the sweeper."""

import time

import pytest

from conftest import _make_client
from wire_helpers import expect_error, read_stream, validation


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def ttl_on(ddb, table, attr="exp"):
    return ddb.update_time_to_live(TableName=table, TimeToLiveSpecification={
        "Enabled": True, "AttributeName": attr})


def get(ddb, table, pk):
    return ddb.get_item(TableName=table, Key={"pk": S(pk)}, ConsistentRead=True).get("Item")


def wait_gone(ddb, table, pk, timeout=30.0):
    deadline = time.monotonic() + timeout
    while get(ddb, table, pk) is not None:
        assert time.monotonic() < deadline, f"expired item {pk} still present after {timeout}s"
        time.sleep(0.5)


# ------------------------------------------------------------- API

def test_describe_ttl_default_disabled(ddb, table):
    res = ddb.describe_time_to_live(TableName=table)
    assert res["TimeToLiveDescription"]["TimeToLiveStatus"] == "DISABLED"
    assert "AttributeName" not in res["TimeToLiveDescription"]


def test_enable_ttl(ddb, table):
    res = ttl_on(ddb, table)
    assert res["TimeToLiveSpecification"] == {"Enabled": True, "AttributeName": "exp"}
    d = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert d == {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp"}


def test_enable_ttl_twice_rejected(ddb, table):
    ttl_on(ddb, table)
    validation(ddb.update_time_to_live, message="TimeToLive is already enabled",
               TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})


@pytest.mark.parametrize("enabled", [True, False])
def test_ttl_change_naming_another_attribute_rejected(ddb, table, enabled):
    ttl_on(ddb, table)
    validation(ddb.update_time_to_live, "TimeToLive is active on a different AttributeName: current AttributeName is exp",
               TableName=table, TimeToLiveSpecification={"Enabled": enabled, "AttributeName": "other"})
    d = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert d == {"TimeToLiveStatus": "ENABLED", "AttributeName": "exp"}


def test_disable_ttl(ddb, table):
    ttl_on(ddb, table)
    res = ddb.update_time_to_live(TableName=table, TimeToLiveSpecification={
        "Enabled": False, "AttributeName": "exp"})
    assert res["TimeToLiveSpecification"] == {"Enabled": False, "AttributeName": "exp"}
    d = ddb.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    assert d["TimeToLiveStatus"] == "DISABLED"


def test_disable_ttl_when_disabled_rejected(ddb, table):
    validation(ddb.update_time_to_live, TableName=table,
               TimeToLiveSpecification={"Enabled": False, "AttributeName": "exp"})


def test_ttl_missing_table(ddb, table_name):
    expect_error(ddb.update_time_to_live, "ResourceNotFoundException", TableName=table_name,
                 TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})
    expect_error(ddb.describe_time_to_live, "ResourceNotFoundException", TableName=table_name)


def test_ttl_empty_attribute_name_rejected(ddb_raw, table):
    validation(ddb_raw.update_time_to_live, TableName=table,
               TimeToLiveSpecification={"Enabled": True, "AttributeName": ""})


def test_ttl_not_listed_in_describe_table_as_key(ddb, table):
    ttl_on(ddb, table)
    desc = ddb.describe_table(TableName=table)["Table"]
    assert desc["TableStatus"] == "ACTIVE"
    assert [a["AttributeName"] for a in desc["AttributeDefinitions"]] == ["pk"]


# ------------------------------------------------------------- sweeping

def test_expired_item_readable_until_swept(ddb, endpoint, make_table):
    # DynamoDB deletes expired items in the background, not on read: the item
    # is still returned right after the write, unless the sweeper ran in
    # between. The table's stream tells the two apart, so the test holds
    # whenever the sweeper runs: an absent item must have a TTL deletion
    # record (Service identity) in the stream; a read never hides it.
    t = make_table(StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    ttl_on(ddb, t)
    ddb.put_item(TableName=t, Item={"pk": S("old"), "exp": N(int(time.time()) - 60)})
    if get(ddb, t, "old") is not None:
        return
    streams = _make_client(endpoint, True, service="dynamodbstreams")
    arn = ddb.describe_table(TableName=t)["Table"]["LatestStreamArn"]
    removes = [r for r in read_stream(streams, arn) if r["eventName"] == "REMOVE"]
    assert [r.get("userIdentity") for r in removes] == [
        {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"}], \
        "the expired item was not readable, yet the sweeper did not delete it"


def test_sweeper_deletes_only_expired_items(ddb, make_table):
    t = make_table()
    no_ttl = make_table()
    now = int(time.time())
    items = {
        "expired": N(now - 100),
        "expired_float": N(f"{now - 100}.5"),
        "future": N(now + 3600),
        "string_ttl": S(str(now - 100)),
        "too_old": N(now - 6 * 366 * 86400),
        "list_ttl": {"L": [N(now - 100)]},
    }
    for pk, v in items.items():
        ddb.put_item(TableName=t, Item={"pk": S(pk), "exp": v})
    ddb.put_item(TableName=t, Item={"pk": S("no_attr")})
    ddb.put_item(TableName=no_ttl, Item={"pk": S("expired"), "exp": N(now - 100)})
    ttl_on(ddb, t)
    wait_gone(ddb, t, "expired")
    wait_gone(ddb, t, "expired_float")
    for pk in ("future", "string_ttl", "too_old", "list_ttl", "no_attr"):
        assert get(ddb, t, pk) is not None, f"{pk} must not be deleted by TTL"
    assert get(ddb, no_ttl, "expired") is not None, "table without TTL lost an expired item"


def test_sweeper_removes_index_entries(ddb, make_table):
    t = make_table(AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "g", "AttributeType": "S"}],
                   GlobalSecondaryIndexes=[{"IndexName": "by_g",
                                            "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    ttl_on(ddb, t, "ttl")
    now = int(time.time())
    ddb.put_item(TableName=t, Item={"pk": S("old"), "g": S("x"), "ttl": N(now - 10)})
    ddb.put_item(TableName=t, Item={"pk": S("new"), "g": S("x"), "ttl": N(now + 3600)})
    wait_gone(ddb, t, "old")
    res = ddb.query(TableName=t, IndexName="by_g", KeyConditionExpression="g = :x",
                    ExpressionAttributeValues={":x": S("x")})
    assert [i["pk"]["S"] for i in res["Items"]] == ["new"]


def test_item_updated_to_future_ttl_survives(ddb, table):
    ttl_on(ddb, table)
    now = int(time.time())
    ddb.put_item(TableName=table, Item={"pk": S("marker"), "exp": N(now - 100)})
    ddb.put_item(TableName=table, Item={"pk": S("renewed"), "exp": N(now - 100)})
    ddb.update_item(TableName=table, Key={"pk": S("renewed")}, UpdateExpression="SET exp = :f",
                    ExpressionAttributeValues={":f": N(now + 3600)})
    wait_gone(ddb, table, "marker")
    assert get(ddb, table, "renewed")["exp"] == N(now + 3600)
