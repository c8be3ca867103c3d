"""TransactWriteItems and TransactGetItems: all-or-nothing, cancellation
reasons, one-operation-per-item, ClientRequestToken idempotency."""

import uuid

import pytest
from botocore.exceptions import ClientError

from wire_helpers import expect_error, validation

MULTI = "Transaction request cannot include multiple operations on one item"
TCE = "TransactionCanceledException"


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def K(v):
    return {"pk": S(v)}


def get(ddb, table, key):
    return ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


def cancel(ddb, items, **kw):
    """Run TransactWriteItems expecting cancellation; return (reason codes, error)."""
    try:
        res = ddb.transact_write_items(TransactItems=items, **kw)
    except ClientError as e:
        assert e.response["Error"]["Code"] == TCE, e.response
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == 400
        reasons = e.response["CancellationReasons"]
        return [r["Code"] for r in reasons], e
    raise AssertionError(f"expected {TCE}, call succeeded: {res!r}")


def put(table, item, **kw):
    return {"Put": dict(TableName=table, Item=item, **kw)}


def upd(table, key, expr, values=None, **kw):
    d = dict(TableName=table, Key=key, UpdateExpression=expr, **kw)
    if values:
        d["ExpressionAttributeValues"] = values
    return {"Update": d}


def dele(table, key, **kw):
    return {"Delete": dict(TableName=table, Key=key, **kw)}


def check(table, key, cond, **kw):
    return {"ConditionCheck": dict(TableName=table, Key=key, ConditionExpression=cond, **kw)}


# ------------------------------------------------------------- success paths

def test_transact_put_two_tables(ddb, make_table):
    a, b = make_table(), make_table(range_key=("sk", "N"))
    res = ddb.transact_write_items(TransactItems=[
        put(a, {"pk": S("x"), "v": S("a")}),
        put(b, {"pk": S("y"), "sk": N(1), "v": S("b")}),
    ])
    assert res["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert get(ddb, a, K("x")) == {"pk": S("x"), "v": S("a")}
    assert get(ddb, b, {"pk": S("y"), "sk": N(1)})["v"] == S("b")


def test_transact_all_four_action_kinds(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("upd"), "n": N(1)})
    ddb.put_item(TableName=table, Item={"pk": S("del")})
    ddb.put_item(TableName=table, Item={"pk": S("chk"), "ok": {"BOOL": True}})
    ddb.transact_write_items(TransactItems=[
        put(table, {"pk": S("new"), "a": S("1")}),
        upd(table, K("upd"), "SET n = n + :one", {":one": N(1)}),
        dele(table, K("del")),
        check(table, K("chk"), "ok = :t", ExpressionAttributeValues={":t": {"BOOL": True}}),
    ])
    assert get(ddb, table, K("new")) == {"pk": S("new"), "a": S("1")}
    assert get(ddb, table, K("upd"))["n"] == N(2)
    assert get(ddb, table, K("del")) is None
    assert get(ddb, table, K("chk")) == {"pk": S("chk"), "ok": {"BOOL": True}}


def test_transact_update_creates_missing_item(ddb, table):
    ddb.transact_write_items(TransactItems=[upd(table, K("x"), "ADD c :one", {":one": N(5)})])
    assert get(ddb, table, K("x")) == {"pk": S("x"), "c": N(5)}


def test_transact_delete_missing_item_ok(ddb, table):
    ddb.transact_write_items(TransactItems=[dele(table, K("nothing"))])
    assert get(ddb, table, K("nothing")) is None


def test_transact_conditions_that_pass(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("a"), "v": N(1)})
    ddb.transact_write_items(TransactItems=[
        put(table, {"pk": S("b")}, ConditionExpression="attribute_not_exists(pk)"),
        upd(table, K("a"), "SET v = :two", {":two": N(2), ":one": N(1)}, ConditionExpression="v = :one"),
    ])
    assert get(ddb, table, K("a"))["v"] == N(2)
    assert get(ddb, table, K("b")) == {"pk": S("b")}


def test_transact_expression_attribute_names(ddb, table):
    ddb.transact_write_items(TransactItems=[
        upd(table, K("a"), "SET #s = :v", {":v": S("x")}, ExpressionAttributeNames={"#s": "status"})])
    assert get(ddb, table, K("a"))["status"] == S("x")


