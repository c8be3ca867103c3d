"""UpdateTable: GSI create (with backfill) and delete, billing mode and
throughput, stream specification, validation."""

import time

import pytest

from wire_helpers import expect_error, validation


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def gsi_create(name, attr, projection=None, **extra):
    spec = {"IndexName": name, "KeySchema": [{"AttributeName": attr, "KeyType": "HASH"}],
            "Projection": projection or {"ProjectionType": "ALL"}}
    spec.update(extra)
    return {"Create": spec}


def index_of(ddb, table, name):
    for g in ddb.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", []):
        if g["IndexName"] == name:
            return g
    return None


def wait_index_active(ddb, table, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    statuses = []
    while True:
        g = index_of(ddb, table, name)
        assert g is not None, f"index {name} vanished while waiting"
        statuses.append(g["IndexStatus"])
        if g["IndexStatus"] == "ACTIVE":
            return g, statuses
        assert time.monotonic() < deadline, f"index {name} not ACTIVE after {timeout}s: {statuses[-5:]}"
        time.sleep(0.25)


def wait_index_gone(ddb, table, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    while index_of(ddb, table, name) is not None:
        assert time.monotonic() < deadline, f"index {name} still described after {timeout}s"
        time.sleep(0.1)


def query_all(ddb, table, index, attr, value):
    items, kw = [], {}
    while True:
        res = ddb.query(TableName=table, IndexName=index, KeyConditionExpression="#a = :v",
                        ExpressionAttributeNames={"#a": attr}, ExpressionAttributeValues={":v": value}, **kw)
        items += res["Items"]
        if "LastEvaluatedKey" not in res:
            return items
        kw["ExclusiveStartKey"] = res["LastEvaluatedKey"]


# ------------------------------------------------------------- GSI create/delete

def test_create_gsi_on_populated_table_backfills(ddb, table):
    for c in range(0, 60, 25):
        ddb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"pk": S(f"i{i}"), "g": S("grp"), "n": N(i)}}}
            for i in range(c, min(c + 25, 60))]})
    ddb.put_item(TableName=table, Item={"pk": S("nog")})
    res = ddb.update_table(TableName=table,
                           AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                                 {"AttributeName": "g", "AttributeType": "S"}],
                           GlobalSecondaryIndexUpdates=[gsi_create("by_g", "g")])
    td = res["TableDescription"]
    g = [x for x in td["GlobalSecondaryIndexes"] if x["IndexName"] == "by_g"][0]
    assert g["IndexStatus"] in ("CREATING", "ACTIVE")
    assert {"AttributeName": "g", "AttributeType": "S"} in td["AttributeDefinitions"]
    # Writes while the index is being built must end up in it, as must updates
    # and deletes of pre-existing items.
    ddb.put_item(TableName=table, Item={"pk": S("during"), "g": S("grp"), "n": N(1000)})
    ddb.update_item(TableName=table, Key={"pk": S("i0")}, UpdateExpression="SET n = :v",
                    ExpressionAttributeValues={":v": N(-1)})
    ddb.delete_item(TableName=table, Key={"pk": S("i1")})
    ddb.update_item(TableName=table, Key={"pk": S("nog")}, UpdateExpression="SET g = :g",
                    ExpressionAttributeValues={":g": S("grp")})
    g, _ = wait_index_active(ddb, table, "by_g")
    assert g["IndexArn"].endswith("/index/by_g")
    ddb.put_item(TableName=table, Item={"pk": S("after"), "g": S("grp")})
    items = {i["pk"]["S"]: i for i in query_all(ddb, table, "by_g", "g", S("grp"))}
    expected = {f"i{i}" for i in range(60)} - {"i1"} | {"during", "nog", "after"}
    assert set(items) == expected
    assert items["i0"]["n"] == N(-1)
    assert items["i5"] == {"pk": S("i5"), "g": S("grp"), "n": N(5)}


def test_create_gsi_on_empty_table(ddb, table):
    ddb.update_table(TableName=table,
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                           {"AttributeName": "g", "AttributeType": "N"}],
                     GlobalSecondaryIndexUpdates=[gsi_create("by_g", "g", {"ProjectionType": "KEYS_ONLY"})])
    ddb.put_item(TableName=table, Item={"pk": S("a"), "g": N(1), "x": S("y")})
    wait_index_active(ddb, table, "by_g")
    assert query_all(ddb, table, "by_g", "g", N(1)) == [{"pk": S("a"), "g": N(1)}]


def test_create_gsi_without_attribute_definition_rejected(ddb_raw, table):
    validation(ddb_raw.update_table, TableName=table, GlobalSecondaryIndexUpdates=[gsi_create("by_g", "g")])
    assert index_of(ddb_raw, table, "by_g") is None


