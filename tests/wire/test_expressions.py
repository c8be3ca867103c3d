"""ConditionExpression, UpdateExpression, ProjectionExpression and the
ExpressionAttributeNames / ExpressionAttributeValues rules."""

import pytest

from wire_helpers import expect_error, validation

K = {"pk": {"S": "k"}}
ITEM = dict(
    K,
    n={"N": "5"},
    s={"S": "hello"},
    b={"B": b"abc"},
    t={"BOOL": True},
    nul={"NULL": True},
    l={"L": [{"S": "a"}, {"N": "1"}, {"M": {"x": {"S": "y"}}}]},
    m={"M": {"a": {"N": "1"}, "b": {"M": {"c": {"S": "deep"}}}}},
    ss={"SS": ["x", "y"]},
    ns={"NS": ["1", "2", "3"]},
    bs={"BS": [b"1"]},
    es={"S": ""},
)


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


@pytest.fixture
def item_table(ddb, table):
    ddb.put_item(TableName=table, Item=ITEM)
    return table


def get(ddb, table, **kw):
    return ddb.get_item(TableName=table, Key=K, ConsistentRead=True, **kw).get("Item")


def cond(ddb, table, expr, values=None, names=None):
    """Evaluate a ConditionExpression against ITEM: True if a conditional
    re-put of the same item succeeds, False on ConditionalCheckFailed."""
    kw = {"ConditionExpression": expr}
    if values:
        kw["ExpressionAttributeValues"] = values
    if names:
        kw["ExpressionAttributeNames"] = names
    try:
        ddb.put_item(TableName=table, Item=ITEM, **kw)
        return True
    except ddb.exceptions.ConditionalCheckFailedException:
        return False


def update(ddb, table, expr, values=None, names=None, **kw):
    if values:
        kw["ExpressionAttributeValues"] = values
    if names:
        kw["ExpressionAttributeNames"] = names
    return ddb.update_item(TableName=table, Key=K, UpdateExpression=expr, ReturnValues="ALL_NEW", **kw)["Attributes"]


# ------------------------------------------------------------- conditions

