"""DynamoDB fidelity of the expression languages and their legacy forms:
which parameter mixes are valid, which operands functions take, type
checks on constant operands, token rules, limits and message wording.

Expected messages are DynamoDB's (API reference, developer guide, and
messages the service returns as quoted by its users)."""

import pytest

from wire_helpers import cond, validation

MIX = "Can not use both expression and non-expression parameters in the same request: "


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def L(*v):
    return {"L": list(v)}


@pytest.fixture
def qtable(ddb, table_hr):
    for i in range(4):
        ddb.put_item(TableName=table_hr, Item={"pk": S("p"), "sk": S(f"s{i}"), "v": N(i), "s": S(f"x{i}")})
    return table_hr


def sks(res):
    return [i["sk"]["S"] for i in res["Items"]]


# ------------------------------------------------ legacy beside expressions

def test_key_conditions_with_filter_expression(ddb, qtable):
    # KeyConditions may be combined with a FilterExpression when no
    # KeyConditionExpression is given.
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))},
                    FilterExpression="v >= :x", ExpressionAttributeValues={":x": N(2)})
    assert sks(res) == ["s2", "s3"]
    assert res["ScannedCount"] == 4


def test_key_conditions_with_projection_expression(ddb, qtable):
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p")), "sk": cond("EQ", S("s1"))},
                    ProjectionExpression="#v", ExpressionAttributeNames={"#v": "v"})
    assert res["Items"] == [{"v": N(1)}]


def test_key_conditions_with_filter_and_projection(ddb, qtable):
    res = ddb.query(TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))},
                    FilterExpression="v < :x", ProjectionExpression="sk",
                    ExpressionAttributeValues={":x": N(1)})
    assert res["Items"] == [{"sk": S("s0")}]


def test_key_conditions_with_key_condition_expression_names_both(ddb, qtable):
    validation(ddb.query, message=MIX + "Non-expression parameters: {KeyConditions} Expression parameters: {KeyConditionExpression}",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))},
               KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("p")})


def test_query_mix_lists_every_parameter_in_service_order(ddb, qtable):
    validation(ddb.query,
               message=MIX + "Non-expression parameters: {AttributesToGet, QueryFilter, ConditionalOperator, KeyConditions} "
                             "Expression parameters: {ProjectionExpression, FilterExpression, KeyConditionExpression}",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))}, QueryFilter={"v": cond("GE", N(1))},
               ConditionalOperator="AND", AttributesToGet=["v"],
               KeyConditionExpression="pk = :p", FilterExpression="v > :p", ProjectionExpression="v",
               ExpressionAttributeValues={":p": S("p")})


def test_query_filter_with_key_condition_expression(ddb, qtable):
    validation(ddb.query, message=MIX + "Non-expression parameters: {QueryFilter} Expression parameters: {KeyConditionExpression}",
               TableName=qtable, KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("p")},
               QueryFilter={"v": cond("GE", N(1))})


def test_key_conditions_with_filter_and_query_filter(ddb, qtable):
    # KeyConditions is not named (it is allowed here); QueryFilter is.
    validation(ddb.query, message=MIX + "Non-expression parameters: {QueryFilter} Expression parameters: {FilterExpression}",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))}, QueryFilter={"v": cond("GE", N(1))},
               FilterExpression="v > :x", ExpressionAttributeValues={":x": N(1)})


def test_scan_mix_names_conditional_operator(ddb, qtable):
    validation(ddb.scan, message=MIX + "Non-expression parameters: {ConditionalOperator} Expression parameters: {FilterExpression}",
               TableName=qtable, ConditionalOperator="OR", FilterExpression="v > :x",
               ExpressionAttributeValues={":x": N(1)})


def test_update_mix_names_only_what_is_present(ddb, qtable):
    validation(ddb.update_item, message=MIX + "Non-expression parameters: {Expected} Expression parameters: {UpdateExpression}",
               TableName=qtable, Key={"pk": S("p"), "sk": S("s0")}, UpdateExpression="SET v = :x",
               ExpressionAttributeValues={":x": N(1)}, Expected={"v": {"Value": N(0)}})