def test_create_gsi_existing_name_rejected(ddb, make_table):
    t = make_table(AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "g", "AttributeType": "S"}],
                   GlobalSecondaryIndexes=[{"IndexName": "by_g",
                                            "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "ALL"}}])
    validation(ddb.update_table, TableName=t,
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                     {"AttributeName": "g", "AttributeType": "S"}],
               GlobalSecondaryIndexUpdates=[gsi_create("by_g", "g")])


def test_two_index_operations_in_one_call_rejected(ddb, table):
    expect_error(ddb.update_table, "LimitExceededException", TableName=table,
                 AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                       {"AttributeName": "a", "AttributeType": "S"},
                                       {"AttributeName": "b", "AttributeType": "S"}],
                 GlobalSecondaryIndexUpdates=[gsi_create("idx_a", "a"), gsi_create("idx_b", "b")])
    desc = ddb.describe_table(TableName=table)["Table"]
    assert not desc.get("GlobalSecondaryIndexes")


def test_delete_gsi(ddb, make_table):
    t = make_table(AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                         {"AttributeName": "g", "AttributeType": "S"}],
                   GlobalSecondaryIndexes=[{"IndexName": "by_g",
                                            "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "ALL"}}])
    ddb.put_item(TableName=t, Item={"pk": S("a"), "g": S("x")})
    ddb.update_table(TableName=t, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "by_g"}}])
    wait_index_gone(ddb, t, "by_g")
    validation(ddb.query, message="The table does not have the specified index: by_g", TableName=t,
               IndexName="by_g", KeyConditionExpression="g = :v", ExpressionAttributeValues={":v": S("x")})
    # the table's own items are untouched
    assert ddb.get_item(TableName=t, Key={"pk": S("a")})["Item"] == {"pk": S("a"), "g": S("x")}


def test_delete_unknown_gsi_rejected(ddb, table):
    try:
        ddb.update_table(TableName=table, GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "nope"}}])
    except ddb.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] in ("ResourceNotFoundException", "ValidationException"), e.response
    else:
        raise AssertionError("deleting an unknown index succeeded")


# ------------------------------------------------------------- billing

def test_switch_to_provisioned_and_back(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("keep")})
    res = ddb.update_table(TableName=table, BillingMode="PROVISIONED",
                           ProvisionedThroughput={"ReadCapacityUnits": 7, "WriteCapacityUnits": 3})
    assert res["TableDescription"]["TableName"] == table
    desc = ddb.describe_table(TableName=table)["Table"]
    assert desc["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
    assert desc["ProvisionedThroughput"]["ReadCapacityUnits"] == 7
    assert desc["ProvisionedThroughput"]["WriteCapacityUnits"] == 3
    ddb.update_table(TableName=table, BillingMode="PAY_PER_REQUEST")
    desc = ddb.describe_table(TableName=table)["Table"]
    assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert desc["ProvisionedThroughput"]["ReadCapacityUnits"] == 0
    assert desc["ProvisionedThroughput"]["WriteCapacityUnits"] == 0
    assert ddb.get_item(TableName=table, Key={"pk": S("keep")})["Item"] == {"pk": S("keep")}


def test_change_throughput_on_provisioned_table(ddb, make_table):
    t = make_table(ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})
    ddb.update_table(TableName=t, ProvisionedThroughput={"ReadCapacityUnits": 10, "WriteCapacityUnits": 20})
    pt = ddb.describe_table(TableName=t)["Table"]["ProvisionedThroughput"]
    assert (pt["ReadCapacityUnits"], pt["WriteCapacityUnits"]) == (10, 20)


def test_switch_to_provisioned_without_throughput_rejected(ddb, table):
    validation(ddb.update_table, TableName=table, BillingMode="PROVISIONED")
    desc = ddb.describe_table(TableName=table)["Table"]
    assert desc["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_throughput_on_pay_per_request_rejected(ddb, table):
    validation(ddb.update_table, TableName=table,
               ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5})


# ------------------------------------------------------------- streams

def test_enable_stream(ddb, table):
    res = ddb.update_table(TableName=table, StreamSpecification={
        "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"})
    assert res["TableDescription"]["StreamSpecification"] == {
        "StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    desc = ddb.describe_table(TableName=table)["Table"]
    assert desc["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"}
    assert desc["LatestStreamArn"].startswith(desc["TableArn"] + "/stream/")
    assert desc["LatestStreamLabel"]
    assert desc["LatestStreamArn"].endswith("/stream/" + desc["LatestStreamLabel"])


def test_create_table_with_stream(ddb, make_table):
    t = make_table(StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    desc = ddb.describe_table(TableName=t)["Table"]
    assert desc["StreamSpecification"]["StreamViewType"] == "KEYS_ONLY"
    assert "LatestStreamArn" in desc


def test_enable_stream_twice_rejected(ddb, table):
    spec = {"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"}
    ddb.update_table(TableName=table, StreamSpecification=spec)
    validation(ddb.update_table, TableName=table, StreamSpecification=spec)


def test_enable_stream_without_view_type_rejected(ddb, table):
    validation(ddb.update_table, TableName=table, StreamSpecification={"StreamEnabled": True})


# ------------------------------------------------------------- validation

def test_update_table_nothing_to_update(ddb, table):
    validation(ddb.update_table, match="^At least one of", TableName=table)


def test_update_table_missing_table(ddb, table_name):
    expect_error(ddb.update_table, "ResourceNotFoundException", TableName=table_name,
                 BillingMode="PAY_PER_REQUEST")