CONDITIONS = [
    ("n = :v", {":v": N(5)}, True),
    ("n = :v", {":v": N(6)}, False),
    ("n = :v", {":v": N("5.0")}, True),
    ("n <> :v", {":v": N(6)}, True),
    ("n <> :v", {":v": N(5)}, False),
    ("n < :v", {":v": N(6)}, True),
    ("n < :v", {":v": N(5)}, False),
    ("n <= :v", {":v": N(5)}, True),
    ("n > :v", {":v": N(5)}, False),
    ("n > :v", {":v": N("-10")}, True),
    ("n >= :v", {":v": N(5)}, True),
    ("s < :v", {":v": S("hellp")}, True),
    ("s > :v", {":v": S("Hello")}, True),        # 'h' (0x68) > 'H' (0x48)
    ("s = :v", {":v": S("hello")}, True),
    ("b = :v", {":v": {"B": b"abc"}}, True),
    ("b < :v", {":v": {"B": b"abd"}}, True),
    ("n = :v", {":v": S("5")}, False),           # different types are never equal
    ("n <> :v", {":v": S("5")}, True),
    ("n < :v", {":v": S("6")}, False),           # ordering across types is false
    ("t = :v", {":v": {"BOOL": True}}, True),
    ("nul = :v", {":v": {"NULL": True}}, True),
    ("m = :v", {":v": {"M": {"b": {"M": {"c": S("deep")}}, "a": N(1)}}}, True),
    ("l = :v", {":v": {"L": [S("a"), N(1), {"M": {"x": S("y")}}]}}, True),
    ("ss = :v", {":v": {"SS": ["y", "x"]}}, True),
    ("nope = :v", {":v": N(5)}, False),
    ("nope <> :v", {":v": N(5)}, True),
    ("n BETWEEN :a AND :b", {":a": N(1), ":b": N(5)}, True),
    ("n BETWEEN :a AND :b", {":a": N(6), ":b": N(9)}, False),
    ("s BETWEEN :a AND :b", {":a": S("a"), ":b": S("i")}, True),
    ("n IN (:a, :b)", {":a": N(1), ":b": N(5)}, True),
    ("n IN (:a, :b)", {":a": N(1), ":b": N(2)}, False),
    ("s IN (:a)", {":a": S("hello")}, True),
    ("attribute_exists(n)", None, True),
    ("attribute_exists(nope)", None, False),
    ("attribute_not_exists(nope)", None, True),
    ("attribute_not_exists(n)", None, False),
    ("attribute_exists(m.b.c)", None, True),
    ("attribute_exists(m.b.zz)", None, False),
    ("attribute_exists(l[2].x)", None, True),
    ("attribute_exists(l[5])", None, False),
    ("attribute_exists(es)", None, True),
    ("attribute_type(n, :t)", {":t": S("N")}, True),
    ("attribute_type(n, :t)", {":t": S("S")}, False),
    ("attribute_type(ss, :t)", {":t": S("SS")}, True),
    ("attribute_type(nul, :t)", {":t": S("NULL")}, True),
    ("attribute_type(m.b, :t)", {":t": S("M")}, True),
    ("attribute_type(l, :t)", {":t": S("L")}, True),
    ("attribute_type(t, :t)", {":t": S("BOOL")}, True),
    ("begins_with(s, :p)", {":p": S("he")}, True),
    ("begins_with(s, :p)", {":p": S("lo")}, False),
    ("begins_with(b, :p)", {":p": {"B": b"ab"}}, True),
    ("begins_with(n, :p)", {":p": S("5")}, False),
    ("contains(s, :v)", {":v": S("ell")}, True),
    ("contains(s, :v)", {":v": S("xyz")}, False),
    ("contains(ss, :v)", {":v": S("x")}, True),
    ("contains(ss, :v)", {":v": S("q")}, False),
    ("contains(ns, :v)", {":v": N(2)}, True),
    ("contains(l, :v)", {":v": S("a")}, True),
    ("contains(l, :v)", {":v": N(1)}, True),
    ("contains(bs, :v)", {":v": {"B": b"1"}}, True),
    ("size(s) = :v", {":v": N(5)}, True),
    ("size(l) = :v", {":v": N(3)}, True),
    ("size(m) = :v", {":v": N(2)}, True),
    ("size(ss) = :v", {":v": N(2)}, True),
    ("size(b) > :v", {":v": N(2)}, True),
    ("size(es) = :v", {":v": N(0)}, True),
    ("size(nope) = :v", {":v": N(0)}, False),
    ("m.b.c = :v", {":v": S("deep")}, True),
    ("l[2].x = :v", {":v": S("y")}, True),
    ("l[0] = :v", {":v": S("a")}, True),
    ("n = ns", None, False),
    ("size(s) = n", None, True),
    # precedence: NOT > AND > OR
    ("n = :five OR n = :six AND s = :nope", {":five": N(5), ":six": N(6), ":nope": S("x")}, True),
    ("(n = :five OR n = :six) AND s = :nope", {":five": N(5), ":six": N(6), ":nope": S("x")}, False),
    ("NOT n = :five AND n = :six", {":five": N(5), ":six": N(6)}, False),
    ("NOT (n = :five AND n = :six)", {":five": N(5), ":six": N(6)}, True),
    ("NOT n = :five", {":five": N(5)}, False),
    ("n = :five and s = :s", {":five": N(5), ":s": S("hello")}, True),   # keywords are case-insensitive
    ("attribute_exists(n) AND (s = :a OR s = :b) AND NOT contains(ss, :c)",
     {":a": S("x"), ":b": S("hello"), ":c": S("z")}, True),
]


@pytest.mark.parametrize("expr,values,expected", CONDITIONS,
                         ids=[f"{i}:{c[0]}" for i, c in enumerate(CONDITIONS)])
def test_condition(ddb, item_table, expr, values, expected):
    assert cond(ddb, item_table, expr, values) is expected


def test_condition_with_names(ddb, item_table):
    assert cond(ddb, item_table, "#m.#b.#c = :v AND #n = :five",
                {":v": S("deep"), ":five": N(5)}, {"#m": "m", "#b": "b", "#c": "c", "#n": "n"})


def test_condition_name_with_dot_is_one_attribute(ddb, table):
    ddb.put_item(TableName=table, Item=dict(K, **{"a.b": S("dotted")}))
    assert ddb.get_item(TableName=table, Key=K, ProjectionExpression="#ab",
                        ExpressionAttributeNames={"#ab": "a.b"})["Item"] == {"a.b": S("dotted")}
    ddb.put_item(TableName=table, Item=K, ConditionExpression="attribute_exists(#ab)",
                 ExpressionAttributeNames={"#ab": "a.b"})
    expect_error(ddb.put_item, "ConditionalCheckFailedException", TableName=table, Item=K,
                 ConditionExpression="attribute_exists(#ab)", ExpressionAttributeNames={"#ab": "a.b"})


