"""PutItem, GetItem, DeleteItem, UpdateItem: values, limits, ReturnValues."""

import pytest

from wire_helpers import expect_error, validation

INVALID = "One or more parameter values were invalid: "
CCF = "ConditionalCheckFailedException"


def norm(v):
    """Make sets order-insensitive for comparison."""
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in ("SS", "NS", "BS"):
                out[k] = sorted(x)
            else:
                out[k] = norm(x)
        return out
    if isinstance(v, list):
        return [norm(x) for x in v]
    return v


def get(ddb, table, key, **kw):
    return ddb.get_item(TableName=table, Key=key, ConsistentRead=True, **kw).get("Item")


K = {"pk": {"S": "k"}}

ALL_TYPES = {
    "s": {"S": "hello"},
    "n": {"N": "123.45"},
    "b": {"B": b"\x00\x01\xfe\xff"},
    "bool_t": {"BOOL": True},
    "bool_f": {"BOOL": False},
    "null": {"NULL": True},
    "m": {"M": {"x": {"S": "y"}, "inner": {"M": {"z": {"N": "1"}}}, "e": {"M": {}}}},
    "l": {"L": [{"S": "a"}, {"N": "1"}, {"L": []}, {"NULL": True}, {"B": b"q"}]},
    "ss": {"SS": ["b", "a", "c"]},
    "ns": {"NS": ["3", "1", "2.5"]},
    "bs": {"BS": [b"\x01", b"\x00", b"\xff"]},
}


# ------------------------------------------------------------- types

def test_put_get_all_types(ddb, table):
    item = dict(K, **ALL_TYPES)
    assert ddb.put_item(TableName=table, Item=item)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert norm(get(ddb, table, K)) == norm(item)


@pytest.mark.parametrize("name", sorted(ALL_TYPES))
def test_put_get_each_type(ddb, table, name):
    item = dict(K, attr=ALL_TYPES[name])
    ddb.put_item(TableName=table, Item=item)
    assert norm(get(ddb, table, K)) == norm(item)


def test_get_missing_item_has_no_item_key(ddb, table):
    res = ddb.get_item(TableName=table, Key={"pk": {"S": "nope"}})
    assert "Item" not in res


def test_put_overwrites_whole_item(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, a={"S": "1"}, b={"S": "2"}))
    ddb.put_item(TableName=table, Item=dict(K, c={"S": "3"}))
    assert get(ddb, table, K) == dict(K, c={"S": "3"})


def test_unicode_and_binary_roundtrip(ddb, table):
    s = "h\u00e9llo \u4e16\u754c \U0001F600 \u0000 tab\t nl\n \"q\" \\"
    b = bytes(range(256))
    item = {"pk": {"S": s}, "b": {"B": b}, "s": {"S": s}}
    ddb.put_item(TableName=table, Item=item)
    assert get(ddb, table, {"pk": {"S": s}}) == item


def test_binary_hash_key(ddb, make_table):
    t = make_table(hash_key=("pk", "B"))
    ddb.put_item(TableName=t, Item={"pk": {"B": b"\x00\xff"}, "v": {"S": "x"}})
    assert get(ddb, t, {"pk": {"B": b"\x00\xff"}})["v"] == {"S": "x"}
    assert get(ddb, t, {"pk": {"B": b"\x00\xfe"}}) is None


def test_get_item_consistent_read_false(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, v={"N": "1"}))
    res = ddb.get_item(TableName=table, Key=K, ConsistentRead=False)
    # a single-node server has no replica lag; eventual reads see the write
    assert res["Item"]["v"] == {"N": "1"}


def test_delete_item(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, v={"N": "1"}))
    res = ddb.delete_item(TableName=table, Key=K)
    assert "Attributes" not in res
    assert get(ddb, table, K) is None


def test_delete_missing_item_ok(ddb, table):
    res = ddb.delete_item(TableName=table, Key={"pk": {"S": "nope"}}, ReturnValues="ALL_OLD")
    assert "Attributes" not in res


