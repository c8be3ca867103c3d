"""Legacy (pre-expression) parameters still sent by older clients:
AttributesToGet, Expected + ConditionalOperator, KeyConditions, QueryFilter,
ScanFilter, AttributeUpdates; and mixing them with expressions."""

import pytest

from wire_helpers import cond, expect_error, validation

CCF = "ConditionalCheckFailedException"
MIX = "^Can not use both expression and non-expression parameters in the same request"


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


K = {"pk": S("k")}
BASE = {"pk": S("k"), "s": S("hello"), "n": N(5), "ss": {"SS": ["a", "b"]}, "l": {"L": [S("x")]}}


def get(ddb, table, key=K):
    return ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


@pytest.fixture
def base(ddb, table):
    ddb.put_item(TableName=table, Item=BASE)
    return table


def put_expected(ddb, table, expected, **kw):
    return ddb.put_item(TableName=table, Item=dict(K, new=S("yes")), Expected=expected, **kw)


# ------------------------------------------------------------- AttributesToGet

def test_get_item_attributes_to_get(ddb, base):
    res = ddb.get_item(TableName=base, Key=K, AttributesToGet=["s", "n", "missing"])
    assert res["Item"] == {"s": S("hello"), "n": N(5)}


def test_query_attributes_to_get(ddb, base):
    res = ddb.query(TableName=base, KeyConditions={"pk": cond("EQ", S("k"))}, AttributesToGet=["n"])
    assert res["Items"] == [{"n": N(5)}]


def test_scan_attributes_to_get_with_select_specific(ddb, base):
    res = ddb.scan(TableName=base, AttributesToGet=["pk", "s"], Select="SPECIFIC_ATTRIBUTES")
    assert res["Items"] == [{"pk": S("k"), "s": S("hello")}]


def test_attributes_to_get_and_projection_rejected(ddb, base):
    validation(ddb.get_item, match=MIX, TableName=base, Key=K, AttributesToGet=["s"],
               ProjectionExpression="n")


def test_attributes_to_get_duplicates_rejected(ddb, base):
    validation(ddb.get_item, TableName=base, Key=K, AttributesToGet=["s", "s"])


# ------------------------------------------------------------- Expected

def test_expected_value_match_passes(ddb, base):
    put_expected(ddb, base, {"s": {"Value": S("hello")}})
    assert get(ddb, base)["new"] == S("yes")


def test_expected_value_mismatch_fails(ddb, base):
    expect_error(put_expected, CCF, ddb=ddb, table=base, expected={"s": {"Value": S("other")}})
    assert get(ddb, base) == BASE


def test_expected_value_on_missing_attribute_fails(ddb, base):
    expect_error(put_expected, CCF, ddb=ddb, table=base, expected={"zz": {"Value": S("x")}})


def test_expected_exists_false_passes_when_absent(ddb, table):
    ddb.put_item(TableName=table, Item=K, Expected={"pk": {"Exists": False}})
    assert get(ddb, table) == K


def test_expected_exists_false_fails_when_present(ddb, base):
    expect_error(put_expected, CCF, ddb=ddb, table=base, expected={"pk": {"Exists": False}})
    assert get(ddb, base) == BASE


def test_expected_exists_true_with_value(ddb, base):
    put_expected(ddb, base, {"n": {"Exists": True, "Value": N("5.0")}})


def test_expected_exists_false_with_value_rejected(ddb, base):
    validation(put_expected, ddb=ddb, table=base,
               expected={"s": {"Exists": False, "Value": S("hello")}})


def test_expected_exists_true_without_value_rejected(ddb, base):
    validation(put_expected, ddb=ddb, table=base, expected={"s": {"Exists": True}})


