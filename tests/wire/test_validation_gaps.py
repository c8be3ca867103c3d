"""Validation of inputs an adversarial client sends (names, limits and
shapes DynamoDB checks before any work), tag rules (characters allowed, lengths in characters) and the message of
UnknownOperationException. Each answer is DynamoDB's error shape."""

import pytest

from wire_helpers import check_crc, expect_error, raw_call, raw_post, validation

T = "DynamoDB_20120810."
UNKNOWN_OP = "com.amazon.coral.service#UnknownOperationException"


def arn_of(ddb, table):
    return ddb.describe_table(TableName=table)["Table"]["TableArn"]


# ------------------------------------------------------------ attribute names

@pytest.mark.parametrize("item", [
    pytest.param({"": {"S": "v"}}, id="top-level"),
    pytest.param({"m": {"M": {"": {"S": "v"}}}}, id="map-key"),
    pytest.param({"l": {"L": [{"M": {"": {"N": "1"}}}]}}, id="map-key-in-list"),
])
def test_empty_attribute_name_in_item(ddb_raw, table, item):
    validation(ddb_raw.put_item, match="Empty attribute name", TableName=table,
               Item={"pk": {"S": "p"}, **item})
    assert "Item" not in ddb_raw.get_item(TableName=table, Key={"pk": {"S": "p"}})


def test_empty_expression_attribute_name_value(ddb_raw, table):
    validation(ddb_raw.get_item,
               message="ExpressionAttributeNames contains invalid value: Empty attribute name for key #a",
               TableName=table, Key={"pk": {"S": "p"}}, ProjectionExpression="#a",
               ExpressionAttributeNames={"#a": ""})
    validation(ddb_raw.update_item,
               message="ExpressionAttributeNames contains invalid value: Empty attribute name for key #a",
               TableName=table, Key={"pk": {"S": "p"}}, UpdateExpression="SET #a = :v",
               ExpressionAttributeNames={"#a": ""}, ExpressionAttributeValues={":v": {"S": "x"}})
    assert "Item" not in ddb_raw.get_item(TableName=table, Key={"pk": {"S": "p"}})


def test_attribute_name_length_limit(ddb_raw, table):
    """Non-key attribute names: 65535 bytes is the last accepted length."""
    longest = "n" * 65535
    ddb_raw.put_item(TableName=table, Item={"pk": {"S": "ok"}, longest: {"N": "1"}})
    got = ddb_raw.get_item(TableName=table, Key={"pk": {"S": "ok"}}, ConsistentRead=True)["Item"]
    assert got[longest] == {"N": "1"}
    too_long = "n" * 65536
    validation(ddb_raw.put_item, match="65536", TableName=table,
               Item={"pk": {"S": "bad"}, too_long: {"N": "1"}})
    validation(ddb_raw.put_item, match="65536", TableName=table,
               Item={"pk": {"S": "bad"}, "m": {"M": {too_long: {"N": "1"}}}})
    validation(ddb_raw.update_item, match="65536", TableName=table, Key={"pk": {"S": "bad"}},
               UpdateExpression="SET #a = :v", ExpressionAttributeNames={"#a": too_long},
               ExpressionAttributeValues={":v": {"N": "1"}})
    assert "Item" not in ddb_raw.get_item(TableName=table, Key={"pk": {"S": "bad"}})


@pytest.mark.parametrize("name,match", [("", "Empty attribute name"), ("n" * 65536, "must be less than 65536 bytes")],
                         ids=["empty", "65536-bytes"])