def test_condition_on_missing_item(ddb, table):
    ddb.put_item(TableName=table, Item=K, ConditionExpression="attribute_not_exists(pk)")
    expect_error(ddb.put_item, "ConditionalCheckFailedException", TableName=table, Item=K,
                 ConditionExpression="attribute_not_exists(pk)")
    expect_error(ddb.delete_item, "ConditionalCheckFailedException", TableName=table,
                 Key={"pk": S("other")}, ConditionExpression="attribute_exists(pk)")


def test_between_lower_greater_than_upper(ddb, item_table):
    validation(ddb.put_item, message="Invalid ConditionExpression: The BETWEEN operator requires upper bound "
                                     "to be greater than or equal to lower bound; lower bound operand: "
                                     "AttributeValue: {N:9}, upper bound operand: AttributeValue: {N:1}",
               TableName=item_table, Item=ITEM, ConditionExpression="n BETWEEN :a AND :b",
               ExpressionAttributeValues={":a": N(9), ":b": N(1)})


def test_attribute_type_invalid_type(ddb, item_table):
    validation(ddb.put_item, match=r"^Invalid ConditionExpression: Invalid attribute type name found",
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_type(n, :t)",
               ExpressionAttributeValues={":t": S("Q")})


def test_unknown_function(ddb, item_table):
    validation(ddb.put_item, message="Invalid ConditionExpression: Invalid function name; function: foo",
               TableName=item_table, Item=ITEM, ConditionExpression="foo(n)")


def test_function_name_is_case_sensitive(ddb, item_table):
    validation(ddb.put_item, match=r"^Invalid ConditionExpression: Invalid function name; function: ",
               TableName=item_table, Item=ITEM, ConditionExpression="ATTRIBUTE_EXISTS(n)")


def test_condition_must_be_boolean(ddb, item_table):
    validation(ddb.put_item, match=r"^Invalid ConditionExpression: ",
               TableName=item_table, Item=ITEM, ConditionExpression="size(s)")


# ------------------------------------------------------------- names / values validation

def test_undefined_value(ddb, item_table):
    validation(ddb.put_item,
               message="Invalid ConditionExpression: An expression attribute value used in expression "
                       "is not defined; attribute value: :nope",
               TableName=item_table, Item=ITEM, ConditionExpression="n = :nope",
               ExpressionAttributeValues={":v": N(1)})


def test_undefined_value_no_map(ddb, item_table):
    validation(ddb.put_item,
               message="Invalid ConditionExpression: An expression attribute value used in expression "
                       "is not defined; attribute value: :nope",
               TableName=item_table, Item=ITEM, ConditionExpression="n = :nope")


