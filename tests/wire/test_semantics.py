"""DynamoDB semantics pinned from its documentation: updates that only
remove, list appends in index order, the DeleteTable and tagging response
shapes, per-index consumed capacity, and table/index statistics."""

import time

import pytest

from wire_helpers import raw_call

K = {"pk": {"S": "k"}}


def get(ddb, table, key):
    return ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


# ------------------------------------------------- updates that only remove

@pytest.mark.parametrize("expr,values", [
    ("REMOVE a", None),
    ("REMOVE a, b, l", None),
    ("DELETE s :v", {":v": {"SS": ["x"]}}),
    ("REMOVE a DELETE s :v", {":v": {"NS": ["1"]}}),
])
def test_remove_only_update_does_not_create_item(ddb, table, expr, values):
    kw = {"ExpressionAttributeValues": values} if values else {}
    res = ddb.update_item(TableName=table, Key=K, UpdateExpression=expr, ReturnValues="ALL_NEW", **kw)
    assert "Attributes" not in res
    assert get(ddb, table, K) is None
    assert ddb.scan(TableName=table)["Count"] == 0


def test_remove_only_update_with_passing_condition_creates_nothing(ddb, table):
    ddb.update_item(TableName=table, Key=K, UpdateExpression="REMOVE a",
                    ConditionExpression="attribute_not_exists(pk)")
    assert get(ddb, table, K) is None


def test_remove_only_update_of_existing_item_applies(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, a={"S": "x"}, b={"N": "1"}))
    res = ddb.update_item(TableName=table, Key=K, UpdateExpression="REMOVE a", ReturnValues="ALL_NEW")
    assert res["Attributes"] == dict(K, b={"N": "1"})
    # removing every non-key attribute keeps the item with its key
    ddb.update_item(TableName=table, Key=K, UpdateExpression="REMOVE b")
    assert get(ddb, table, K) == K


def test_update_with_set_or_add_still_creates_item(ddb, table):
    ddb.update_item(TableName=table, Key=K, UpdateExpression="SET a = :v REMOVE b",
                    ExpressionAttributeValues={":v": {"S": "x"}})
    assert get(ddb, table, K) == dict(K, a={"S": "x"})
    k2 = {"pk": {"S": "k2"}}
    ddb.update_item(TableName=table, Key=k2, UpdateExpression="ADD n :one",
                    ExpressionAttributeValues={":one": {"N": "1"}})
    assert get(ddb, table, k2) == dict(k2, n={"N": "1"})


def test_legacy_delete_only_attribute_updates_do_not_create_item(ddb, table):
    ddb.update_item(TableName=table, Key=K, AttributeUpdates={
        "a": {"Action": "DELETE"},
        "s": {"Action": "DELETE", "Value": {"SS": ["x"]}},
    })
    assert get(ddb, table, K) is None
    # a PUT or ADD among them creates it
    ddb.update_item(TableName=table, Key=K, AttributeUpdates={
        "a": {"Action": "DELETE"}, "b": {"Action": "PUT", "Value": {"S": "y"}}})
    assert get(ddb, table, K) == dict(K, b={"S": "y"})


def test_transact_remove_only_update_does_not_create_item(ddb, table):
    ddb.transact_write_items(TransactItems=[
        {"Update": {"TableName": table, "Key": K, "UpdateExpression": "REMOVE a"}}])
    assert get(ddb, table, K) is None


# ------------------------------------------- list appends in index order

def test_set_past_end_appends_in_index_order(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, a={"L": [{"S": "0"}, {"S": "1"}]}))
    ddb.update_item(TableName=table, Key=K, UpdateExpression="SET a[84] = :x, a[17] = :y",
                    ExpressionAttributeValues={":x": {"S": "x"}, ":y": {"S": "y"}})
    assert get(ddb, table, K)["a"] == {"L": [{"S": "0"}, {"S": "1"}, {"S": "y"}, {"S": "x"}]}


def test_set_past_end_mixed_with_replace(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, a={"L": [{"S": "0"}, {"S": "1"}]}),)
    ddb.update_item(TableName=table, Key=K,
                    UpdateExpression="SET a[9] = :c, b = :b, a[1] = :r, a[5] = :d",
                    ExpressionAttributeValues={":b": {"S": "b"}, ":c": {"S": "c"},
                                               ":d": {"S": "d"}, ":r": {"S": "r"}})
    item = get(ddb, table, K)
    assert item["a"] == {"L": [{"S": "0"}, {"S": "r"}, {"S": "d"}, {"S": "c"}]}
    assert item["b"] == {"S": "b"}