def test_update_item_creates_missing_item(ddb, table):
    res = ddb.update_item(TableName=table, Key=K, UpdateExpression="SET a = :v",
                          ExpressionAttributeValues={":v": {"S": "x"}}, ReturnValues="ALL_NEW")
    assert res["Attributes"] == dict(K, a={"S": "x"})
    assert get(ddb, table, K) == dict(K, a={"S": "x"})


def test_update_item_without_expression_creates_key_only_item(ddb, table):
    ddb.update_item(TableName=table, Key=K)
    assert get(ddb, table, K) == K


# ------------------------------------------------------------- numbers

@pytest.mark.parametrize("given,stored", [
    ("1.0", "1"),
    ("01", "1"),
    ("-0", "0"),
    ("0.000", "0"),
    ("1e2", "100"),
    ("1.5E+1", "15"),
    ("-1.50", "-1.5"),
    ("1E-5", "0.00001"),
    ("123456789012345678901234567890.12345678", "123456789012345678901234567890.12345678"),
    ("0000000000000000000000000000000000000000000001.5", "1.5"),
    ("1E+30", "1000000000000000000000000000000"),
])
def test_number_normalization(ddb, table, given, stored):
    ddb.put_item(TableName=table, Item=dict(K, n={"N": given}, ns={"NS": [given]}))
    item = get(ddb, table, K)
    assert item["n"] == {"N": stored}
    assert item["ns"] == {"NS": [stored]}


def test_number_key_normalization(ddb, make_table):
    t = make_table(hash_key=("pk", "N"))
    ddb.put_item(TableName=t, Item={"pk": {"N": "1.50"}, "v": {"S": "x"}})
    assert get(ddb, t, {"pk": {"N": "1.5"}}) == {"pk": {"N": "1.5"}, "v": {"S": "x"}}
    assert get(ddb, t, {"pk": {"N": "15E-1"}})["v"] == {"S": "x"}


@pytest.mark.parametrize("n", [
    "9.9999999999999999999999999999999999999E+125",
    "-9.9999999999999999999999999999999999999E+125",
    "1E-130",
    "-1E-130",
    "12345678901234567890123456789012345678",
    "0.12345678901234567890123456789012345678",
    "100000000000000000000000000000000000000000",  # 42 digits, 1 significant
    "1E+125",
])
def test_number_limits_accepted(ddb, table, n):
    ddb.put_item(TableName=table, Item=dict(K, n={"N": n}))
    from decimal import Decimal
    assert Decimal(get(ddb, table, K)["n"]["N"]) == Decimal(n)


@pytest.mark.parametrize("n,message", [
    ("1E+126", "Number overflow. Attempting to store a number with magnitude larger than supported range"),
    ("-1E+126", "Number overflow. Attempting to store a number with magnitude larger than supported range"),
    ("1E-131", "Number underflow. Attempting to store a number with magnitude smaller than supported range"),
    ("123456789012345678901234567890123456789", "Attempting to store more than 38 significant digits in a Number"),
    ("1.23456789012345678901234567890123456789", "Attempting to store more than 38 significant digits in a Number"),
])
def test_number_limits_rejected(ddb, table, n, message):
    validation(ddb.put_item, message=message, TableName=table, Item=dict(K, n={"N": n}))
    assert get(ddb, table, K) is None


@pytest.mark.parametrize("n", ["abc", "", "1..2", "0x10", "1e", "--1", "Infinity", "NaN"])
def test_number_not_numeric(ddb, table, n):
    # The service quotes the text it could not read, unless it is empty.
    message = "The parameter cannot be converted to a numeric value" + (f": {n}" if n else "")
    validation(ddb.put_item, message=message, TableName=table, Item=dict(K, n={"N": n}))
    validation(ddb.put_item, message=message, TableName=table, Item=dict(K, n={"NS": ["1", n]}))
    validation(ddb.get_item, message=message, TableName=table, Key=dict(K, x={"N": n}))
    assert get(ddb, table, K) is None


def test_number_limit_in_set_and_key(ddb, make_table):
    t = make_table(hash_key=("pk", "N"))
    validation(ddb.put_item, TableName=t, Item={"pk": {"N": "1E+126"}})
    validation(ddb.put_item, TableName=t, Item={"pk": {"N": "1"}, "ns": {"NS": ["1", "1E-131"]}})