PASSING = [
    ("EQ", "s", [S("hello")]),
    ("NE", "s", [S("bye")]),
    ("NOT_NULL", "s", []),
    ("NULL", "missing", []),
    ("BEGINS_WITH", "s", [S("hel")]),
    ("IN", "n", [N(1), N(5), N(9)]),
    ("BETWEEN", "n", [N(5), N(10)]),
    ("GT", "n", [N(4)]),
    ("GE", "n", [N(5)]),
    ("LT", "s", [S("world")]),
    ("LE", "n", [N(5)]),
    ("CONTAINS", "ss", [S("a")]),
    ("CONTAINS", "s", [S("ell")]),
    ("NOT_CONTAINS", "ss", [S("z")]),
]
FAILING = [
    ("EQ", "s", [S("Hello")]),
    ("EQ", "n", [S("5")]),
    ("NE", "s", [S("hello")]),
    ("NOT_NULL", "missing", []),
    ("NULL", "s", []),
    ("BEGINS_WITH", "s", [S("ello")]),
    ("IN", "n", [N(1), N(2)]),
    ("BETWEEN", "n", [N(6), N(10)]),
    ("GT", "n", [N(5)]),
    ("LT", "n", [N(5)]),
    ("CONTAINS", "ss", [S("z")]),
    ("NOT_CONTAINS", "ss", [S("a")]),
]


@pytest.mark.parametrize("op,attr,vals", PASSING, ids=[f"{o}-{a}" for o, a, _ in PASSING])
def test_expected_operator_passes(ddb, base, op, attr, vals):
    put_expected(ddb, base, {attr: cond(op, *vals)})
    assert get(ddb, base) == dict(K, new=S("yes"))


@pytest.mark.parametrize("op,attr,vals", FAILING, ids=[f"{o}-{a}-{i}" for i, (o, a, _) in enumerate(FAILING)])
def test_expected_operator_fails(ddb, base, op, attr, vals):
    expect_error(put_expected, CCF, ddb=ddb, table=base, expected={attr: cond(op, *vals)})
    assert get(ddb, base) == BASE


def test_expected_and_is_default(ddb, base):
    expect_error(put_expected, CCF, ddb=ddb, table=base, expected={
        "s": cond("EQ", S("hello")), "n": cond("EQ", N(6))})


def test_expected_conditional_operator_or(ddb, base):
    put_expected(ddb, base, {"s": cond("EQ", S("nope")), "n": cond("EQ", N(5))},
                 ConditionalOperator="OR")


def test_expected_conditional_operator_or_all_false(ddb, base):
    expect_error(put_expected, CCF, ddb=ddb, table=base, ConditionalOperator="OR",
                 expected={"s": cond("EQ", S("nope")), "n": cond("EQ", N(6))})


def test_expected_between_wrong_arity_rejected(ddb, base):
    validation(put_expected, ddb=ddb, table=base, expected={"n": cond("BETWEEN", N(1))})


def test_expected_null_with_value_rejected(ddb, base):
    validation(put_expected, ddb=ddb, table=base, expected={"n": cond("NULL", N(1))})


def test_expected_with_condition_expression_rejected(ddb, base):
    validation(put_expected, match=MIX, ddb=ddb, table=base, expected={"s": {"Value": S("hello")}},
               ConditionExpression="attribute_exists(pk)")
    assert get(ddb, base) == BASE


def test_expected_with_expression_attribute_values_rejected(ddb, base):
    validation(put_expected, ddb=ddb, table=base, expected={"s": {"Value": S("hello")}},
               ExpressionAttributeValues={":v": S("x")})
    assert get(ddb, base) == BASE


def test_delete_item_with_expected(ddb, base):
    expect_error(ddb.delete_item, CCF, TableName=base, Key=K, Expected={"n": cond("GT", N(5))})
    assert get(ddb, base) == BASE
    ddb.delete_item(TableName=base, Key=K, Expected={"n": cond("LE", N(5))})
    assert get(ddb, base) is None