def test_undefined_name(ddb, item_table):
    validation(ddb.put_item,
               message="Invalid ConditionExpression: An expression attribute name used in the document "
                       "path is not defined; attribute name: #x",
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(#x)")


def test_unused_value(ddb, item_table):
    validation(ddb.put_item,
               message="Value provided in ExpressionAttributeValues unused in expressions: keys: {:unused}",
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(n)",
               ExpressionAttributeValues={":unused": N(1)})


def test_unused_name(ddb, item_table):
    validation(ddb.put_item,
               message="Value provided in ExpressionAttributeNames unused in expressions: keys: {#unused}",
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(n)",
               ExpressionAttributeNames={"#unused": "n"})


def test_values_without_any_expression(ddb, item_table):
    validation(ddb.put_item, match=r"^ExpressionAttributeValues can only be specified when using expressions",
               TableName=item_table, Item=ITEM, ExpressionAttributeValues={":v": N(1)})


def test_names_without_any_expression(ddb, item_table):
    validation(ddb.put_item, match=r"^ExpressionAttributeNames can only be specified when using expressions",
               TableName=item_table, Item=ITEM, ExpressionAttributeNames={"#n": "n"})


def test_same_operand_twice_rejected(ddb, item_table):
    validation(ddb.put_item,
               message="Invalid ConditionExpression: The first operand must be distinct from the remaining "
                       "operands for this operator or function; operator: =, first operand: [n]",
               TableName=item_table, Item=ITEM, ConditionExpression="n = n")


def test_empty_attribute_values_map(ddb, item_table):
    validation(ddb.put_item, message="ExpressionAttributeValues must not be empty",
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(n)",
               ExpressionAttributeValues={})


def test_empty_attribute_names_map(ddb, item_table):
    validation(ddb.put_item, message="ExpressionAttributeNames must not be empty",
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(n)",
               ExpressionAttributeNames={})


def test_attribute_names_key_syntax(ddb, item_table):
    validation(ddb.put_item, message='ExpressionAttributeNames contains invalid key: Syntax error; key: "n"',
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(n)",
               ExpressionAttributeNames={"n": "n"})


def test_attribute_values_key_syntax(ddb, item_table):
    validation(ddb.put_item, message='ExpressionAttributeValues contains invalid key: Syntax error; key: "v"',
               TableName=item_table, Item=ITEM, ConditionExpression="attribute_exists(n)",
               ExpressionAttributeValues={"v": N(1)})


def test_invalid_value_in_attribute_values(ddb, item_table):
    validation(ddb.put_item, TableName=item_table, Item=ITEM, ConditionExpression="n = :v",
               ExpressionAttributeValues={":v": {"SS": []}})


@pytest.mark.parametrize("kind,expr", [
    ("ConditionExpression", "name = :v"),
    ("ConditionExpression", "attribute_exists(status)"),
    ("ConditionExpression", "m.size = :v"),
])
def test_reserved_word_in_condition(ddb, item_table, kind, expr):
    word = {"name = :v": "name", "attribute_exists(status)": "status", "m.size = :v": "size"}[expr]
    kw = {"ExpressionAttributeValues": {":v": N(1)}} if ":v" in expr else {}
    validation(ddb.put_item,
               message=f"Invalid ConditionExpression: Attribute name is a reserved keyword; reserved keyword: {word}",
               TableName=item_table, Item=ITEM, ConditionExpression=expr, **kw)


def test_reserved_word_in_update(ddb, item_table):
    validation(ddb.update_item,
               message="Invalid UpdateExpression: Attribute name is a reserved keyword; reserved keyword: date",
               TableName=item_table, Key=K, UpdateExpression="SET date = :v",
               ExpressionAttributeValues={":v": N(1)})


def test_reserved_word_in_projection(ddb, item_table):
    validation(ddb.get_item,
               message="Invalid ProjectionExpression: Attribute name is a reserved keyword; reserved keyword: year",
               TableName=item_table, Key=K, ProjectionExpression="n, year")


def test_reserved_word_is_case_insensitive(ddb, item_table):
    validation(ddb.get_item, match=r"^Invalid ProjectionExpression: Attribute name is a reserved keyword; "
                                   r"reserved keyword: (?i:name)$",
               TableName=item_table, Key=K, ProjectionExpression="NaMe")


@pytest.mark.parametrize("expr", ["n = ", "n == :v", "(n = :v", "n = :v)", "n = :v AND", "= :v", "n :v",
                                  "n BETWEEN :v", "n IN ()", "attribute_exists(n"])
def test_condition_syntax_error(ddb, item_table, expr):
    validation(ddb.put_item, match=r"^Invalid ConditionExpression: Syntax error; token: ",
               TableName=item_table, Item=ITEM, ConditionExpression=expr,
               ExpressionAttributeValues={":v": N(1)})


def test_empty_condition_expression(ddb, item_table):
    validation(ddb.put_item, message="Invalid ConditionExpression: The expression can not be empty;",
               TableName=item_table, Item=ITEM, ConditionExpression="")


# ------------------------------------------------------------- update: SET

def test_set_new_and_existing(ddb, item_table):
    a = update(ddb, item_table, "SET newattr = :v, s = :w", {":v": S("x"), ":w": N(1)})
    assert a["newattr"] == S("x") and a["s"] == N(1)


@pytest.mark.parametrize("expr,values,expected", [
    ("SET n = n + :v", {":v": N(1)}, "6"),
    ("SET n = n - :v", {":v": N(10)}, "-5"),
    ("SET n = :a + :b", {":a": N("0.1"), ":b": N("0.2")}, "0.3"),
    ("SET n = :a - :b", {":a": N("0.3"), ":b": N("0.1")}, "0.2"),
    ("SET n = :a + :b", {":a": N("12345678901234567890123456789012345678"), ":b": N(1)},
     "12345678901234567890123456789012345679"),
    ("SET n = :a + :b", {":a": N("99999999999999999999999999999999999999"), ":b": N(1)},
     "100000000000000000000000000000000000000"),
    ("SET n = :a - :b", {":a": N("0.5"), ":b": N("0.5")}, "0"),
    ("SET n = :a + :b", {":a": N("1E+100"), ":b": N("1E+100")}, "2" + "0" * 100),
    ("SET n = :a + :b", {":a": N("-1E-100"), ":b": N("-2E-100")}, "-0." + "0" * 99 + "3"),
    ("SET n = n + n", None, "10"),
])
def test_set_arithmetic(ddb, item_table, expr, values, expected):
    assert update(ddb, item_table, expr, values)["n"] == N(expected)


def test_set_arithmetic_on_non_number(ddb, item_table):
    validation(ddb.update_item, match=r"An operand in the update expression has an incorrect data type",
               TableName=item_table, Key=K, UpdateExpression="SET s = s + :v",
               ExpressionAttributeValues={":v": N(1)})
    assert get(ddb, item_table) == ITEM


def test_set_arithmetic_on_missing_attribute(ddb, item_table):
    validation(ddb.update_item,
               match=r"The provided expression refers to an attribute that does not exist in the item",
               TableName=item_table, Key=K, UpdateExpression="SET x = nope + :v",
               ExpressionAttributeValues={":v": N(1)})


def test_set_arithmetic_overflow(ddb, item_table):
    validation(ddb.update_item, match=r"Number overflow",
               TableName=item_table, Key=K, UpdateExpression="SET n = :a + :a",
               ExpressionAttributeValues={":a": N("9.9999999999999999999999999999999999999E+125")})


def test_if_not_exists(ddb, item_table):
    a = update(ddb, item_table, "SET x = if_not_exists(nope, :d), n = if_not_exists(n, :d)", {":d": N(42)})
    assert a["x"] == N(42) and a["n"] == N(5)


def test_if_not_exists_counter(ddb, table):
    for expected in ("1", "2", "3"):
        a = update(ddb, table, "SET c = if_not_exists(c, :zero) + :one", {":zero": N(0), ":one": N(1)})
        assert a["c"] == N(expected)


def test_list_append(ddb, item_table):
    a = update(ddb, item_table, "SET l = list_append(l, :more)", {":more": {"L": [S("z")]}})
    assert a["l"]["L"][-1] == S("z") and len(a["l"]["L"]) == 4
    a = update(ddb, item_table, "SET l = list_append(:front, l)", {":front": {"L": [N(0)]}})
    assert a["l"]["L"][0] == N(0) and len(a["l"]["L"]) == 5


def test_list_append_if_not_exists(ddb, item_table):
    a = update(ddb, item_table, "SET nl = list_append(if_not_exists(nl, :e), :v)",
               {":e": {"L": []}, ":v": {"L": [S("first")]}})
    assert a["nl"] == {"L": [S("first")]}


def test_list_append_non_list(ddb, item_table):
    validation(ddb.update_item, TableName=item_table, Key=K,
               UpdateExpression="SET l = list_append(l, :v)", ExpressionAttributeValues={":v": S("x")})


def test_set_nested_paths(ddb, item_table):
    a = update(ddb, item_table, "SET m.b.c = :v, m.newkey = :w, l[2].x = :x",
               {":v": S("changed"), ":w": N(9), ":x": S("z")})
    assert a["m"] == {"M": {"a": N(1), "b": {"M": {"c": S("changed")}}, "newkey": N(9)}}
    assert a["l"]["L"][2] == {"M": {"x": S("z")}}


def test_set_list_index(ddb, item_table):
    a = update(ddb, item_table, "SET l[0] = :v", {":v": S("first")})
    assert a["l"]["L"][0] == S("first") and len(a["l"]["L"]) == 3


def test_set_list_index_past_end_appends(ddb, item_table):
    a = update(ddb, item_table, "SET l[10] = :v", {":v": S("end")})
    assert a["l"]["L"] == ITEM["l"]["L"] + [S("end")]


def test_set_nested_in_missing_parent(ddb, item_table):
    validation(ddb.update_item,
               message="The document path provided in the update expression is invalid for update",
               TableName=item_table, Key=K, UpdateExpression="SET nope.x = :v",
               ExpressionAttributeValues={":v": N(1)})
    assert get(ddb, item_table) == ITEM


def test_set_index_on_non_list(ddb, item_table):
    validation(ddb.update_item,
               message="The document path provided in the update expression is invalid for update",
               TableName=item_table, Key=K, UpdateExpression="SET s[0] = :v",
               ExpressionAttributeValues={":v": N(1)})


def test_update_key_attribute_rejected(ddb, item_table):
    validation(ddb.update_item,
               message="One or more parameter values were invalid: Cannot update attribute pk. "
                       "This attribute is part of the key",
               TableName=item_table, Key=K, UpdateExpression="SET pk = :v",
               ExpressionAttributeValues={":v": S("other")})


def test_set_with_names(ddb, item_table):
    a = update(ddb, item_table, "SET #a.#b = :v", {":v": S("x")}, {"#a": "m", "#b": "zz"})
    assert a["m"]["M"]["zz"] == S("x")


# ------------------------------------------------------------- update: REMOVE

def test_remove_attributes(ddb, item_table):
    a = update(ddb, item_table, "REMOVE s, m.b.c, nope")
    assert "s" not in a
    assert a["m"] == {"M": {"a": N(1), "b": {"M": {}}}}


def test_remove_list_elements_shifts(ddb, item_table):
    a = update(ddb, item_table, "REMOVE l[0], l[1]")
    assert a["l"] == {"L": [{"M": {"x": S("y")}}]}


def test_remove_list_index_past_end_is_noop(ddb, item_table):
    a = update(ddb, item_table, "REMOVE l[10]")
    assert a["l"] == ITEM["l"]


# ------------------------------------------------------------- update: ADD / DELETE

def test_add_number(ddb, item_table):
    assert update(ddb, item_table, "ADD n :v", {":v": N("-7.5")})["n"] == N("-2.5")


def test_add_number_creates_attribute(ddb, item_table):
    assert update(ddb, item_table, "ADD newnum :v", {":v": N(3)})["newnum"] == N(3)


def test_add_to_sets(ddb, item_table):
    a = update(ddb, item_table, "ADD ss :s, ns :n, newset :s",
               {":s": {"SS": ["y", "z"]}, ":n": {"NS": ["3", "4"]}})
    assert sorted(a["ss"]["SS"]) == ["x", "y", "z"]
    assert sorted(a["ns"]["NS"], key=float) == ["1", "2", "3", "4"]
    assert sorted(a["newset"]["SS"]) == ["y", "z"]


def test_add_wrong_types(ddb, item_table):
    validation(ddb.update_item, match="An operand in the update expression has an incorrect data type",
               TableName=item_table, Key=K, UpdateExpression="ADD s :v", ExpressionAttributeValues={":v": N(1)})
    validation(ddb.update_item, match="An operand in the update expression has an incorrect data type",
               TableName=item_table, Key=K, UpdateExpression="ADD ss :v",
               ExpressionAttributeValues={":v": {"NS": ["1"]}})


def test_add_list_value_rejected(ddb, item_table):
    validation(ddb.update_item, TableName=item_table, Key=K, UpdateExpression="ADD l :v",
               ExpressionAttributeValues={":v": {"L": [S("x")]}})


def test_delete_from_set(ddb, item_table):
    a = update(ddb, item_table, "DELETE ss :s, ns :n, nope :s",
               {":s": {"SS": ["x", "q"]}, ":n": {"NS": ["2"]}})
    assert a["ss"] == {"SS": ["y"]}
    assert sorted(a["ns"]["NS"]) == ["1", "3"]
    assert "nope" not in a


def test_delete_last_members_removes_attribute(ddb, item_table):
    a = update(ddb, item_table, "DELETE ss :s", {":s": {"SS": ["x", "y"]}})
    assert "ss" not in a


def test_delete_non_set_operand_rejected(ddb, item_table):
    validation(ddb.update_item, TableName=item_table, Key=K, UpdateExpression="DELETE ss :v",
               ExpressionAttributeValues={":v": S("x")})


def test_all_clauses_together(ddb, item_table):
    a = update(ddb, item_table, "SET a = :a REMOVE s ADD n :one DELETE ss :x",
               {":a": S("A"), ":one": N(1), ":x": {"SS": ["x"]}})
    assert a["a"] == S("A") and "s" not in a and a["n"] == N(6) and a["ss"] == {"SS": ["y"]}


def test_clauses_in_any_order(ddb, item_table):
    a = update(ddb, item_table, "REMOVE s SET a = :a", {":a": S("A")})
    assert a["a"] == S("A") and "s" not in a


def test_update_with_condition(ddb, item_table):
    update(ddb, item_table, "SET n = n + :one", {":one": N(1), ":five": N(5)}, ConditionExpression="n = :five")
    expect_error(ddb.update_item, "ConditionalCheckFailedException", TableName=item_table, Key=K,
                 UpdateExpression="SET n = n + :one", ConditionExpression="n = :five",
                 ExpressionAttributeValues={":one": N(1), ":five": N(5)})
    assert get(ddb, item_table)["n"] == N(6)


# ------------------------------------------------------------- update expression errors

@pytest.mark.parametrize("expr,p1,p2", [
    ("SET m.a = :v REMOVE m", "[m, a]", "[m]"),
    ("SET a = :v, a = :v", "[a]", "[a]"),
    ("SET l[0] = :v REMOVE l[0]", "[l, [0]]", "[l, [0]]"),
])
def test_overlapping_paths(ddb, item_table, expr, p1, p2):
    validation(ddb.update_item,
               message="Invalid UpdateExpression: Two document paths overlap with each other; must remove "
                       f"or rewrite one of these paths; path one: {p1}, path two: {p2}",
               TableName=item_table, Key=K, UpdateExpression=expr, ExpressionAttributeValues={":v": N(1)})


def test_conflicting_paths(ddb, item_table):
    validation(ddb.update_item,
               message="Invalid UpdateExpression: Two document paths conflict with each other; must remove "
                       "or rewrite one of these paths; path one: [m, a], path two: [m, [0]]",
               TableName=item_table, Key=K, UpdateExpression="SET m.a = :v, m[0] = :v",
               ExpressionAttributeValues={":v": N(1)})


def test_repeated_clause(ddb, item_table):
    validation(ddb.update_item,
               message='Invalid UpdateExpression: The "SET" section can only be used once in an update expression;',
               TableName=item_table, Key=K, UpdateExpression="SET a = :v SET b = :v",
               ExpressionAttributeValues={":v": N(1)})


@pytest.mark.parametrize("expr", ["SET a :v", "SET", "SET a = ", "REMOVE", "ADD a", "SET a = :v,",
                                  "UPDATE a = :v", "SET a = :v + ", "DELETE :v a"])
def test_update_syntax_error(ddb, item_table, expr):
    kw = {"ExpressionAttributeValues": {":v": N(1)}} if ":v" in expr else {}
    validation(ddb.update_item, match=r"^Invalid UpdateExpression: Syntax error; token: ",
               TableName=item_table, Key=K, UpdateExpression=expr, **kw)


def test_update_function_not_allowed_in_condition(ddb, item_table):
    validation(ddb.put_item, match=r"^Invalid ConditionExpression: ",
               TableName=item_table, Item=ITEM, ConditionExpression="if_not_exists(n, :v) = :v",
               ExpressionAttributeValues={":v": N(1)})


def test_condition_function_not_allowed_in_update(ddb, item_table):
    validation(ddb.update_item, match=r"^Invalid UpdateExpression: ",
               TableName=item_table, Key=K, UpdateExpression="SET a = attribute_exists(n)")


# ------------------------------------------------------------- projection

@pytest.mark.parametrize("proj,names,expected", [
    ("s, n", None, {"s": S("hello"), "n": N(5)}),
    ("m.b.c", None, {"m": {"M": {"b": {"M": {"c": S("deep")}}}}}),
    ("l[2].x", None, {"l": {"L": [{"M": {"x": S("y")}}]}}),
    ("l[0], l[2]", None, {"l": {"L": [S("a"), {"M": {"x": S("y")}}]}}),
    ("l[1], m.a, pk", None, {"l": {"L": [N(1)]}, "m": {"M": {"a": N(1)}}, "pk": S("k")}),
    ("#m.#a, #s", {"#m": "m", "#a": "a", "#s": "s"}, {"m": {"M": {"a": N(1)}}, "s": S("hello")}),
    ("nope, s", None, {"s": S("hello")}),
    ("nope", None, {}),
    ("l[9]", None, {}),
    ("m.zz", None, {}),
    ("ss, bs", None, {"ss": {"SS": ["x", "y"]}, "bs": {"BS": [b"1"]}}),
])
def test_projection(ddb, item_table, proj, names, expected):
    kw = {"ProjectionExpression": proj}
    if names:
        kw["ExpressionAttributeNames"] = names
    item = get(ddb, item_table, **kw)
    if "ss" in expected:
        item["ss"]["SS"].sort()
    assert item == expected


def test_projection_overlap(ddb, item_table):
    validation(ddb.get_item,
               message="Invalid ProjectionExpression: Two document paths overlap with each other; must "
                       "remove or rewrite one of these paths; path one: [m], path two: [m, a]",
               TableName=item_table, Key=K, ProjectionExpression="m, m.a")


def test_projection_syntax_error(ddb, item_table):
    validation(ddb.get_item, match=r"^Invalid ProjectionExpression: Syntax error; token: ",
               TableName=item_table, Key=K, ProjectionExpression="s,, n")


def test_projection_undefined_name(ddb, item_table):
    validation(ddb.get_item,
               message="Invalid ProjectionExpression: An expression attribute name used in the document "
                       "path is not defined; attribute name: #z",
               TableName=item_table, Key=K, ProjectionExpression="#z")


def test_update_return_values_with_nested_projection_unchanged(ddb, item_table):
    a = ddb.update_item(TableName=item_table, Key=K, UpdateExpression="SET m.a = :v",
                        ExpressionAttributeValues={":v": N(2)}, ReturnValues="UPDATED_OLD")["Attributes"]
    assert a == {"m": {"M": {"a": N(1)}}}


# ------------------------------------------------ parsing stays linear-time
# A few dozen unmatched "(" once took time doubling every two parentheses
# (100 of them pinned a core for minutes). Every expression kind must be
# rejected at once; the client's read timeout (60 s) bounds a regression.

DEEP = ["(" * n for n in (40, 100, 4000)] + ["(" * 2000 + "a = :v" + ")" * 2000]


@pytest.mark.parametrize("expr", DEEP, ids=lambda e: f"{len(e)}B")
def test_deep_parentheses_condition_rejected_quickly(ddb, item_table, expr):
    validation(ddb.put_item, TableName=item_table, Item=ITEM, ConditionExpression=expr,
               ExpressionAttributeValues={":v": S("x")}, match="Invalid ConditionExpression")


@pytest.mark.parametrize("expr", DEEP, ids=lambda e: f"{len(e)}B")
def test_deep_parentheses_filter_and_key_condition_rejected_quickly(ddb, item_table, expr):
    validation(ddb.scan, TableName=item_table, FilterExpression=expr,
               ExpressionAttributeValues={":v": S("x")}, match="Invalid FilterExpression")
    validation(ddb.query, TableName=item_table, KeyConditionExpression=expr,
               ExpressionAttributeValues={":v": S("x")}, match="Invalid KeyConditionExpression")


@pytest.mark.parametrize("expr", ["SET a = " + "(" * n for n in (40, 100, 4000)], ids=lambda e: f"{len(e)}B")
def test_deep_parentheses_update_rejected_quickly(ddb, item_table, expr):
    validation(ddb.update_item, TableName=item_table, Key=K, UpdateExpression=expr,
               match="Invalid UpdateExpression")


def test_nested_parentheses_still_parse(ddb, item_table):
    # Parenthesized conditions and operands keep working after the rewrite.
    assert cond(ddb, item_table, "((s) = :v) AND (n = :n OR (size(s) > :n))", {":v": S("hello"), ":n": N(5)})
    assert not cond(ddb, item_table, "(size(s)) = :n", {":n": N(6)})
    assert cond(ddb, item_table, "(size(s)) = :n", {":n": N(5)})
    validation(ddb.put_item, TableName=item_table, Item=ITEM, ConditionExpression="((s)) = :v",
               ExpressionAttributeValues={":v": S("hello")},
               message="Invalid ConditionExpression: The expression has redundant parentheses;")
    update(ddb, item_table, "SET n = (:a) + :b, c = (:a + :b)", {":a": N(2), ":b": N(3)})
    got = get(ddb, item_table)
    assert got["n"] == N(5) and got["c"] == N(5)