# ------------------------------------------------------------- sizes

def _item_of_size(total):
    # size = len("pk") + len("k") + len("d") + len(value)
    return {"pk": {"S": "k"}, "d": {"S": "x" * (total - 4)}}


def test_item_size_exactly_400kb_accepted(ddb, table):
    item = _item_of_size(400 * 1024)
    ddb.put_item(TableName=table, Item=item)
    assert len(get(ddb, table, K)["d"]["S"]) == 400 * 1024 - 4


def test_item_size_over_400kb_rejected(ddb, table):
    validation(ddb.put_item, message="Item size has exceeded the maximum allowed size",
               TableName=table, Item=_item_of_size(400 * 1024 + 1))


def test_item_size_counts_attribute_names(ddb, table):
    item = {"pk": {"S": "k"}, "n" * 1000: {"S": "x" * (400 * 1024 - 3 - 1000 + 1)}}
    validation(ddb.put_item, message="Item size has exceeded the maximum allowed size",
               TableName=table, Item=item)


def test_update_making_item_too_large_rejected(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, a={"S": "x" * 300000}))
    validation(ddb.update_item, message="Item size to update has exceeded the maximum allowed size",
               TableName=table, Key=K, UpdateExpression="SET b = :v",
               ExpressionAttributeValues={":v": {"S": "y" * 200000}})
    assert "b" not in get(ddb, table, K)


def test_hash_key_2048_bytes_accepted(ddb, table):
    key = {"pk": {"S": "\u00e9" * 1024}}  # 2048 UTF-8 bytes
    ddb.put_item(TableName=table, Item=key)
    assert get(ddb, table, key) == key


def test_hash_key_over_2048_bytes_rejected(ddb, table):
    validation(ddb.put_item, message=INVALID + "Size of hashkey has exceeded the maximum size limit of2048 bytes",
               TableName=table, Item={"pk": {"S": "\u00e9" * 1024 + "x"}})


def test_range_key_1024_bytes_accepted(ddb, table_hr):
    key = {"pk": {"S": "a"}, "sk": {"S": "x" * 1024}}
    ddb.put_item(TableName=table_hr, Item=key)
    assert get(ddb, table_hr, key) == key


def test_range_key_over_1024_bytes_rejected(ddb, table_hr):
    validation(ddb.put_item,
               message=INVALID + "Aggregated size of all range keys has exceeded the size limit of 1024 bytes",
               TableName=table_hr, Item={"pk": {"S": "a"}, "sk": {"S": "x" * 1025}})


def test_binary_hash_key_over_2048_rejected(ddb, make_table):
    t = make_table(hash_key=("pk", "B"))
    ddb.put_item(TableName=t, Item={"pk": {"B": b"x" * 2048}})
    validation(ddb.put_item, TableName=t, Item={"pk": {"B": b"x" * 2049}})


# ------------------------------------------------------------- empty values, sets

def test_empty_string_and_binary_in_non_key_attributes(ddb, table):
    item = dict(K, s={"S": ""}, b={"B": b""}, l={"L": [{"S": ""}]}, m={"M": {"e": {"S": ""}}})
    ddb.put_item(TableName=table, Item=item)
    assert get(ddb, table, K) == item


def test_empty_string_hash_key_rejected(ddb, table):
    validation(ddb.put_item,
               message="One or more parameter values are not valid. The AttributeValue for a key "
                       "attribute cannot contain an empty string value. Key: pk",
               TableName=table, Item={"pk": {"S": ""}})


def test_empty_string_range_key_rejected(ddb, table_hr):
    validation(ddb.put_item,
               message="One or more parameter values are not valid. The AttributeValue for a key "
                       "attribute cannot contain an empty string value. Key: sk",
               TableName=table_hr, Item={"pk": {"S": "a"}, "sk": {"S": ""}})


def test_empty_binary_key_rejected(ddb, make_table):
    t = make_table(hash_key=("pk", "B"))
    validation(ddb.put_item,
               message="One or more parameter values are not valid. The AttributeValue for a key "
                       "attribute cannot contain an empty binary value. Key: pk",
               TableName=t, Item={"pk": {"B": b""}})