def test_expected_failure_return_all_old(ddb, base):
    info = expect_error(ddb.delete_item, CCF, TableName=base, Key=K, Expected={"n": cond("GT", N(5))},
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert info.response["Item"] == BASE


# ------------------------------------------------------------- AttributeUpdates

def au(ddb, table, updates, key=K, **kw):
    return ddb.update_item(TableName=table, Key=key, AttributeUpdates=updates, **kw)


def test_attribute_updates_put(ddb, base):
    au(ddb, base, {"s": {"Action": "PUT", "Value": S("bye")}, "x": {"Value": N(1)}})
    it = get(ddb, base)
    assert it["s"] == S("bye") and it["x"] == N(1)


def test_attribute_updates_creates_item(ddb, table):
    au(ddb, table, {"a": {"Action": "PUT", "Value": S("v")}})
    assert get(ddb, table) == dict(K, a=S("v"))


def test_attribute_updates_add_number(ddb, base):
    au(ddb, base, {"n": {"Action": "ADD", "Value": N("2.5")}, "fresh": {"Action": "ADD", "Value": N(-3)}})
    it = get(ddb, base)
    assert it["n"] == N("7.5") and it["fresh"] == N(-3)


def test_attribute_updates_add_set(ddb, base):
    au(ddb, base, {"ss": {"Action": "ADD", "Value": {"SS": ["b", "c"]}},
                   "ns": {"Action": "ADD", "Value": {"NS": ["1"]}}})
    it = get(ddb, base)
    assert sorted(it["ss"]["SS"]) == ["a", "b", "c"] and it["ns"] == {"NS": ["1"]}


def test_attribute_updates_delete_attribute(ddb, base):
    au(ddb, base, {"s": {"Action": "DELETE"}, "missing": {"Action": "DELETE"}})
    assert "s" not in get(ddb, base)


def test_attribute_updates_delete_from_set(ddb, base):
    au(ddb, base, {"ss": {"Action": "DELETE", "Value": {"SS": ["a", "zz"]}}})
    assert get(ddb, base)["ss"] == {"SS": ["b"]}


def test_attribute_updates_delete_last_element_removes_attribute(ddb, base):
    au(ddb, base, {"ss": {"Action": "DELETE", "Value": {"SS": ["a", "b"]}}})
    assert "ss" not in get(ddb, base)


def test_attribute_updates_add_to_non_number_rejected(ddb, base):
    validation(au, ddb=ddb, table=base, updates={"s": {"Action": "ADD", "Value": N(1)}})
    assert get(ddb, base) == BASE


def test_attribute_updates_key_attribute_rejected(ddb, base):
    validation(au, ddb=ddb, table=base, updates={"pk": {"Action": "PUT", "Value": S("other")}})


def test_attribute_updates_return_values(ddb, base):
    res = au(ddb, base, {"n": {"Action": "ADD", "Value": N(1)}}, ReturnValues="UPDATED_NEW")
    assert res["Attributes"] == {"n": N(6)}


def test_attribute_updates_with_expected(ddb, base):
    expect_error(au, CCF, ddb=ddb, table=base, updates={"n": {"Action": "ADD", "Value": N(1)}},
                 Expected={"n": {"Value": N(4)}})
    au(ddb, base, {"n": {"Action": "ADD", "Value": N(1)}}, Expected={"n": {"Value": N(5)}})
    assert get(ddb, base)["n"] == N(6)


def test_attribute_updates_with_update_expression_rejected(ddb, base):
    validation(au, match=MIX, ddb=ddb, table=base, updates={"a": {"Value": S("v")}},
               UpdateExpression="SET b = :b", ExpressionAttributeValues={":b": S("b")})
    assert get(ddb, base) == BASE


# ------------------------------------------------------------- KeyConditions / QueryFilter

@pytest.fixture
def qtable(ddb, table_hr):
    for i in range(6):
        ddb.put_item(TableName=table_hr, Item={"pk": S("p"), "sk": S(f"s{i}"), "v": N(i)})
    ddb.put_item(TableName=table_hr, Item={"pk": S("other"), "sk": S("s0"), "v": N(0)})
    return table_hr


def sks(res):
    return [i["sk"]["S"] for i in res["Items"]]


def test_key_conditions_eq(ddb, qtable):
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))})
    assert sks(res) == [f"s{i}" for i in range(6)]


def test_key_conditions_between(ddb, qtable):
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p")),
                                                     "sk": cond("BETWEEN", S("s1"), S("s3"))})
    assert sks(res) == ["s1", "s2", "s3"]


def test_key_conditions_begins_with_descending(ddb, qtable):
    ddb.put_item(TableName=qtable, Item={"pk": S("p"), "sk": S("t0")})
    res = ddb.query(TableName=qtable, ScanIndexForward=False,
                    KeyConditions={"pk": cond("EQ", S("p")), "sk": cond("BEGINS_WITH", S("s"))})
    assert sks(res) == [f"s{i}" for i in range(5, -1, -1)]