def test_values_without_value_expression(ddb, qtable):
    validation(ddb.query, message="ExpressionAttributeValues can only be specified when using expressions: "
                                  "FilterExpression and KeyConditionExpression are null",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))}, ProjectionExpression="v",
               ExpressionAttributeValues={":x": N(1)})
    validation(ddb.scan, message="ExpressionAttributeValues can only be specified when using expressions: FilterExpression is null",
               TableName=qtable, ExpressionAttributeValues={":x": N(1)})
    validation(ddb.update_item, message="ExpressionAttributeValues can only be specified when using expressions: "
                                        "UpdateExpression and ConditionExpression are null",
               TableName=qtable, Key={"pk": S("p"), "sk": S("s0")}, AttributeUpdates={"v": {"Value": N(1)}},
               ExpressionAttributeValues={":x": N(1)})
    validation(ddb.delete_item, message="ExpressionAttributeValues can only be specified when using expressions: ConditionExpression is null",
               TableName=qtable, Key={"pk": S("p"), "sk": S("s0")}, ExpressionAttributeValues={":x": N(1)})


def test_names_without_expression(ddb, qtable):
    validation(ddb.query, message="ExpressionAttributeNames can only be specified when using expressions",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p"))}, ExpressionAttributeNames={"#v": "v"})


# ------------------------------------------------ functions on values

@pytest.fixture
def item(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("k"), "s": S("hello"), "n": N(5), "l": L(S("x"), N(1)),
                                        "ss": {"SS": ["a", "b"]}})
    return table


def put_if(ddb, table, condition, values=None, names=None):
    kw = {"ConditionExpression": condition}
    if values:
        kw["ExpressionAttributeValues"] = values
    if names:
        kw["ExpressionAttributeNames"] = names
    return ddb.put_item(TableName=table, Item={"pk": S("k"), "s": S("hello"), "n": N(5)}, **kw)


def test_size_of_a_value(ddb, item):
    put_if(ddb, item, "size(:v) = :three", {":v": S("abc"), ":three": N(3)})
    put_if(ddb, item, "size(:l) < n", {":l": L(S("a"), S("b"))})
    validation(put_if, message="Invalid ConditionExpression: Incorrect operand type for operator or function; "
                               "operator or function: size, operand type: N",
               ddb=ddb, table=item, condition="size(:v) > :v", values={":v": N(1)})


def test_attribute_type_of_a_value(ddb, item):
    put_if(ddb, item, "attribute_type(:v, :t)", {":v": S("x"), ":t": S("S")})
    ddb.put_item(TableName=item, Item={"pk": S("k"), "s": S("hello"), "n": N(5)})  # restore
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        put_if(ddb, item, "attribute_type(:v, :t)", {":v": S("x"), ":t": S("N")})


def test_begins_with_and_contains_value_first(ddb, item):
    put_if(ddb, item, "begins_with(:v, s)", {":v": S("hello world")})
    put_if(ddb, item, "contains(:set, s)", {":set": {"SS": ["hello", "bye"]}})
    res = ddb.scan(TableName=item, FilterExpression="contains(:l, n)", ExpressionAttributeValues={":l": L(N(5), N(6))})
    assert res["Count"] == 1


# ------------------------------------------------ constant operand types

@pytest.mark.parametrize("op,value,typ", [
    ("<", L(S("x")), "L"), ("<=", {"M": {}}, "M"), (">", {"BOOL": True}, "BOOL"),
    (">=", {"NULL": True}, "NULL"), ("<", {"SS": ["a"]}, "SS"),
])
def test_ordering_a_constant_of_unordered_type_is_invalid(ddb, item, op, value, typ):
    msg = f"Incorrect operand type for operator or function; operator or function: {op}, operand type: {typ}"
    validation(put_if, message="Invalid ConditionExpression: " + msg,
               ddb=ddb, table=item, condition=f"n {op} :v", values={":v": value})
    validation(ddb.scan, message="Invalid FilterExpression: " + msg,
               TableName=item, FilterExpression=f"n {op} :v", ExpressionAttributeValues={":v": value})