def test_empty_string_key_in_get_rejected(ddb, table):
    validation(ddb.get_item, match="cannot contain an empty string value",
               TableName=table, Key={"pk": {"S": ""}})


@pytest.mark.parametrize("set_value", [{"SS": []}, {"NS": []}, {"BS": []}])
def test_empty_set_rejected(ddb, table, set_value):
    validation(ddb.put_item, match=r"^One or more parameter values were invalid: .*empty",
               TableName=table, Item=dict(K, s=set_value))


@pytest.mark.parametrize("set_value", [
    {"SS": ["a", "b", "a"]},
    {"NS": ["1", "2", "1"]},
    {"NS": ["1", "1.0"]},
    {"BS": [b"x", b"x"]},
])
def test_duplicate_set_members_rejected(ddb, table, set_value):
    validation(ddb.put_item, match="contains duplicates", TableName=table, Item=dict(K, s=set_value))


@pytest.mark.parametrize("set_value,message", [
    ({"SS": ["a", "a"]}, INVALID + "Input collection [a, a] contains duplicates."),
    ({"NS": ["1", "1"]}, "Input collection contains duplicates"),
    ({"BS": [b"b", b"b"]}, INVALID + "Input collection [Yg==, Yg==]of type BS contains duplicates."),
])
def test_duplicate_set_members_message(ddb, table, set_value, message):
    # Each set type has the service's own wording.
    validation(ddb.put_item, message=message, TableName=table, Item=dict(K, s=set_value))


def test_null_false_rejected(ddb_raw, table):
    validation(ddb_raw.put_item,
               message=INVALID + "Null attribute value types must have the value of true",
               TableName=table, Item=dict(K, n={"NULL": False}))


def test_attribute_value_with_two_types_rejected(ddb_raw, table):
    validation(ddb_raw.put_item,
               message="Supplied AttributeValue has more than one datatypes set, must contain "
                       "exactly one of the supported datatypes",
               TableName=table, Item=dict(K, x={"S": "a", "N": "1"}))


def test_attribute_value_empty_rejected(ddb_raw, table):
    validation(ddb_raw.put_item,
               message="Supplied AttributeValue is empty, must contain exactly one of the "
                       "supported datatypes",
               TableName=table, Item=dict(K, x={}))


def _nested_map(depth):
    v = {"S": "leaf"}
    for _ in range(depth):
        v = {"M": {"a": v}}
    return v


def _nested_list(depth):
    v = {"N": "1"}
    for _ in range(depth):
        v = {"L": [v]}
    return v


@pytest.mark.parametrize("make", [_nested_map, _nested_list])
def test_nesting_within_limit_accepted(ddb, table, make):
    item = dict(K, x=make(31))
    ddb.put_item(TableName=table, Item=item)
    assert get(ddb, table, K) == item


@pytest.mark.parametrize("make", [_nested_map, _nested_list])
def test_nesting_beyond_limit_rejected(ddb, table, make):
    validation(ddb.put_item, TableName=table, Item=dict(K, x=make(40)))
    assert get(ddb, table, K) is None


# ------------------------------------------------------------- key schema

def test_put_missing_key_attribute(ddb, table):
    validation(ddb.put_item, message=INVALID + "Missing the key pk in the item",
               TableName=table, Item={"other": {"S": "x"}})


def test_put_missing_range_key_attribute(ddb, table_hr):
    validation(ddb.put_item, message=INVALID + "Missing the key sk in the item",
               TableName=table_hr, Item={"pk": {"S": "x"}})


@pytest.mark.parametrize("value,actual", [({"N": "1"}, "N"), ({"B": b"x"}, "B"), ({"SS": ["a"]}, "SS")])
def test_put_wrong_key_type(ddb, table, value, actual):
    validation(ddb.put_item, message=INVALID + f"Type mismatch for key pk expected: S actual: {actual}",
               TableName=table, Item={"pk": value})


