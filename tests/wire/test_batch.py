"""BatchGetItem and BatchWriteItem: limits, duplicates, projections,
UnprocessedKeys/UnprocessedItems shape, all-or-nothing validation."""

import pytest

from wire_helpers import expect_error, validation

DUPS = "Provided list of item keys contains duplicates"
TOO_MANY_WRITE = "Too many items requested for the BatchWriteItem call"
TOO_MANY_GET = "Too many items requested for the BatchGetItem call"
SCHEMA = "The provided key element does not match the schema"


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def key(i):
    return {"pk": S(f"k{i:03d}")}


def put_req(item):
    return {"PutRequest": {"Item": item}}


def del_req(k):
    return {"DeleteRequest": {"Key": k}}


def scan_all(ddb, table):
    items, kw = [], {}
    while True:
        res = ddb.scan(TableName=table, ConsistentRead=True, **kw)
        items += res["Items"]
        if "LastEvaluatedKey" not in res:
            return items
        kw["ExclusiveStartKey"] = res["LastEvaluatedKey"]


def fill(ddb, table, n, extra=None):
    """Write n items k000.. via BatchWriteItem in chunks of 25."""
    items = [dict(key(i), v=N(i), **(extra or {})) for i in range(n)]
    for c in range(0, n, 25):
        res = ddb.batch_write_item(RequestItems={table: [put_req(x) for x in items[c:c + 25]]})
        assert res["UnprocessedItems"] == {}
    return items


def by_pk(items):
    return {i["pk"]["S"]: i for i in items}


# ------------------------------------------------------------- BatchGetItem

def test_batch_get_two_tables(ddb, make_table):
    a, b = make_table(), make_table(range_key=("sk", "N"))
    ddb.put_item(TableName=a, Item={"pk": S("x"), "v": S("a")})
    ddb.put_item(TableName=b, Item={"pk": S("y"), "sk": N(1), "v": S("b")})
    res = ddb.batch_get_item(RequestItems={
        a: {"Keys": [{"pk": S("x")}]},
        b: {"Keys": [{"pk": S("y"), "sk": N(1)}]},
    })
    assert res["Responses"][a] == [{"pk": S("x"), "v": S("a")}]
    assert res["Responses"][b] == [{"pk": S("y"), "sk": N(1), "v": S("b")}]
    assert res["UnprocessedKeys"] == {}


def test_batch_get_missing_items_absent(ddb, table):
    fill(ddb, table, 3)
    res = ddb.batch_get_item(RequestItems={table: {"Keys": [key(0), key(50), key(2), key(99)]}})
    got = by_pk(res["Responses"][table])
    assert sorted(got) == ["k000", "k002"]
    assert res["UnprocessedKeys"] == {}


def test_batch_get_all_missing_gives_empty_list(ddb, table):
    res = ddb.batch_get_item(RequestItems={table: {"Keys": [key(1), key(2)]}})
    assert res["Responses"] == {table: []}
    assert res["UnprocessedKeys"] == {}


def test_batch_get_100_keys(ddb, table):
    fill(ddb, table, 100)
    res = ddb.batch_get_item(RequestItems={table: {"Keys": [key(i) for i in range(100)],
                                                   "ConsistentRead": True}})
    got = by_pk(res["Responses"][table])
    assert len(got) == 100
    assert got["k042"]["v"] == N(42)
    assert res["UnprocessedKeys"] == {}


def test_batch_get_101_keys_rejected(ddb_raw, table):
    validation(ddb_raw.batch_get_item, message=TOO_MANY_GET,
               RequestItems={table: {"Keys": [key(i) for i in range(101)]}})


def test_batch_get_over_100_across_tables_rejected(ddb_raw, make_table):
    a, b = make_table(), make_table()
    validation(ddb_raw.batch_get_item, message=TOO_MANY_GET,
               RequestItems={a: {"Keys": [key(i) for i in range(60)]},
                             b: {"Keys": [key(i) for i in range(41)]}})


def test_batch_get_duplicate_keys_rejected(ddb, table):
    validation(ddb.batch_get_item, message=DUPS,
               RequestItems={table: {"Keys": [key(1), key(2), key(1)]}})


def test_batch_get_duplicate_numeric_keys_normalized(ddb, make_table):
    t = make_table(hash_key=("pk", "N"))
    validation(ddb.batch_get_item, message=DUPS,
               RequestItems={t: {"Keys": [{"pk": N("1")}, {"pk": N("1.0")}]}})