def test_transact_100_actions(ddb, make_table):
    a, b = make_table(), make_table()
    items = [put(a if i % 2 else b, {"pk": S(f"i{i}")}) for i in range(100)]
    ddb.transact_write_items(TransactItems=items)
    assert ddb.scan(TableName=a, Select="COUNT")["Count"] == 50
    assert ddb.scan(TableName=b, Select="COUNT")["Count"] == 50


# ------------------------------------------------------------- cancellation

def test_transact_condition_check_failure_applies_nothing(ddb, make_table):
    a, b = make_table(), make_table()
    ddb.put_item(TableName=a, Item={"pk": S("c"), "v": N(1)})
    ddb.put_item(TableName=a, Item={"pk": S("d")})
    codes, _ = cancel(ddb, [
        put(a, {"pk": S("new")}),
        upd(b, K("u"), "SET x = :x", {":x": N(1)}),
        check(a, K("c"), "v = :two", ExpressionAttributeValues={":two": N(2)}),
        dele(a, K("d")),
    ])
    assert codes == ["None", "None", "ConditionalCheckFailed", "None"]
    assert get(ddb, a, K("d")) == {"pk": S("d")}
    assert get(ddb, a, K("new")) is None
    assert get(ddb, b, K("u")) is None
    assert get(ddb, a, K("c")) == {"pk": S("c"), "v": N(1)}


def test_transact_reasons_in_request_order(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("exists")})
    codes, _ = cancel(ddb, [
        put(table, {"pk": S("exists")}, ConditionExpression="attribute_not_exists(pk)"),
        put(table, {"pk": S("fresh")}),
        dele(table, K("missing"), ConditionExpression="attribute_exists(pk)"),
    ])
    assert codes == ["ConditionalCheckFailed", "None", "ConditionalCheckFailed"]
    assert get(ddb, table, K("fresh")) is None
    assert get(ddb, table, K("exists")) == {"pk": S("exists")}


def test_transact_cancellation_message(ddb, table):
    _, e = cancel(ddb, [put(table, {"pk": S("a")}),
                        check(table, K("b"), "attribute_exists(pk)")])
    msg = e.response["Error"]["Message"]
    assert msg.startswith("Transaction cancelled, please refer cancellation reasons for specific reasons"), msg
    assert msg.endswith("[None, ConditionalCheckFailed]"), msg


def test_transact_failed_reason_has_message(ddb, table):
    _, e = cancel(ddb, [check(table, K("b"), "attribute_exists(pk)")])
    reason = e.response["CancellationReasons"][0]
    assert reason["Code"] == "ConditionalCheckFailed"
    assert reason["Message"] == "The conditional request failed"
    assert "Item" not in reason


def test_transact_all_old_returns_item_of_failing_action(ddb, table):
    old = {"pk": S("a"), "v": N(1), "s": {"SS": ["x"]}}
    ddb.put_item(TableName=table, Item=old)
    ddb.put_item(TableName=table, Item={"pk": S("b"), "v": N(9)})
    codes, e = cancel(ddb, [
        upd(table, K("b"), "SET v = :z", {":z": N(0)}, ReturnValuesOnConditionCheckFailure="ALL_OLD"),
        upd(table, K("a"), "SET v = :z", {":z": N(0), ":two": N(2)}, ConditionExpression="v = :two",
            ReturnValuesOnConditionCheckFailure="ALL_OLD"),
    ])
    assert codes == ["None", "ConditionalCheckFailed"]
    reasons = e.response["CancellationReasons"]
    assert "Item" not in reasons[0]
    assert reasons[1]["Item"] == old
    assert get(ddb, table, K("b"))["v"] == N(9)


def test_transact_all_old_on_condition_check(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("a"), "flag": {"BOOL": False}})
    _, e = cancel(ddb, [check(table, K("a"), "flag = :t", ExpressionAttributeValues={":t": {"BOOL": True}},
                              ReturnValuesOnConditionCheckFailure="ALL_OLD")])
    assert e.response["CancellationReasons"][0]["Item"] == {"pk": S("a"), "flag": {"BOOL": False}}


def test_transact_all_old_missing_item_has_no_item(ddb, table):
    _, e = cancel(ddb, [dele(table, K("nope"), ConditionExpression="attribute_exists(pk)",
                             ReturnValuesOnConditionCheckFailure="ALL_OLD")])
    r = e.response["CancellationReasons"][0]
    assert r["Code"] == "ConditionalCheckFailed" and "Item" not in r


def test_transact_return_values_none_has_no_item(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("a")})
    _, e = cancel(ddb, [put(table, {"pk": S("a")}, ConditionExpression="attribute_not_exists(pk)",
                            ReturnValuesOnConditionCheckFailure="NONE")])
    assert "Item" not in e.response["CancellationReasons"][0]