@pytest.mark.parametrize("key", [
    {"other": {"S": "x"}},
    {"pk": {"N": "1"}},
    {"pk": {"S": "x"}, "extra": {"S": "y"}},
    {},
])
def test_get_key_does_not_match_schema(ddb, table, key):
    validation(ddb.get_item, message="The provided key element does not match the schema",
               TableName=table, Key=key)


def test_get_partial_key_on_hash_range_table(ddb, table_hr):
    validation(ddb.get_item, message="The provided key element does not match the schema",
               TableName=table_hr, Key={"pk": {"S": "x"}})


def test_delete_key_does_not_match_schema(ddb, table):
    validation(ddb.delete_item, message="The provided key element does not match the schema",
               TableName=table, Key={"pk": {"N": "1"}})


# ------------------------------------------------------------- ReturnValues

OLD = dict(K, a={"N": "1"}, b={"S": "keep"}, c={"L": [{"S": "x"}]})


@pytest.fixture
def seeded(ddb, table):
    ddb.put_item(TableName=table, Item=OLD)
    return table


def test_put_return_values_none(ddb, seeded):
    res = ddb.put_item(TableName=seeded, Item=dict(K, z={"S": "new"}), ReturnValues="NONE")
    assert "Attributes" not in res


def test_put_return_values_all_old(ddb, seeded):
    res = ddb.put_item(TableName=seeded, Item=dict(K, z={"S": "new"}), ReturnValues="ALL_OLD")
    assert res["Attributes"] == OLD


def test_put_return_values_all_old_no_previous(ddb, table):
    res = ddb.put_item(TableName=table, Item=K, ReturnValues="ALL_OLD")
    assert "Attributes" not in res


@pytest.mark.parametrize("rv", ["ALL_NEW", "UPDATED_OLD", "UPDATED_NEW"])
def test_put_invalid_return_values(ddb, table, rv):
    validation(ddb.put_item, TableName=table, Item=K, ReturnValues=rv)


def test_delete_return_values_all_old(ddb, seeded):
    res = ddb.delete_item(TableName=seeded, Key=K, ReturnValues="ALL_OLD")
    assert res["Attributes"] == OLD


def test_delete_invalid_return_values(ddb, seeded):
    validation(ddb.delete_item, TableName=seeded, Key=K, ReturnValues="ALL_NEW")


def test_invalid_return_values_enum(ddb_raw, seeded):
    validation(ddb_raw.update_item, match="returnValues.*Member must satisfy enum value set",
               TableName=seeded, Key=K, ReturnValues="EVERYTHING")


_UPD = dict(UpdateExpression="SET a = a + :one, n = :n REMOVE b",
            ExpressionAttributeValues={":one": {"N": "1"}, ":n": {"S": "new"}})


@pytest.mark.parametrize("rv,expected", [
    ("NONE", None),
    ("ALL_OLD", OLD),
    ("UPDATED_OLD", {"a": {"N": "1"}, "b": {"S": "keep"}}),
    ("ALL_NEW", dict(K, a={"N": "2"}, c={"L": [{"S": "x"}]}, n={"S": "new"})),
    ("UPDATED_NEW", {"a": {"N": "2"}, "n": {"S": "new"}}),
])
def test_update_return_values(ddb, seeded, rv, expected):
    res = ddb.update_item(TableName=seeded, Key=K, ReturnValues=rv, **_UPD)
    if expected is None:
        assert "Attributes" not in res
    else:
        assert res["Attributes"] == expected
    assert get(ddb, seeded, K) == dict(K, a={"N": "2"}, c={"L": [{"S": "x"}]}, n={"S": "new"})


def test_update_return_values_updated_new_nested(ddb, seeded):
    res = ddb.update_item(TableName=seeded, Key=K, UpdateExpression="SET c[0] = :v",
                          ExpressionAttributeValues={":v": {"S": "y"}}, ReturnValues="UPDATED_NEW")
    assert res["Attributes"] == {"c": {"L": [{"S": "y"}]}}


# ------------------------------------------------------------- condition failures

def test_conditional_check_failed_message(ddb, seeded):
    info = expect_error(ddb.put_item, CCF, message="The conditional request failed",
                        TableName=seeded, Item=K, ConditionExpression="attribute_not_exists(pk)")
    assert "Item" not in info.response
    assert get(ddb, seeded, K) == OLD