def test_batch_get_same_key_in_two_tables_is_fine(ddb, make_table):
    a, b = make_table(), make_table()
    ddb.put_item(TableName=a, Item={"pk": S("x"), "t": S("a")})
    ddb.put_item(TableName=b, Item={"pk": S("x"), "t": S("b")})
    res = ddb.batch_get_item(RequestItems={a: {"Keys": [{"pk": S("x")}]},
                                           b: {"Keys": [{"pk": S("x")}]}})
    assert res["Responses"][a][0]["t"] == S("a")
    assert res["Responses"][b][0]["t"] == S("b")


def test_batch_get_projection_expression_with_names(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("x"), "name": S("n"), "a": N(1), "b": N(2),
                                        "m": {"M": {"in": S("deep"), "other": S("o")}}})
    res = ddb.batch_get_item(RequestItems={table: {
        "Keys": [{"pk": S("x")}],
        "ProjectionExpression": "#n, a, m.#i",
        "ExpressionAttributeNames": {"#n": "name", "#i": "in"},
    }})
    assert res["Responses"][table] == [{"name": S("n"), "a": N(1), "m": {"M": {"in": S("deep")}}}]


def test_batch_get_projection_without_key_omits_key(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("x"), "a": N(1)})
    res = ddb.batch_get_item(RequestItems={table: {"Keys": [{"pk": S("x")}],
                                                   "ProjectionExpression": "a"}})
    assert res["Responses"][table] == [{"a": N(1)}]


def test_batch_get_attributes_to_get(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("x"), "a": N(1), "b": N(2), "c": N(3)})
    res = ddb.batch_get_item(RequestItems={table: {"Keys": [{"pk": S("x")}],
                                                   "AttributesToGet": ["a", "c", "zz"]}})
    assert res["Responses"][table] == [{"a": N(1), "c": N(3)}]


def test_batch_get_attributes_to_get_and_projection_rejected(ddb, table):
    validation(ddb.batch_get_item, match="Can not use both expression and non-expression parameters",
               RequestItems={table: {"Keys": [{"pk": S("x")}], "AttributesToGet": ["a"],
                                     "ProjectionExpression": "a"}})


def test_batch_get_unused_attribute_name_rejected(ddb, table):
    validation(ddb.batch_get_item, match="unused in expressions",
               RequestItems={table: {"Keys": [{"pk": S("x")}], "ProjectionExpression": "a",
                                     "ExpressionAttributeNames": {"#x": "x"}}})


def test_batch_get_missing_table(ddb, table, table_name):
    expect_error(ddb.batch_get_item, "ResourceNotFoundException",
                 RequestItems={table: {"Keys": [{"pk": S("x")}]},
                               table_name: {"Keys": [{"pk": S("x")}]}})


def test_batch_get_wrong_key_schema(ddb, table):
    validation(ddb.batch_get_item, message=SCHEMA,
               RequestItems={table: {"Keys": [{"pk": S("x"), "extra": S("y")}]}})


def test_batch_get_wrong_key_type(ddb, table):
    validation(ddb.batch_get_item, message=SCHEMA,
               RequestItems={table: {"Keys": [{"pk": N(1)}]}})


def test_batch_get_missing_range_key(ddb, table_hr):
    validation(ddb.batch_get_item, message=SCHEMA,
               RequestItems={table_hr: {"Keys": [{"pk": S("x")}]}})


def test_batch_get_empty_keys_rejected(ddb_raw, table):
    validation(ddb_raw.batch_get_item, RequestItems={table: {"Keys": []}})


def test_batch_get_empty_request_items_rejected(ddb_raw):
    validation(ddb_raw.batch_get_item, RequestItems={})


def test_batch_get_hash_range_items(ddb, table_hr):
    for sk in ("a", "b", "c"):
        ddb.put_item(TableName=table_hr, Item={"pk": S("p"), "sk": S(sk)})
    res = ddb.batch_get_item(RequestItems={table_hr: {"Keys": [
        {"pk": S("p"), "sk": S("c")}, {"pk": S("p"), "sk": S("a")}, {"pk": S("p"), "sk": S("zz")}]}})
    assert sorted(i["sk"]["S"] for i in res["Responses"][table_hr]) == ["a", "c"]


# ------------------------------------------------------------- BatchWriteItem

def test_batch_write_puts(ddb, table):
    items = fill(ddb, table, 10, extra={"x": S("y")})
    assert by_pk(scan_all(ddb, table)) == by_pk(items)


def test_batch_write_25_requests(ddb, table):
    res = ddb.batch_write_item(RequestItems={table: [put_req(key(i)) for i in range(25)]})
    assert res["UnprocessedItems"] == {}
    assert len(scan_all(ddb, table)) == 25


