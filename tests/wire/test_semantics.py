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
    ("REMOVE a, b.c, l[3]", None),
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