@pytest.mark.parametrize("op", ["put_item", "update_item", "delete_item"])
def test_return_values_on_condition_check_failure_all_old(ddb, seeded, op):
    kw = dict(TableName=seeded, ConditionExpression="a = :two",
              ExpressionAttributeValues={":two": {"N": "2"}},
              ReturnValuesOnConditionCheckFailure="ALL_OLD")
    if op == "put_item":
        kw["Item"] = K
    else:
        kw["Key"] = K
    info = expect_error(getattr(ddb, op), CCF, message="The conditional request failed", **kw)
    assert info.response["Item"] == OLD
    assert get(ddb, seeded, K) == OLD


def test_return_values_on_condition_check_failure_none(ddb, seeded):
    info = expect_error(ddb.delete_item, CCF, TableName=seeded, Key=K,
                        ConditionExpression="attribute_not_exists(a)",
                        ReturnValuesOnConditionCheckFailure="NONE")
    assert "Item" not in info.response


def test_return_values_on_condition_check_failure_missing_item(ddb, table):
    info = expect_error(ddb.update_item, CCF, TableName=table, Key=K,
                        ConditionExpression="attribute_exists(pk)",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert "Item" not in info.response


# ------------------------------------------------------------- consumed capacity

def test_consumed_capacity_none_by_default(ddb, table):
    assert "ConsumedCapacity" not in ddb.put_item(TableName=table, Item=K)
    assert "ConsumedCapacity" not in ddb.get_item(TableName=table, Key=K, ReturnConsumedCapacity="NONE")


def test_consumed_capacity_total_put(ddb, table):
    res = ddb.put_item(TableName=table, Item=K, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0}


def test_consumed_capacity_total_get(ddb, table):
    ddb.put_item(TableName=table, Item=K)
    res = ddb.get_item(TableName=table, Key=K, ReturnConsumedCapacity="TOTAL", ConsistentRead=True)
    assert res["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0}
    res = ddb.get_item(TableName=table, Key=K, ReturnConsumedCapacity="TOTAL", ConsistentRead=False)
    assert res["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 0.5}


def test_consumed_capacity_indexes(ddb, table):
    res = ddb.put_item(TableName=table, Item=K, ReturnConsumedCapacity="INDEXES")
    cc = res["ConsumedCapacity"]
    assert cc["TableName"] == table
    assert cc["CapacityUnits"] == 1.0
    assert cc["Table"] == {"CapacityUnits": 1.0}


def test_consumed_capacity_large_write(ddb, table):
    # writes are charged per started 1 KB
    item = dict(K, d={"S": "x" * 2500})
    res = ddb.put_item(TableName=table, Item=item, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"]["CapacityUnits"] == 3.0


def test_consumed_capacity_update_and_delete(ddb, table):
    res = ddb.update_item(TableName=table, Key=K, UpdateExpression="SET a = :v",
                          ExpressionAttributeValues={":v": {"N": "1"}}, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0}
    res = ddb.delete_item(TableName=table, Key=K, ReturnConsumedCapacity="TOTAL")
    assert res["ConsumedCapacity"] == {"TableName": table, "CapacityUnits": 1.0}


def test_consumed_capacity_invalid(ddb_raw, table):
    validation(ddb_raw.put_item, match="returnConsumedCapacity.*Member must satisfy enum value set",
               TableName=table, Item=K, ReturnConsumedCapacity="ALL")


# ------------------------------------------------------------- resource API

def test_resource_api_roundtrip(ddb_resource, table):
    from decimal import Decimal
    t = ddb_resource.Table(table)
    t.put_item(Item={"pk": "r", "n": Decimal("0.1"), "m": {"l": [1, "two", None, True]}, "ss": {"a", "b"}})
    item = t.get_item(Key={"pk": "r"}, ConsistentRead=True)["Item"]
    assert item == {"pk": "r", "n": Decimal("0.1"), "m": {"l": [Decimal(1), "two", None, True]},
                    "ss": {"a", "b"}}