def test_batch_write_mixed_puts_deletes_two_tables(ddb, make_table):
    a, b = make_table(), make_table(range_key=("sk", "N"))
    fill(ddb, a, 4)
    ddb.put_item(TableName=b, Item={"pk": S("p"), "sk": N(1)})
    ddb.put_item(TableName=b, Item={"pk": S("p"), "sk": N(2)})
    res = ddb.batch_write_item(RequestItems={
        a: [del_req(key(0)), del_req(key(1)), put_req({"pk": S("new"), "v": S("n")}),
            put_req(dict(key(2), v=S("replaced")))],
        b: [del_req({"pk": S("p"), "sk": N(1)}), put_req({"pk": S("p"), "sk": N(3)})],
    })
    assert res["UnprocessedItems"] == {}
    got = by_pk(scan_all(ddb, a))
    assert sorted(got) == ["k002", "k003", "new"]
    assert got["k002"] == dict(key(2), v=S("replaced"))
    assert sorted(i["sk"]["N"] for i in scan_all(ddb, b)) == ["2", "3"]


def test_batch_write_delete_missing_item_ok(ddb, table):
    res = ddb.batch_write_item(RequestItems={table: [del_req(key(7))]})
    assert res["UnprocessedItems"] == {}


def test_batch_write_26_requests_rejected(ddb_raw, table):
    validation(ddb_raw.batch_write_item,
               RequestItems={table: [put_req(key(i)) for i in range(26)]})
    assert scan_all(ddb_raw, table) == []


def test_batch_write_over_25_across_tables_rejected(ddb_raw, make_table):
    a, b = make_table(), make_table()
    validation(ddb_raw.batch_write_item, message=TOO_MANY_WRITE,
               RequestItems={a: [put_req(key(i)) for i in range(13)],
                             b: [put_req(key(i)) for i in range(13)]})
    assert scan_all(ddb_raw, a) == [] and scan_all(ddb_raw, b) == []


def test_batch_write_duplicate_puts_rejected(ddb, table):
    validation(ddb.batch_write_item, message=DUPS,
               RequestItems={table: [put_req(dict(key(1), v=N(1))), put_req(key(2)),
                                     put_req(dict(key(1), v=N(2)))]})
    assert scan_all(ddb, table) == []


def test_batch_write_put_and_delete_same_key_rejected(ddb, table):
    validation(ddb.batch_write_item, message=DUPS,
               RequestItems={table: [put_req(key(1)), del_req(key(1))]})
    assert scan_all(ddb, table) == []


def test_batch_write_duplicate_deletes_rejected(ddb, table):
    fill(ddb, table, 2)
    validation(ddb.batch_write_item, message=DUPS,
               RequestItems={table: [del_req(key(0)), del_req(key(0))]})
    assert len(scan_all(ddb, table)) == 2


def test_batch_write_same_hash_different_range_ok(ddb, table_hr):
    ddb.batch_write_item(RequestItems={table_hr: [
        put_req({"pk": S("p"), "sk": S("1")}), put_req({"pk": S("p"), "sk": S("2")})]})
    assert len(scan_all(ddb, table_hr)) == 2


def test_batch_write_missing_key_rejects_whole_batch(ddb, table):
    validation(ddb.batch_write_item, match="Missing the key pk in the item",
               RequestItems={table: [put_req(key(1)), put_req({"v": S("nokey")}), put_req(key(2))]})
    assert scan_all(ddb, table) == []


def test_batch_write_item_too_large_rejects_whole_batch(ddb, make_table):
    a, b = make_table(), make_table()
    big = {"pk": S("big"), "blob": S("x" * (400 * 1024 + 1))}
    validation(ddb.batch_write_item, match="Item size has exceeded the maximum allowed size",
               RequestItems={a: [put_req(key(1))], b: [put_req(key(2)), put_req(big)]})
    assert scan_all(ddb, a) == [] and scan_all(ddb, b) == []


def test_batch_write_wrong_key_type_rejects_whole_batch(ddb, table):
    validation(ddb.batch_write_item,
               RequestItems={table: [put_req(key(1)), put_req({"pk": N(5)})]})
    assert scan_all(ddb, table) == []


def test_batch_write_delete_key_with_extra_attribute(ddb, table):
    fill(ddb, table, 1)
    validation(ddb.batch_write_item, message=SCHEMA,
               RequestItems={table: [del_req(dict(key(0), v=N(0)))]})
    assert len(scan_all(ddb, table)) == 1