def test_remove_list_elements_refer_to_original_indexes(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, a={"L": [{"N": str(i)} for i in range(6)]}))
    ddb.update_item(TableName=table, Key=K, UpdateExpression="REMOVE a[1], b, a[4]")
    assert get(ddb, table, K)["a"] == {"L": [{"N": "0"}, {"N": "2"}, {"N": "3"}, {"N": "5"}]}


# ------------------------------------------------------- DeleteTable answer

DELETE_TABLE_MEMBERS = {"TableName", "TableId", "TableArn", "TableStatus", "ProvisionedThroughput",
                        "BillingModeSummary", "TableSizeBytes", "ItemCount", "DeletionProtectionEnabled"}


def indexed_table(make_table):
    """A table (pk, sk) with a GSI "gsi" on x (ALL) and an LSI "lsi" on
    (pk, x) (KEYS_ONLY)."""
    return make_table(range_key=("sk", "S"),
                      AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                            {"AttributeName": "sk", "AttributeType": "S"},
                                            {"AttributeName": "x", "AttributeType": "S"}],
                      GlobalSecondaryIndexes=[{"IndexName": "gsi", "KeySchema": [
                          {"AttributeName": "x", "KeyType": "HASH"}], "Projection": {"ProjectionType": "ALL"}}],
                      LocalSecondaryIndexes=[{"IndexName": "lsi", "KeySchema": [
                          {"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "x", "KeyType": "RANGE"}],
                          "Projection": {"ProjectionType": "KEYS_ONLY"}}])


def test_delete_table_answers_what_dynamodb_answers(ddb, make_table):
    t = indexed_table(make_table)
    described = ddb.describe_table(TableName=t)["Table"]
    d = ddb.delete_table(TableName=t)["TableDescription"]
    assert set(d) <= DELETE_TABLE_MEMBERS, set(d) - DELETE_TABLE_MEMBERS
    for m in ("KeySchema", "AttributeDefinitions", "CreationDateTime",
              "GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
        assert m not in d
    assert d["TableName"] == t
    assert d["TableStatus"] == "DELETING"
    assert d["TableArn"] == described["TableArn"]
    assert d["TableId"] == described["TableId"]
    assert d["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert d["ProvisionedThroughput"] == {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 0,
                                          "WriteCapacityUnits": 0}
    assert d["ItemCount"] == 0 and d["TableSizeBytes"] == 0


def test_delete_provisioned_table_throughput(ddb, make_table):
    t = make_table(ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 7})
    d = ddb.delete_table(TableName=t)["TableDescription"]
    assert d["ProvisionedThroughput"] == {"NumberOfDecreasesToday": 0, "ReadCapacityUnits": 5,
                                          "WriteCapacityUnits": 7}
    assert "BillingModeSummary" not in d


# ---------------------------------------------------- tagging answers empty

def test_tag_and_untag_answer_an_empty_body(ddb, endpoint, table):
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    r = raw_call(endpoint, "TagResource", {"ResourceArn": arn, "Tags": [{"Key": "a", "Value": "1"}]})
    assert r.status == 200 and r.body == b"", r
    assert r.headers["content-length"] == "0"
    r = raw_call(endpoint, "UntagResource", {"ResourceArn": arn, "TagKeys": ["a"]})
    assert r.status == 200 and r.body == b"", r
    assert r.headers["content-length"] == "0"
    # and the SDK takes it
    assert set(ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "b", "Value": "2"}])) == {"ResponseMetadata"}
    assert set(ddb.untag_resource(ResourceArn=arn, TagKeys=["b"])) == {"ResponseMetadata"}
    assert ddb.list_tags_of_resource(ResourceArn=arn)["Tags"] == []


# ------------------------------------------- ItemCount and size statistics

def _size_s(item):
    """DynamoDB item size of an item whose attributes are all strings."""
    return sum(len(n.encode()) + len(v["S"].encode()) for n, v in item.items())