def test_legacy_parameter_attribute_names(ddb_raw, table, name, match):
    """Names in the legacy parameters get the same limits, worded for
    attribute names (not for the placeholders they are translated to)."""
    calls = [
        (ddb_raw.get_item, dict(Key={"pk": {"S": "p"}}, AttributesToGet=[name])),
        (ddb_raw.scan, dict(ScanFilter={name: {"ComparisonOperator": "NOT_NULL"}})),
        (ddb_raw.put_item, dict(Item={"pk": {"S": "p"}}, Expected={name: {"Exists": False}})),
        (ddb_raw.update_item, dict(Key={"pk": {"S": "p"}},
                                   AttributeUpdates={name: {"Action": "PUT", "Value": {"S": "v"}}})),
        (ddb_raw.query, dict(KeyConditions={"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "p"}]}},
                             QueryFilter={name: {"ComparisonOperator": "NOT_NULL"}})),
    ]
    for fn, kw in calls:
        info = validation(fn, match=match, TableName=table, **kw)
        assert "#l" not in info.message and "ExpressionAttributeNames" not in info.message, info
    assert "Item" not in ddb_raw.get_item(TableName=table, Key={"pk": {"S": "p"}})


# ------------------------------------------------------------------ Limit

@pytest.mark.parametrize("op", ["query", "scan"])
def test_limit_beyond_int32(ddb_raw, table, op):
    kw = dict(TableName=table, Limit=2147483648)
    if op == "query":
        kw.update(KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": {"S": "p"}})
    validation(getattr(ddb_raw, op),
               message="1 validation error detected: Value '2147483648' at 'limit' failed to satisfy "
                       "constraint: Member must have value less than or equal to 2147483647", **kw)
    kw["Limit"] = 2147483647
    getattr(ddb_raw, op)(**kw)


# ------------------------------------------------------- ExclusiveStartKey

def test_scan_exclusive_start_key_too_large(ddb_raw, table):
    big = {"pk": {"S": "k" * 5000}}
    q = validation(ddb_raw.query, TableName=table, KeyConditionExpression="pk = :p",
                   ExpressionAttributeValues={":p": {"S": "p"}}, ExclusiveStartKey=big)
    s = validation(ddb_raw.scan, TableName=table, ExclusiveStartKey=big)
    assert s.message == q.message == \
        "One or more parameter values were invalid: Size of hashkey has exceeded the maximum size limit of2048 bytes"


def test_scan_exclusive_start_range_key_too_large(ddb_raw, table_hr):
    validation(ddb_raw.scan, TableName=table_hr,
               message="One or more parameter values were invalid: Aggregated size of all range keys "
                       "has exceeded the size limit of 1024 bytes",
               ExclusiveStartKey={"pk": {"S": "p"}, "sk": {"S": "s" * 1025}})


# ------------------------------------------------------------------ tags

def test_tag_resource_empty_list(ddb_raw, table):
    validation(ddb_raw.tag_resource, message="Atleast one Tag needs to be provided as Input.",
               ResourceArn=arn_of(ddb_raw, table), Tags=[])


def test_untag_resource_empty_list(ddb_raw, table):
    validation(ddb_raw.untag_resource, message="Atleast one Tag Key needs to be provided as Input.",
               ResourceArn=arn_of(ddb_raw, table), TagKeys=[])


@pytest.mark.parametrize("key,value,message", [
    ("ok", "#!%^$&", "The Tag Value provided is invalid, Value: #!%^$&"),
    ("->>;-)])", "ok", "The Tag Key provided is invalid, Key: ->>;-)])"),
    ("a<b", "ok", "The Tag Key provided is invalid, Key: a<b"),
    ("ok", "a\tb", "The Tag Value provided is invalid, Value: a\tb"),
    ("ok", "x@y", "The Tag Value provided is invalid, Value: x@y"),
    ("aws:owner", "x", "Tag Key cannot be prefixed with aws:, Key: aws:owner"),
])
def test_tag_forbidden_characters(ddb_raw, table, key, value, message):
    arn = arn_of(ddb_raw, table)
    validation(ddb_raw.tag_resource, message=message, ResourceArn=arn, Tags=[{"Key": key, "Value": value}])
    assert ddb_raw.list_tags_of_resource(ResourceArn=arn)["Tags"] == []


def test_tag_value_missing(endpoint, ddb, table):
    """A Tag without Value (an SDK would refuse to send it): raw request."""
    arn = arn_of(ddb, table)
    r = raw_call(endpoint, "TagResource", {"ResourceArn": arn, "Tags": [{"Key": "k"}]})
    assert r.status == 400, r
    assert r.json() == {"__type": "com.amazon.coral.validate#ValidationException",
                        "message": "The Tag Value provided is invalid, Value: null"}, r


def test_tag_forbidden_characters_at_create_table(ddb_raw, table_name):
    validation(ddb_raw.create_table, message="The Tag Key provided is invalid, Key: a{b}",
               TableName=table_name, BillingMode="PAY_PER_REQUEST",
               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
               Tags=[{"Key": "a{b}", "Value": "v"}])
    expect_error(ddb_raw.describe_table, "ResourceNotFoundException", TableName=table_name)


def test_tag_allowed_characters(ddb_raw, table):
    arn = arn_of(ddb_raw, table)
    tags = [{"Key": "env name", "Value": "a+b-c=d.e_f:g/h"}, {"Key": "ключ", "Value": "値 ٣"}]
    ddb_raw.tag_resource(ResourceArn=arn, Tags=tags)
    got = ddb_raw.list_tags_of_resource(ResourceArn=arn)["Tags"]
    assert sorted(got, key=lambda t: t["Key"]) == sorted(tags, key=lambda t: t["Key"])


def test_tag_lengths_count_characters_not_bytes(ddb_raw, table):
    arn = arn_of(ddb_raw, table)
    key, value = "é" * 128, "中" * 256  # 256 and 768 bytes
    ddb_raw.tag_resource(ResourceArn=arn, Tags=[{"Key": key, "Value": value}])
    assert ddb_raw.list_tags_of_resource(ResourceArn=arn)["Tags"] == [{"Key": key, "Value": value}]
    validation(ddb_raw.tag_resource, match="at 'tags.1.member.key' failed to satisfy constraint: "
               "Member must have length less than or equal to 128",
               ResourceArn=arn, Tags=[{"Key": "é" * 129, "Value": "v"}])
    validation(ddb_raw.tag_resource, match="at 'tags.2.member.value' failed to satisfy constraint: "
               "Member must have length less than or equal to 256",
               ResourceArn=arn, Tags=[{"Key": "a", "Value": "b"}, {"Key": "k", "Value": "中" * 257}])
    ddb_raw.untag_resource(ResourceArn=arn, TagKeys=[key])
    assert ddb_raw.list_tags_of_resource(ResourceArn=arn)["Tags"] == []


def test_tag_duplicate_keys(ddb_raw, table):
    arn = arn_of(ddb_raw, table)
    validation(ddb_raw.tag_resource,
               message="Duplicate Tag Keys provided as input: Duplicate Tag Key found k",
               ResourceArn=arn, Tags=[{"Key": "k", "Value": "1"}, {"Key": "k", "Value": "2"}])


def test_tag_count_limit(ddb_raw, table):
    arn = arn_of(ddb_raw, table)
    ddb_raw.tag_resource(ResourceArn=arn, Tags=[{"Key": f"k{i}", "Value": "v"} for i in range(40)])
    validation(ddb_raw.tag_resource,
               message="Number of Tags exceed the current limit for the provided ResourceArn",
               ResourceArn=arn, Tags=[{"Key": f"n{i}", "Value": "v"} for i in range(11)])
    assert len(ddb_raw.list_tags_of_resource(ResourceArn=arn)["Tags"]) == 40


def test_resourcarn_is_dynamodbs_spelling(ddb_raw, table):
    """DynamoDB's not-found message for tag operations reads "ResourcArn";
    clients match on it, so it is kept letter for letter."""
    arn = arn_of(ddb_raw, table).replace(":us-east-1:", ":eu-west-1:")
    expect_error(ddb_raw.list_tags_of_resource, "ResourceNotFoundException",
                 message=f"Requested resource not found: ResourcArn: {arn} not found", ResourceArn=arn)


# ------------------------------------------------------- legacy IN operands

def test_scan_filter_in_over_100_values(ddb_raw, table):
    vals = [{"S": str(i)} for i in range(101)]
    info = validation(ddb_raw.scan, TableName=table,
                      message="One or more parameter values were invalid: Invalid number of argument(s) "
                              "for the IN ComparisonOperator",
                      ScanFilter={"a": {"ComparisonOperator": "IN", "AttributeValueList": vals}})
    assert "FilterExpression" not in info.message
    ddb_raw.scan(TableName=table, ScanFilter={"a": {"ComparisonOperator": "IN", "AttributeValueList": vals[:100]}})


def test_query_filter_and_expected_in_over_100_values(ddb_raw, table):
    vals = [{"S": str(i)} for i in range(101)]
    msg = "One or more parameter values were invalid: Invalid number of argument(s) for the IN ComparisonOperator"
    validation(ddb_raw.query, message=msg, TableName=table,
               KeyConditions={"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "p"}]}},
               QueryFilter={"a": {"ComparisonOperator": "IN", "AttributeValueList": vals}})
    validation(ddb_raw.put_item, message=msg, TableName=table, Item={"pk": {"S": "p"}},
               Expected={"a": {"ComparisonOperator": "IN", "AttributeValueList": vals}})


# ------------------------------------------------------- unknown operations

@pytest.mark.parametrize("target,needle", [
    (T + "DescribeGlobalTable", "DescribeGlobalTable is a DynamoDB operation that extenddb does not support"),
    (T + "CreateGlobalTable", "CreateGlobalTable is a DynamoDB operation that extenddb does not support"),
    (T + "NoSuchOperation", "extenddb does not support the operation NoSuchOperation"),
    (T + "listtables", "extenddb does not support the operation listtables"),
    ("DynamoDB_20111205.ListTables", "X-Amz-Target 'DynamoDB_20111205.ListTables' is not an operation of DynamoDB_20120810"),
    (None, "no X-Amz-Target header"),
])
def test_unknown_operation_message(endpoint, target, needle):
    r = raw_post(endpoint, b"{}", target=target)
    assert r.status == 400, r
    check_crc(r)
    body = r.json()
    assert body["__type"] == UNKNOWN_OP, body
    assert body["message"].startswith("An unknown operation was requested: "), body
    assert needle in body["message"], body


def test_unknown_operation_via_sdk(ddb):
    """botocore reports the message to the caller."""
    info = expect_error(ddb.list_global_tables, "UnknownOperationException")
    assert "ListGlobalTables is a DynamoDB operation that extenddb does not support" in info.message


# ------------------------------------------------------- Select beside a projection

PREFIX = "One or more parameter values were invalid: "


@pytest.mark.parametrize("op", ["query", "scan"])
@pytest.mark.parametrize("select,proj,msg", [
    ("ALL_ATTRIBUTES", {"ProjectionExpression": "pk"}, "Cannot specify the ProjectionExpression when choosing to get ALL_ATTRIBUTES"),
    ("COUNT", {"ProjectionExpression": "pk"}, "Cannot specify the ProjectionExpression when choosing to get only the Count"),
    ("ALL_ATTRIBUTES", {"AttributesToGet": ["pk"]}, "Cannot specify the AttributesToGet when choosing to get ALL_ATTRIBUTES"),
    ("COUNT", {"AttributesToGet": ["pk"]}, "Cannot specify the AttributesToGet when choosing to get only the Count"),
])
def test_select_with_projection_names_the_parameter(ddb_raw, table, op, select, proj, msg):
    kw = dict(TableName=table, Select=select, **proj)
    if op == "query":
        if "AttributesToGet" in proj:
            kw["KeyConditions"] = {"pk": {"ComparisonOperator": "EQ", "AttributeValueList": [{"S": "a"}]}}
        else:
            kw["KeyConditionExpression"] = "pk = :p"
            kw["ExpressionAttributeValues"] = {":p": {"S": "a"}}
    validation(getattr(ddb_raw, op), PREFIX + msg, **kw)


# ------------------------------------------------------- nesting through an update

def test_update_cannot_nest_past_the_limit(ddb, table):
    deep = {"S": "x"}
    for _ in range(32):
        deep = {"L": [deep]}
    ddb.put_item(TableName=table, Item={"pk": {"S": "n"}, "m": {"M": {}}, "top": deep})
    validation(ddb.update_item, "Nesting Levels have exceeded supported limits", TableName=table, Key={"pk": {"S": "n"}},
               UpdateExpression="SET m.x = :v", ExpressionAttributeValues={":v": deep})
    validation(ddb.update_item, "Nesting Levels have exceeded supported limits", TableName=table, Key={"pk": {"S": "n"}},
               UpdateExpression="SET m.x = top")
    # One level less fits, and the item stays readable and writable.
    ddb.update_item(TableName=table, Key={"pk": {"S": "n"}}, UpdateExpression="SET m.x = :v",
                    ExpressionAttributeValues={":v": deep["L"][0]})
    ddb.update_item(TableName=table, Key={"pk": {"S": "n"}}, UpdateExpression="SET y = :v",
                    ConditionExpression="attribute_exists(m.x)", ExpressionAttributeValues={":v": {"S": "q"}})
    assert ddb.get_item(TableName=table, Key={"pk": {"S": "n"}}, ConsistentRead=True)["Item"]["y"] == {"S": "q"}


# ------------------------------------------------------- index key types in CreateTable

@pytest.mark.parametrize("kind", ["GlobalSecondaryIndexes", "LocalSecondaryIndexes"])
def test_create_table_index_key_type_enum(ddb_raw, table_name, kind):
    member = "globalSecondaryIndexes" if kind.startswith("Global") else "localSecondaryIndexes"
    hash_name = "g" if kind.startswith("Global") else "pk"
    idx = {"IndexName": "idx1", "KeySchema": [{"AttributeName": hash_name, "KeyType": "HASH"}, {"AttributeName": "g", "KeyType": "SORT"}],
           "Projection": {"ProjectionType": "ALL"}}
    validation(ddb_raw.create_table,
               f"1 validation error detected: Value 'SORT' at '{member}.1.member.keySchema.2.member.keyType' "
               "failed to satisfy constraint: Member must satisfy enum value set: [HASH, RANGE]",
               TableName=table_name, BillingMode="PAY_PER_REQUEST",
               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "S"},
                                     {"AttributeName": "g", "AttributeType": "S"}],
               **{kind: [idx]})


# ------------------------------------------------------- ADD and DELETE operand types

@pytest.mark.parametrize("expr,value,msg", [
    ("ADD n :v", {"S": "x"}, "operator: ADD, operand type: STRING, typeSet: ALLOWED_FOR_ADD_OPERAND"),
    ("ADD n :v", {"M": {}}, "operator: ADD, operand type: MAP, typeSet: ALLOWED_FOR_ADD_OPERAND"),
    ("DELETE ss :v", {"S": "x"}, "operator: DELETE, operand type: STRING, typeSet: ALLOWED_FOR_DELETE_OPERAND"),
    ("DELETE ss :v", {"N": "1"}, "operator: DELETE, operand type: NUMBER, typeSet: ALLOWED_FOR_DELETE_OPERAND"),
])
def test_add_delete_operand_type_names_the_type_set(ddb, table, expr, value, msg):
    validation(ddb.update_item, "Invalid UpdateExpression: Incorrect operand type for operator or function; " + msg,
               TableName=table, Key={"pk": {"S": "a"}}, UpdateExpression=expr, ExpressionAttributeValues={":v": value})