def test_batch_write_empty_string_key_rejected(ddb, table):
    validation(ddb.batch_write_item,
               RequestItems={table: [put_req(key(1)), put_req({"pk": S("")})]})
    assert scan_all(ddb, table) == []


def test_batch_write_missing_table_writes_nothing(ddb, table, table_name):
    expect_error(ddb.batch_write_item, "ResourceNotFoundException",
                 RequestItems={table: [put_req(key(1))], table_name: [put_req(key(2))]})
    assert scan_all(ddb, table) == []


def test_batch_write_empty_list_rejected(ddb_raw, table):
    validation(ddb_raw.batch_write_item, RequestItems={table: []})


def test_batch_write_empty_request_items_rejected(ddb_raw):
    validation(ddb_raw.batch_write_item, RequestItems={})


def test_batch_write_request_with_put_and_delete_rejected(ddb_raw, table):
    validation(ddb_raw.batch_write_item, RequestItems={table: [
        {"PutRequest": {"Item": key(1)}, "DeleteRequest": {"Key": key(2)}}]})
    assert scan_all(ddb_raw, table) == []


def test_batch_write_request_with_neither_rejected(ddb_raw, table):
    validation(ddb_raw.batch_write_item, RequestItems={table: [{}]})


def test_batch_write_put_overwrites(ddb, table):
    ddb.put_item(TableName=table, Item=dict(key(1), a=S("old"), b=S("gone")))
    ddb.batch_write_item(RequestItems={table: [put_req(dict(key(1), a=S("new")))]})
    assert ddb.get_item(TableName=table, Key=key(1), ConsistentRead=True)["Item"] == dict(key(1), a=S("new"))


def test_batch_write_then_batch_get_roundtrip_types(ddb, table):
    item = {"pk": S("t"), "n": N("1.50"), "b": {"B": b"\x00\xff"}, "ss": {"SS": ["a", "b"]},
            "l": {"L": [S("x"), {"NULL": True}]}, "m": {"M": {"k": {"BOOL": True}}}}
    ddb.batch_write_item(RequestItems={table: [put_req(item)]})
    got = ddb.batch_get_item(RequestItems={table: {"Keys": [{"pk": S("t")}]}})["Responses"][table][0]
    assert got["n"] == N("1.5")
    assert got["b"] == {"B": b"\x00\xff"}
    assert sorted(got["ss"]["SS"]) == ["a", "b"]
    assert got["l"] == item["l"] and got["m"] == item["m"]


def test_batch_get_response_over_16mb_is_partial(ddb, table):
    """A BatchGetItem response is capped at 16 MB: the rest of the keys come
    back in UnprocessedKeys, ready to be sent again."""
    blob = "x" * (390 * 1024)
    keys = [key(i) for i in range(50)]  # ~19.5 MB in total
    for c in range(0, 50, 10):
        ddb.batch_write_item(RequestItems={table: [put_req(dict(k, payload=S(blob))) for k in keys[c:c + 10]]})
    res = ddb.batch_get_item(RequestItems={table: {"Keys": keys, "ProjectionExpression": "pk, payload"}})
    got = [i["pk"]["S"] for i in res["Responses"][table]]
    assert 0 < len(got) < 50
    un = res["UnprocessedKeys"]
    assert list(un) == [table]
    assert un[table]["ProjectionExpression"] == "pk, payload"
    rest = [k["pk"]["S"] for k in un[table]["Keys"]]
    assert sorted(got + rest) == sorted(k["pk"]["S"] for k in keys)
    res2 = ddb.batch_get_item(RequestItems=un)
    assert sorted(got + [i["pk"]["S"] for i in res2["Responses"][table]]) == sorted(k["pk"]["S"] for k in keys)
    assert res2["UnprocessedKeys"] == {}


def test_batch_consumed_capacity_per_table(ddb, make_table):
    a, b = make_table(), make_table()
    res = ddb.batch_write_item(RequestItems={a: [put_req(key(1))], b: [put_req(key(2))]},
                               ReturnConsumedCapacity="TOTAL")
    assert sorted(c["TableName"] for c in res["ConsumedCapacity"]) == sorted([a, b])
    assert all(c["CapacityUnits"] > 0 for c in res["ConsumedCapacity"])
    res = ddb.batch_get_item(RequestItems={a: {"Keys": [key(1)]}, b: {"Keys": [key(2)]}},
                             ReturnConsumedCapacity="TOTAL")
    assert sorted(c["TableName"] for c in res["ConsumedCapacity"]) == sorted([a, b])
