"""DynamoDB fidelity of the expression languages and their legacy forms:
which parameter mixes are valid, which operands functions take, type
checks on constant operands, token rules, limits and message wording.

Expected messages are DynamoDB's (API reference, developer guide, and
messages the service returns as quoted by its users)."""

import pytest

from wire_helpers import validation

MIX = "Can not use both expression and non-expression parameters in the same request: "


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def L(*v):
    return {"L": list(v)}


def cond(op, *vals):
    d = {"ComparisonOperator": op}
    if vals:
        d["AttributeValueList"] = list(vals)
    return d


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