def test_key_conditions_gt(ddb, qtable):
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p")), "sk": cond("GT", S("s3"))})
    assert sks(res) == ["s4", "s5"]


def test_key_conditions_missing_hash_rejected(ddb, qtable):
    validation(ddb.query, TableName=qtable, KeyConditions={"sk": cond("EQ", S("s1"))})


def test_key_conditions_unsupported_operator_rejected(ddb, qtable):
    validation(ddb.query, TableName=qtable, KeyConditions={"pk": cond("EQ", S("p")),
                                                           "sk": cond("NE", S("s1"))})


def test_key_conditions_with_key_condition_expression_rejected(ddb, qtable):
    validation(ddb.query, match=MIX, TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))},
               KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("p")})


def test_query_filter(ddb, qtable):
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))},
                    QueryFilter={"v": cond("GE", N(4))})
    assert sks(res) == ["s4", "s5"]
    assert res["ScannedCount"] == 6 and res["Count"] == 2


def test_query_filter_or(ddb, qtable):
    ddb.put_item(TableName=qtable, Item={"pk": S("p"), "sk": S("s9"), "v": N(9), "extra": S("e")})
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))}, ConditionalOperator="OR",
                    QueryFilter={"v": cond("LT", N(1)), "extra": cond("NOT_NULL")})
    assert sks(res) == ["s0", "s9"]


def test_query_filter_with_filter_expression_rejected(ddb, qtable):
    validation(ddb.query, match=MIX, TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))},
               QueryFilter={"v": cond("GE", N(4))}, FilterExpression="v > :x",
               ExpressionAttributeValues={":x": N(1)})


# ------------------------------------------------------------- ScanFilter

def test_scan_filter(ddb, qtable):
    res = ddb.scan(TableName=qtable, ScanFilter={"v": cond("BETWEEN", N(2), N(3))})
    assert sorted(sks(res)) == ["s2", "s3"]


def test_scan_filter_or(ddb, qtable):
    res = ddb.scan(TableName=qtable, ConditionalOperator="OR",
                   ScanFilter={"pk": cond("EQ", S("other")), "v": cond("EQ", N(5))})
    assert sorted((i["pk"]["S"], i["sk"]["S"]) for i in res["Items"]) == [("other", "s0"), ("p", "s5")]


def test_scan_filter_and(ddb, qtable):
    res = ddb.scan(TableName=qtable, ScanFilter={"pk": cond("EQ", S("p")), "v": cond("IN", N(0), N(5))})
    assert sorted(sks(res)) == ["s0", "s5"]


def test_scan_filter_null_not_null(ddb, qtable):
    ddb.put_item(TableName=qtable, Item={"pk": S("z"), "sk": S("z")})
    assert [i["pk"]["S"] for i in ddb.scan(TableName=qtable, ScanFilter={"v": cond("NULL")})["Items"]] == ["z"]
    assert ddb.scan(TableName=qtable, ScanFilter={"v": cond("NOT_NULL")})["Count"] == 7


def test_scan_filter_with_filter_expression_rejected(ddb, qtable):
    validation(ddb.scan, match=MIX, TableName=qtable, ScanFilter={"v": cond("GE", N(4))},
               FilterExpression="v > :x", ExpressionAttributeValues={":x": N(1)})


def test_scan_attributes_to_get_with_projection_rejected(ddb, qtable):
    validation(ddb.scan, match=MIX, TableName=qtable, AttributesToGet=["v"], ProjectionExpression="sk")


def test_attribute_updates_delete_value_from_non_set_rejected(ddb, base):
    validation(au, ddb=ddb, table=base, updates={"s": {"Action": "DELETE", "Value": S("hello")}})
    assert get(ddb, base) == BASE



# ------------------------------------------------- ConditionalOperator rules

WITHOUT = "ConditionalOperator cannot be used without Filter or Expected"
TWO = "ConditionalOperator can only be used when Filter or Expected has two or more elements"