def test_between_a_constant_of_unordered_type_is_invalid(ddb, item):
    validation(ddb.scan, message="Invalid FilterExpression: Incorrect operand type for operator or function; "
                                 "operator or function: BETWEEN, operand type: L",
               TableName=item, FilterExpression="n BETWEEN :a AND :b",
               ExpressionAttributeValues={":a": L(), ":b": L(N(1))})


def test_equality_takes_any_type(ddb, item):
    put_if(ddb, item, "l = :l AND ss <> :m", {":l": L(S("x"), N(1)), ":m": {"M": {}}})


@pytest.mark.parametrize("op,args,typ", [
    ("LT", [L(S("x"))], "L"), ("GE", [{"BOOL": True}], "BOOL"), ("BETWEEN", [{"SS": ["a"]}, {"SS": ["b"]}], "SS"),
    ("BEGINS_WITH", [N(1)], "N"), ("CONTAINS", [{"M": {}}], "M"), ("IN", [{"NULL": True}], "NULL"),
])
def test_legacy_operator_type_is_checked(ddb, item, op, args, typ):
    msg = f"One or more parameter values were invalid: ComparisonOperator {op} is not valid for {typ} AttributeValue type"
    validation(ddb.put_item, message=msg, TableName=item, Item={"pk": S("k")},
               Expected={"n": cond(op, *args)})
    validation(ddb.scan, message=msg, TableName=item, ScanFilter={"n": cond(op, *args)})


def test_legacy_values_must_share_a_type(ddb, item):
    validation(ddb.scan, message="One or more parameter values were invalid: AttributeValues inside AttributeValueList must be of same type",
               TableName=item, ScanFilter={"n": cond("IN", N(1), S("1"))})


def test_legacy_between_bounds(ddb, qtable):
    msg = "The BETWEEN condition was provided a range where the lower bound is greater than the upper bound"
    validation(ddb.scan, message=msg, TableName=qtable, ScanFilter={"v": cond("BETWEEN", N(3), N(1))})
    validation(ddb.query, message=msg, TableName=qtable,
               KeyConditions={"pk": cond("EQ", S("p")), "sk": cond("BETWEEN", S("s3"), S("s1"))})