def test_transact_failed_update_leaves_counter(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("c"), "n": N(10)})
    cancel(ddb, [upd(table, K("c"), "ADD n :one", {":one": N(1)}),
                 check(table, K("other"), "attribute_exists(pk)")])
    assert get(ddb, table, K("c"))["n"] == N(10)


# ------------------------------------------------------------- validation

def test_transact_two_actions_same_item_rejected(ddb, table):
    validation(ddb.transact_write_items, message=MULTI, TransactItems=[
        put(table, {"pk": S("a"), "v": N(1)}), upd(table, K("a"), "SET v = :v", {":v": N(2)})])
    assert get(ddb, table, K("a")) is None


def test_transact_check_and_put_same_item_rejected(ddb, table):
    validation(ddb.transact_write_items, message=MULTI, TransactItems=[
        check(table, K("a"), "attribute_not_exists(pk)"), put(table, {"pk": S("a")})])


def test_transact_same_item_numeric_key_normalized_rejected(ddb, make_table):
    t = make_table(hash_key=("pk", "N"))
    validation(ddb.transact_write_items, message=MULTI, TransactItems=[
        put(t, {"pk": N("5")}), dele(t, {"pk": N("5.00")})])


def test_transact_same_key_different_tables_ok(ddb, make_table):
    a, b = make_table(), make_table()
    ddb.transact_write_items(TransactItems=[put(a, {"pk": S("x")}), put(b, {"pk": S("x")})])
    assert get(ddb, a, K("x")) and get(ddb, b, K("x"))


def test_transact_101_actions_rejected(ddb_raw, table):
    validation(ddb_raw.transact_write_items,
               TransactItems=[put(table, {"pk": S(f"i{i}")}) for i in range(101)])
    assert ddb_raw.scan(TableName=table)["Count"] == 0


def test_transact_empty_rejected(ddb_raw):
    validation(ddb_raw.transact_write_items, TransactItems=[])


def test_transact_action_with_two_operations_rejected(ddb_raw, table):
    both = {"Put": {"TableName": table, "Item": {"pk": S("a")}},
            "Delete": {"TableName": table, "Key": K("b")}}
    validation(ddb_raw.transact_write_items, TransactItems=[both])
    assert get(ddb_raw, table, K("a")) is None


def test_transact_action_with_no_operation_rejected(ddb_raw):
    validation(ddb_raw.transact_write_items, TransactItems=[{}])


def test_transact_missing_table(ddb, table, table_name):
    expect_error(ddb.transact_write_items, "ResourceNotFoundException", TransactItems=[
        put(table, {"pk": S("a")}), put(table_name, {"pk": S("a")})])
    assert get(ddb, table, K("a")) is None


def test_transact_bad_key_rejected(ddb, table):
    validation(ddb.transact_write_items, TransactItems=[
        put(table, {"pk": S("ok")}), dele(table, {"pk": N(1)})])
    assert get(ddb, table, K("ok")) is None


def test_transact_invalid_update_expression_rejected(ddb, table):
    validation(ddb.transact_write_items, TransactItems=[
        put(table, {"pk": S("ok")}), upd(table, K("b"), "SET = broken")])
    assert get(ddb, table, K("ok")) is None


# ------------------------------------------------------------- idempotency