def test_conditional_operator_needs_two_conditions(ddb, qtable):
    key = {"pk": S("p"), "sk": S("s0")}
    one = {"v": cond("EQ", N(0))}
    for kw, message in [
        (dict(), WITHOUT),
        (dict(Expected={}), WITHOUT),
        (dict(Expected=one), TWO),
    ]:
        validation(ddb.put_item, message=message, TableName=qtable, Item=dict(key, v=N(1)), ConditionalOperator="AND", **kw)
        validation(ddb.delete_item, message=message, TableName=qtable, Key=key, ConditionalOperator="OR", **kw)
        validation(ddb.update_item, message=message, TableName=qtable, Key=key, ConditionalOperator="AND", **kw)
        validation(ddb.update_item, message=message, TableName=qtable, Key=key, ConditionalOperator="AND",
                   AttributeUpdates={"w": {"Action": "PUT", "Value": N(1)}}, **kw)
    for kw, message in [(dict(), WITHOUT), (dict(ScanFilter={}), WITHOUT), (dict(AttributesToGet=["v"]), WITHOUT),
                        (dict(ScanFilter=one), TWO)]:
        validation(ddb.scan, message=message, TableName=qtable, ConditionalOperator="AND", **kw)
    kc = {"pk": cond("EQ", S("p"))}
    validation(ddb.query, message=WITHOUT, TableName=qtable, ConditionalOperator="AND", KeyConditions=kc)
    validation(ddb.query, message=TWO, TableName=qtable, ConditionalOperator="AND", KeyConditions=kc, QueryFilter=one)
    # Before the missing key condition.
    validation(ddb.query, message=WITHOUT, TableName=qtable, ConditionalOperator="AND")
    # Nothing was written.
    assert ddb.get_item(TableName=qtable, Key=key, ConsistentRead=True)["Item"].get("w") is None


@pytest.mark.parametrize("expected,message", [
    ({"a": {}}, "Value must be provided when Exists is null for Attribute: a"),
    ({"a": {"Exists": True}}, "Value must be provided when Exists is true for Attribute: a"),
    ({"a": {"Exists": False, "Value": S("x")}}, "Value cannot be used when Exists is false for Attribute: a"),
    ({"a": {"Value": S("x"), "ComparisonOperator": "EQ", "AttributeValueList": [S("x")]}},
     "Value and AttributeValueList cannot be used together for Attribute: a"),
    ({"a": {"ComparisonOperator": "EQ"}}, "Value or AttributeValueList must be used with ComparisonOperator: EQ for Attribute: a"),
    ({"a": {"AttributeValueList": [S("x")]}}, "AttributeValueList can only be used with a ComparisonOperator for Attribute: a"),
    ({"a": {"Exists": True, "AttributeValueList": [S("x")]}},
     "AttributeValueList can only be used with a ComparisonOperator for Attribute: a"),
    ({"a": {"Exists": True, "ComparisonOperator": "EQ"}}, "Exists and ComparisonOperator cannot be used together for Attribute: a"),
    ({"a": {"ComparisonOperator": "BETWEEN", "AttributeValueList": [S("x")]}},
     "Invalid number of argument(s) for the BETWEEN ComparisonOperator"),
])
def test_malformed_expected_condition(ddb, qtable, expected, message):
    key = {"pk": S("p"), "sk": S("s0")}
    validation(ddb.delete_item, message="One or more parameter values were invalid: " + message,
               TableName=qtable, Key=key, Expected=expected)
    validation(ddb.put_item, message="One or more parameter values were invalid: " + message,
               TableName=qtable, Item=dict(key, v=N(1)), Expected=expected)
    assert ddb.get_item(TableName=qtable, Key=key, ConsistentRead=True)["Item"]["v"] == N(0)


def test_expected_comparison_operators_without_values(ddb, qtable):
    # NULL and NOT_NULL take no value.
    key = {"pk": S("p"), "sk": S("s0")}
    ddb.put_item(TableName=qtable, Item=dict(key, v=N(0)), Expected={"v": {"ComparisonOperator": "NOT_NULL"},
                                                                      "nope": {"ComparisonOperator": "NULL"}})