def test_key_conditions_errors_use_legacy_wording(ddb, qtable):
    validation(ddb.query, message="One or more parameter values were invalid: ComparisonOperator BEGINS_WITH is not valid for N AttributeValue type",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p")), "sk": cond("BEGINS_WITH", N(1))})


def test_legacy_equality_takes_a_list(ddb, item):
    res = ddb.scan(TableName=item, ScanFilter={"l": cond("EQ", L(S("x"), N(1)))})
    assert res["Count"] == 1


# ------------------------------------------------ limits

def test_operator_limit(ddb, item):
    # 299 operators (150 "<" and 149 OR) are allowed; DynamoDB stops
    # counting at the 301st and names that count.
    ok = "n < :v" + " OR n < :v" * 149
    put_if(ddb, item, ok, {":v": N(9)})
    bad = "n < :v" + " OR n < :v" * 150
    validation(put_if, message="Invalid ConditionExpression: The expression contains too many operators; operator count: 301",
               ddb=ddb, table=item, condition=bad, values={":v": N(9)})
    validation(ddb.scan, message="Invalid FilterExpression: The expression contains too many operators; operator count: 301",
               TableName=item, FilterExpression="NOT " * 301 + "n = :v", ExpressionAttributeValues={":v": N(9)})


# ------------------------------------------------ tokens and syntax errors

def test_name_starting_with_underscore_is_a_syntax_error(ddb, item):
    # A name in an expression starts with a letter; "_123" needs a
    # placeholder. The message quotes the token and its neighbours.
    validation(ddb.update_item, message='Invalid UpdateExpression: Syntax error; token: "_", near: "SET _123"',
               TableName=item, Key={"pk": S("k")}, UpdateExpression="SET _123 = :v", ExpressionAttributeValues={":v": N(1)})
    validation(ddb.scan, message='Invalid FilterExpression: Syntax error; token: "_", near: "_type"',
               TableName=item, FilterExpression="_type = :v", ExpressionAttributeValues={":v": N(1)})
    ddb.update_item(TableName=item, Key={"pk": S("k")}, UpdateExpression="SET #u = :v, a_1 = :v",
                    ExpressionAttributeNames={"#u": "_123"}, ExpressionAttributeValues={":v": N(1)})
    assert ddb.get_item(TableName=item, Key={"pk": S("k")})["Item"]["_123"] == N(1)


@pytest.mark.parametrize("kind,expression,token,near", [
    ("ConditionExpression", "a-b", "-", "a-b"),
    ("UpdateExpression", "ADD hits : incr", ":", "hits : incr"),
    ("UpdateExpression", "SET  REMOVE #o", "REMOVE", "SET  REMOVE #o"),
    ("UpdateExpression", "INVALID SYNTAX HERE", "INVALID", "INVALID SYNTAX"),
    ("ConditionExpression", "attribute_exists(pk) AND NOT #o", "<EOF>", "#o"),
])
def test_syntax_error_quotes_the_neighbouring_tokens(ddb, item, kind, expression, token, near):
    kw = {kind: expression}
    if "#o" in expression:
        kw["ExpressionAttributeNames"] = {"#o": "o"}
    if kind == "ConditionExpression":
        kw["UpdateExpression"] = "SET z = :z"
        kw["ExpressionAttributeValues"] = {":z": N(1)}
    validation(ddb.update_item, message=f'Invalid {kind}: Syntax error; token: "{token}", near: "{near}"',
               TableName=item, Key={"pk": S("k")}, **kw)


# ------------------------------------------------ nested list_append

def test_nested_list_append(ddb, item):
    ddb.update_item(TableName=item, Key={"pk": S("k")},
                    UpdateExpression="SET l = list_append(if_not_exists(l, :e), list_append(:a, :b)), m = list_append(if_not_exists(m, :e), :a)",
                    ExpressionAttributeValues={":e": L(), ":a": L(N(2)), ":b": L(N(3))})
    got = ddb.get_item(TableName=item, Key={"pk": S("k")})["Item"]
    assert got["l"] == L(S("x"), N(1), N(2), N(3))
    assert got["m"] == L(N(2))
    validation(ddb.update_item, message="Invalid UpdateExpression: Incorrect operand type for operator or function; "
                                        "operator or function: list_append, operand type: S",
               TableName=item, Key={"pk": S("k")}, UpdateExpression="SET l = list_append(l, list_append(:s, l))",
               ExpressionAttributeValues={":s": S("x")})
    validation(ddb.update_item, message="Invalid UpdateExpression: Incorrect operand type for operator or function; "
                                        "operator or function: +, operand type: L",
               TableName=item, Key={"pk": S("k")}, UpdateExpression="SET n = n + list_append(l, :a)",
               ExpressionAttributeValues={":a": L(N(1))})


def test_attribute_name_and_placeholder_lengths(ddb, item):
    ok = "x" * 65535
    ddb.update_item(TableName=item, Key={"pk": S("k")}, UpdateExpression="SET #n = :v",
                    ExpressionAttributeNames={"#n": ok}, ExpressionAttributeValues={":v": N(1)})
    validation(ddb.update_item, message="1 validation error detected: Attribute name is too large, must be less than 65536 bytes",
               TableName=item, Key={"pk": S("k")}, UpdateExpression="SET #n = :v",
               ExpressionAttributeNames={"#n": ok + "x"}, ExpressionAttributeValues={":v": N(1)})
    p255 = ":" + "v" * 254
    ddb.update_item(TableName=item, Key={"pk": S("k")}, UpdateExpression="SET n = " + p255,
                    ExpressionAttributeValues={p255: N(1)})
    validation(ddb.update_item, match="^ExpressionAttributeValues contains invalid key: ",
               TableName=item, Key={"pk": S("k")}, UpdateExpression="SET n = " + p255 + "v",
               ExpressionAttributeValues={p255 + "v": N(1)})


@pytest.mark.parametrize("c", [cond("NE", S("s1")), cond("IN", S("s1")), cond("NULL"), cond("CONTAINS", S("s"))])
def test_key_conditions_non_indexable_operator(ddb, qtable, c):
    validation(ddb.query, message="Attempted conditional constraint is not an indexable operation",
               TableName=qtable, KeyConditions={"pk": cond("EQ", S("p")), "sk": c})