def _describe_until(ddb, table, pred, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        d = ddb.describe_table(TableName=table)["Table"]
        if pred(d) or time.monotonic() > deadline:
            return d
        time.sleep(0.1)


@pytest.fixture
def stats_table(make_table):
    return indexed_table(make_table)


def test_describe_table_counts_items_and_sizes(ddb, stats_table):
    t = stats_table
    d = ddb.describe_table(TableName=t)["Table"]
    assert d["ItemCount"] == 0 and d["TableSizeBytes"] == 0
    items = []
    for i in range(12):
        it = {"pk": {"S": f"p{i % 3}"}, "sk": {"S": f"s{i:02d}"}, "d": {"S": "é" * i}}
        if i % 2 == 0:
            it["x"] = {"S": f"x{i}"}
        items.append(it)
        ddb.put_item(TableName=t, Item=it)
    size = sum(_size_s(it) for it in items)
    indexed = [it for it in items if "x" in it]
    d = _describe_until(ddb, t, lambda d: d["ItemCount"] == 12)
    assert d["ItemCount"] == 12
    assert d["TableSizeBytes"] == size
    gsi = d["GlobalSecondaryIndexes"][0]
    assert gsi["ItemCount"] == len(indexed)
    assert gsi["IndexSizeBytes"] == sum(_size_s(it) for it in indexed)
    lsi = d["LocalSecondaryIndexes"][0]
    assert lsi["ItemCount"] == len(indexed)
    assert lsi["IndexSizeBytes"] == sum(_size_s({k: it[k] for k in ("pk", "sk", "x")}) for it in indexed)

    # deletes and updates show up too
    for it in items[:4]:
        ddb.delete_item(TableName=t, Key={"pk": it["pk"], "sk": it["sk"]})
    ddb.update_item(TableName=t, Key={"pk": items[5]["pk"], "sk": items[5]["sk"]},
                    UpdateExpression="SET x = :x", ExpressionAttributeValues={":x": {"S": "new"}})
    d = _describe_until(ddb, t, lambda d: d["ItemCount"] == 8 and d["GlobalSecondaryIndexes"][0]["ItemCount"] == 5)
    assert d["ItemCount"] == 8
    assert d["TableSizeBytes"] == sum(_size_s(it) for it in items[4:]) + len("x") + len("new")
    assert d["GlobalSecondaryIndexes"][0]["ItemCount"] == 5
    assert d["LocalSecondaryIndexes"][0]["ItemCount"] == 5

    # DeleteTable reports the last figures
    res = ddb.delete_table(TableName=t)["TableDescription"]
    assert res["ItemCount"] == 8
    assert res["TableSizeBytes"] == d["TableSizeBytes"]


def test_item_count_through_batch_and_transactions(ddb, table):
    ddb.batch_write_item(RequestItems={table: [
        {"PutRequest": {"Item": {"pk": {"S": f"b{i}"}}}} for i in range(25)]})
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": {"pk": {"S": f"t{i}"}}}} for i in range(5)])
    d = _describe_until(ddb, table, lambda d: d["ItemCount"] == 30)
    assert d["ItemCount"] == 30
    assert d["TableSizeBytes"] == sum(len("pk") + len(f"b{i}") for i in range(25)) + \
        sum(len("pk") + len(f"t{i}") for i in range(5))


def test_item_count_resource_api(ddb_resource, table):
    # what PynamoDB's Model.count() and dynamodb-admin read
    tab = ddb_resource.Table(table)
    with tab.batch_writer() as w:
        for i in range(7):
            w.put_item(Item={"pk": f"k{i}"})
    deadline = time.monotonic() + 15
    while True:
        tab.reload()
        if tab.item_count == 7 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert tab.item_count == 7
    assert tab.table_size_bytes == sum(2 + len(f"k{i}") for i in range(7))


# ------------------------------------ ReturnConsumedCapacity INDEXES breakdown

def _pk(i):
    return {"pk": {"S": "p"}, "sk": {"S": f"s{i}"}}


def test_put_consumed_capacity_counts_index_writes(ddb, stats_table):
    t = stats_table
    res = ddb.put_item(TableName=t, Item=dict(_pk(1), x={"S": "a"}), ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == {
        "TableName": t, "CapacityUnits": 3.0, "Table": {"CapacityUnits": 1.0},
        "GlobalSecondaryIndexes": {"gsi": {"CapacityUnits": 1.0}},
        "LocalSecondaryIndexes": {"lsi": {"CapacityUnits": 1.0}}}
    # TOTAL counts the index writes too
    res = ddb.put_item(TableName=t, Item=dict(_pk(2), x={"S": "a"}), ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == {"TableName": t, "CapacityUnits": 3.0}
    # an item outside every index costs the table alone
    res = ddb.put_item(TableName=t, Item=_pk(3), ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == {"TableName": t, "CapacityUnits": 1.0, "Table": {"CapacityUnits": 1.0}}
    # index entries are charged by their own size: the ALL projection carries
    # the 2.5 KB attribute, the KEYS_ONLY one does not
    res = ddb.put_item(TableName=t, Item=dict(_pk(4), x={"S": "a"}, d={"S": "z" * 2500}),
                       ReturnConsumedCapacity="INDEXES")
    cc = res["ConsumedCapacity"]
    assert cc["Table"] == {"CapacityUnits": 3.0}
    assert cc["GlobalSecondaryIndexes"] == {"gsi": {"CapacityUnits": 3.0}}
    assert cc["LocalSecondaryIndexes"] == {"lsi": {"CapacityUnits": 1.0}}
    assert cc["CapacityUnits"] == 7.0


def test_update_consumed_capacity_follows_index_changes(ddb, stats_table):
    t = stats_table
    ddb.put_item(TableName=t, Item=dict(_pk(1), x={"S": "a"}, d={"S": "1"}))
    # the index key changes: delete + put in each index
    res = ddb.update_item(TableName=t, Key=_pk(1), UpdateExpression="SET x = :x",
                          ExpressionAttributeValues={":x": {"S": "b"}}, ReturnConsumedCapacity="INDEXES")
    cc = res["ConsumedCapacity"]
    assert cc["GlobalSecondaryIndexes"] == {"gsi": {"CapacityUnits": 2.0}}
    assert cc["LocalSecondaryIndexes"] == {"lsi": {"CapacityUnits": 2.0}}
    assert cc["CapacityUnits"] == 5.0
    # only a projected attribute changes: one write in the ALL index,
    # none in the KEYS_ONLY one
    res = ddb.update_item(TableName=t, Key=_pk(1), UpdateExpression="SET d = :d",
                          ExpressionAttributeValues={":d": {"S": "2"}}, ReturnConsumedCapacity="INDEXES")
    cc = res["ConsumedCapacity"]
    assert cc["GlobalSecondaryIndexes"] == {"gsi": {"CapacityUnits": 1.0}}
    assert "LocalSecondaryIndexes" not in cc
    assert cc["CapacityUnits"] == 2.0
    # the item leaves the indexes: one delete in each
    res = ddb.update_item(TableName=t, Key=_pk(1), UpdateExpression="REMOVE x", ReturnConsumedCapacity="INDEXES")
    cc = res["ConsumedCapacity"]
    assert cc["GlobalSecondaryIndexes"] == {"gsi": {"CapacityUnits": 1.0}}
    assert cc["LocalSecondaryIndexes"] == {"lsi": {"CapacityUnits": 1.0}}


def test_delete_consumed_capacity_counts_index_deletes(ddb, stats_table):
    t = stats_table
    ddb.put_item(TableName=t, Item=dict(_pk(1), x={"S": "a"}))
    res = ddb.delete_item(TableName=t, Key=_pk(1), ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == {
        "TableName": t, "CapacityUnits": 3.0, "Table": {"CapacityUnits": 1.0},
        "GlobalSecondaryIndexes": {"gsi": {"CapacityUnits": 1.0}},
        "LocalSecondaryIndexes": {"lsi": {"CapacityUnits": 1.0}}}


def test_query_on_index_charges_the_index(ddb, stats_table):
    t = stats_table
    for i in range(3):
        ddb.put_item(TableName=t, Item=dict(_pk(i), x={"S": "a"}))
    res = ddb.query(TableName=t, IndexName="gsi", KeyConditionExpression="x = :x",
                    ExpressionAttributeValues={":x": {"S": "a"}}, ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == {"TableName": t, "CapacityUnits": 0.5, "Table": {"CapacityUnits": 0.0},
                                       "GlobalSecondaryIndexes": {"gsi": {"CapacityUnits": 0.5}}}
    res = ddb.query(TableName=t, IndexName="lsi", KeyConditionExpression="pk = :p",
                    ExpressionAttributeValues={":p": {"S": "p"}}, ConsistentRead=True,
                    ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == {"TableName": t, "CapacityUnits": 1.0, "Table": {"CapacityUnits": 0.0},
                                       "LocalSecondaryIndexes": {"lsi": {"CapacityUnits": 1.0}}}
    res = ddb.scan(TableName=t, IndexName="gsi", ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == {"TableName": t, "CapacityUnits": 0.5}


def test_batch_write_consumed_capacity_counts_index_writes(ddb, stats_table):
    t = stats_table
    res = ddb.batch_write_item(RequestItems={t: [
        {"PutRequest": {"Item": dict(_pk(1), x={"S": "a"})}},
        {"PutRequest": {"Item": _pk(2)}}]}, ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == [{
        "TableName": t, "CapacityUnits": 4.0, "Table": {"CapacityUnits": 2.0},
        "GlobalSecondaryIndexes": {"gsi": {"CapacityUnits": 1.0}},
        "LocalSecondaryIndexes": {"lsi": {"CapacityUnits": 1.0}}}]


def test_transact_write_consumed_capacity_split_and_indexes(ddb, stats_table):
    t = stats_table
    res = ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": t, "Item": dict(_pk(1), x={"S": "a"})}},
        {"Put": {"TableName": t, "Item": _pk(2)}}], ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == [{
        "TableName": t, "CapacityUnits": 8.0, "WriteCapacityUnits": 8.0,
        "Table": {"CapacityUnits": 4.0, "WriteCapacityUnits": 4.0},
        "GlobalSecondaryIndexes": {"gsi": {"CapacityUnits": 2.0, "WriteCapacityUnits": 2.0}},
        "LocalSecondaryIndexes": {"lsi": {"CapacityUnits": 2.0, "WriteCapacityUnits": 2.0}}}]


def test_transact_get_consumed_capacity_split(ddb, table):
    ddb.put_item(TableName=table, Item=K)
    res = ddb.transact_get_items(TransactItems=[
        {"Get": {"TableName": table, "Key": K}}, {"Get": {"TableName": table, "Key": {"pk": {"S": "missing"}}}}],
        ReturnConsumedCapacity="INDEXES")
    assert res["ConsumedCapacity"] == [{
        "TableName": table, "CapacityUnits": 4.0, "ReadCapacityUnits": 4.0,
        "Table": {"CapacityUnits": 4.0, "ReadCapacityUnits": 4.0}}]
    res = ddb.transact_get_items(TransactItems=[{"Get": {"TableName": table, "Key": K}}],
                                 ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == [{"TableName": table, "CapacityUnits": 2.0, "ReadCapacityUnits": 2.0}]


def test_write_capacity_charges_the_larger_of_old_and_new_item(ddb, table):
    big = dict(K, d={"S": "z" * 2500})  # 3 write units
    ddb.put_item(TableName=table, Item=big)
    res = ddb.put_item(TableName=table, Item=K, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"]["CapacityUnits"] == 3.0
    ddb.put_item(TableName=table, Item=big)
    res = ddb.update_item(TableName=table, Key=K, UpdateExpression="REMOVE d", ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"]["CapacityUnits"] == 3.0
    ddb.put_item(TableName=table, Item=big)
    res = ddb.delete_item(TableName=table, Key=K, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"]["CapacityUnits"] == 3.0
    ddb.put_item(TableName=table, Item=big)
    res = ddb.batch_write_item(RequestItems={table: [{"PutRequest": {"Item": K}}]}, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == [{"TableName": table, "CapacityUnits": 3.0}]
    res = ddb.batch_write_item(RequestItems={table: [{"DeleteRequest": {"Key": K}}]}, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == [{"TableName": table, "CapacityUnits": 1.0}]
    ddb.put_item(TableName=table, Item=big)
    res = ddb.transact_write_items(TransactItems=[
        {"Update": {"TableName": table, "Key": K, "UpdateExpression": "REMOVE d"}}], ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == [{"TableName": table, "CapacityUnits": 6.0, "WriteCapacityUnits": 6.0}]


def test_update_table_reports_the_last_figures(ddb, table):
    for i in range(4):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}})
    _describe_until(ddb, table, lambda d: d["ItemCount"] == 4)
    d = ddb.update_table(TableName=table, BillingMode="PROVISIONED",
                         ProvisionedThroughput={"ReadCapacityUnits": 2, "WriteCapacityUnits": 2})["TableDescription"]
    assert d["ItemCount"] == 4
    assert d["TableSizeBytes"] == 4 * (2 + 2)