def test_transact_client_request_token_idempotent(ddb, table):
    token = str(uuid.uuid4())
    items = [upd(table, K("ctr"), "ADD n :one", {":one": N(1)})]
    r1 = ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
    r2 = ddb.transact_write_items(TransactItems=items, ClientRequestToken=token)
    assert r1["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert r2["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert get(ddb, table, K("ctr"))["n"] == N(1)


def test_transact_different_tokens_apply_twice(ddb, table):
    items = [upd(table, K("ctr"), "ADD n :one", {":one": N(1)})]
    ddb.transact_write_items(TransactItems=items, ClientRequestToken=str(uuid.uuid4()))
    ddb.transact_write_items(TransactItems=items, ClientRequestToken=str(uuid.uuid4()))
    assert get(ddb, table, K("ctr"))["n"] == N(2)


def test_transact_without_token_applies_twice(ddb, table):
    items = [upd(table, K("ctr"), "ADD n :one", {":one": N(1)})]
    ddb.transact_write_items(TransactItems=items)
    ddb.transact_write_items(TransactItems=items)
    assert get(ddb, table, K("ctr"))["n"] == N(2)


def test_transact_token_with_different_params_mismatch(ddb, table):
    token = str(uuid.uuid4())
    ddb.transact_write_items(TransactItems=[upd(table, K("ctr"), "ADD n :one", {":one": N(1)})],
                             ClientRequestToken=token)
    expect_error(ddb.transact_write_items, "IdempotentParameterMismatchException",
                 TransactItems=[upd(table, K("ctr"), "ADD n :one", {":one": N(5)})],
                 ClientRequestToken=token)
    assert get(ddb, table, K("ctr"))["n"] == N(1)


def test_transact_token_too_long_rejected(ddb_raw, table):
    validation(ddb_raw.transact_write_items, TransactItems=[put(table, {"pk": S("a")})],
               ClientRequestToken="x" * 37)


# ------------------------------------------------------------- TransactGetItems

def tget(table, key, **kw):
    return {"Get": dict(TableName=table, Key=key, **kw)}


def test_transact_get_in_request_order(ddb, make_table):
    a, b = make_table(), make_table()
    ddb.put_item(TableName=a, Item={"pk": S("1"), "v": S("a1")})
    ddb.put_item(TableName=a, Item={"pk": S("2"), "v": S("a2")})
    ddb.put_item(TableName=b, Item={"pk": S("1"), "v": S("b1")})
    res = ddb.transact_get_items(TransactItems=[tget(a, K("2")), tget(b, K("1")), tget(a, K("1"))])
    assert [r["Item"]["v"]["S"] for r in res["Responses"]] == ["a2", "b1", "a1"]


def test_transact_get_missing_item_empty_entry(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("1")})
    res = ddb.transact_get_items(TransactItems=[tget(table, K("nope")), tget(table, K("1"))])
    assert len(res["Responses"]) == 2
    assert res["Responses"][0] == {}
    assert res["Responses"][1] == {"Item": {"pk": S("1")}}


def test_transact_get_projection(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("1"), "name": S("n"), "x": N(1),
                                        "l": {"L": [S("a"), S("b")]}})
    res = ddb.transact_get_items(TransactItems=[
        tget(table, K("1"), ProjectionExpression="#n, l[1]", ExpressionAttributeNames={"#n": "name"})])
    assert res["Responses"][0]["Item"] == {"name": S("n"), "l": {"L": [S("b")]}}


def test_transact_get_100(ddb, table):
    ddb.transact_write_items(TransactItems=[put(table, {"pk": S(f"i{i}")}) for i in range(100)])
    res = ddb.transact_get_items(TransactItems=[tget(table, K(f"i{i}")) for i in range(100)])
    assert [r["Item"]["pk"]["S"] for r in res["Responses"]] == [f"i{i}" for i in range(100)]


def test_transact_get_101_rejected(ddb_raw, table):
    validation(ddb_raw.transact_get_items, TransactItems=[tget(table, K(f"i{i}")) for i in range(101)])


def test_transact_get_missing_table(ddb, table_name):
    expect_error(ddb.transact_get_items, "ResourceNotFoundException",
                 TransactItems=[tget(table_name, K("a"))])


def test_transact_get_bad_key(ddb, table):
    validation(ddb.transact_get_items, message="The provided key element does not match the schema",
               TransactItems=[tget(table, {"pk": S("a"), "x": S("b")})])


def test_transact_get_duplicate_item_rejected(ddb, table):
    validation(ddb.transact_get_items, message=MULTI,
               TransactItems=[tget(table, K("a")), tget(table, K("a"))])


def test_transact_aggregate_size_over_4mb_rejected(ddb, table):
    blob = "x" * (390 * 1024)
    validation(ddb.transact_write_items,
               TransactItems=[put(table, {"pk": S(f"i{i}"), "b": S(blob)}) for i in range(11)])
    assert ddb.scan(TableName=table, Select="COUNT")["Count"] == 0


def test_transact_consumed_capacity(ddb, make_table):
    a, b = make_table(), make_table()
    res = ddb.transact_write_items(TransactItems=[put(a, {"pk": S("x")}), put(b, {"pk": S("y")})],
                                   ReturnConsumedCapacity="TOTAL")
    assert sorted(c["TableName"] for c in res["ConsumedCapacity"]) == sorted([a, b])
    res = ddb.transact_get_items(TransactItems=[tget(a, K("x"))], ReturnConsumedCapacity="TOTAL")
    assert [c["TableName"] for c in res["ConsumedCapacity"]] == [a]
