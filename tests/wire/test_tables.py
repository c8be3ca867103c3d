"""CreateTable, DescribeTable, ListTables, DeleteTable."""

import datetime
import random
import re
import string

import pytest

from conftest import unique_table_name, wait_active, wait_deleted
from wire_helpers import expect_error, validation

HASH_S = dict(KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
PPR = dict(BillingMode="PAY_PER_REQUEST")
INVALID = "One or more parameter values were invalid: "


@pytest.fixture
def created(ddb):
    """Names appended to this list are deleted after the test."""
    names = []
    yield names
    for n in names:
        try:
            ddb.delete_table(TableName=n)
        except ddb.exceptions.ResourceNotFoundException:
            pass


def _create(ddb, created, name, **kw):
    created.append(name)
    return ddb.create_table(TableName=name, **kw)


# ------------------------------------------------------------- CreateTable ok

def test_create_table_response_shape(ddb, created, table_name):
    res = _create(ddb, created, table_name, **HASH_S, **PPR)
    d = res["TableDescription"]
    assert d["TableName"] == table_name
    assert d["TableStatus"] in ("CREATING", "ACTIVE")
    assert d["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert d["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert re.fullmatch(r"arn:aws:dynamodb:us-east-1:\d{12}:table/" + re.escape(table_name),
                        d["TableArn"]), d["TableArn"]
    assert isinstance(d["CreationDateTime"], datetime.datetime)
    assert d["ItemCount"] == 0
    assert d["TableSizeBytes"] == 0
    assert d["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"


def test_describe_table_shape(ddb, created, table_name):
    _create(ddb, created, table_name, **HASH_S, **PPR)
    d = wait_active(ddb, table_name)
    d = ddb.describe_table(TableName=table_name)["Table"]
    assert d["TableName"] == table_name
    assert d["TableStatus"] == "ACTIVE"
    assert d["KeySchema"] == HASH_S["KeySchema"]
    assert d["AttributeDefinitions"] == HASH_S["AttributeDefinitions"]
    assert d["TableArn"].endswith(":table/" + table_name)
    assert d["TableArn"].startswith("arn:aws:dynamodb:us-east-1:")
    assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", d["TableId"])
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs((now - d["CreationDateTime"]).total_seconds()) < 600
    assert d["ItemCount"] == 0
    assert d["TableSizeBytes"] == 0
    assert d["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    pt = d["ProvisionedThroughput"]
    assert pt["ReadCapacityUnits"] == 0 and pt["WriteCapacityUnits"] == 0
    assert pt["NumberOfDecreasesToday"] == 0


def test_describe_table_provisioned(ddb, created, table_name):
    _create(ddb, created, table_name, **HASH_S,
            ProvisionedThroughput={"ReadCapacityUnits": 7, "WriteCapacityUnits": 3})
    d = wait_active(ddb, table_name)
    pt = d["ProvisionedThroughput"]
    assert (pt["ReadCapacityUnits"], pt["WriteCapacityUnits"]) == (7, 3)
    assert d.get("BillingModeSummary", {}).get("BillingMode", "PROVISIONED") == "PROVISIONED"


def test_describe_table_hash_range(ddb, make_table):
    name = make_table(hash_key=("h", "N"), range_key=("r", "B"))
    d = ddb.describe_table(TableName=name)["Table"]
    assert d["KeySchema"] == [{"AttributeName": "h", "KeyType": "HASH"},
                              {"AttributeName": "r", "KeyType": "RANGE"}]
    assert sorted(d["AttributeDefinitions"], key=lambda a: a["AttributeName"]) == [
        {"AttributeName": "h", "AttributeType": "N"}, {"AttributeName": "r", "AttributeType": "B"}]


@pytest.mark.parametrize("key_type", ["S", "N", "B"])
def test_create_table_key_types(ddb, make_table, key_type):
    name = make_table(hash_key=("k", key_type))
    d = ddb.describe_table(TableName=name)["Table"]
    assert d["AttributeDefinitions"] == [{"AttributeName": "k", "AttributeType": key_type}]


def test_item_count_reflects_items(ddb, make_table):
    # ItemCount is only updated every ~6h on DynamoDB, but must stay an integer >= 0.
    name = make_table()
    ddb.put_item(TableName=name, Item={"pk": {"S": "a"}})
    d = ddb.describe_table(TableName=name)["Table"]
    assert isinstance(d["ItemCount"], int) and d["ItemCount"] >= 0


@pytest.mark.parametrize("n", [3, 255])
def test_table_name_length_bounds_ok(ddb, created, request, n):
    chars = string.ascii_letters + string.digits + "_.-"
    name = "".join(random.choices(chars, k=n))
    if n == 255:
        name = unique_table_name(request.node.name + "x" * 300)
        assert len(name) == 255
    res = _create(ddb, created, name, **HASH_S, **PPR)
    assert res["TableDescription"]["TableName"] == name


def test_table_names_are_case_sensitive(ddb, created, table_name):
    lower = table_name.lower() + "-case"
    upper = lower.upper()
    _create(ddb, created, lower, **HASH_S, **PPR)
    _create(ddb, created, upper, **HASH_S, **PPR)
    assert ddb.describe_table(TableName=upper)["Table"]["TableName"] == upper
    assert ddb.describe_table(TableName=lower)["Table"]["TableName"] == lower


def test_create_duplicate_table(ddb, make_table):
    name = make_table()
    expect_error(ddb.create_table, "ResourceInUseException",
                 message=f"Table already exists: {name}",
                 TableName=name, **HASH_S, **PPR)


# ------------------------------------------------------------- CreateTable errors

@pytest.mark.parametrize("name", ["ab", "x" * 256, "has space", "a/b", "t\u00e4ble", "tab:le", ""])
def test_create_table_invalid_names(ddb_raw, name):
    info = validation(ddb_raw.create_table, TableName=name, **HASH_S, **PPR)
    assert info.message


def test_create_table_undefined_key_attribute(ddb_raw, table_name):
    validation(ddb_raw.create_table, match=r"^" + re.escape(INVALID) +
               r"Some index key attributes are not defined in AttributeDefinitions",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "other", "AttributeType": "S"}])


def test_create_table_extra_attribute_definition(ddb_raw, table_name):
    validation(ddb_raw.create_table,
               message=INVALID + "Number of attributes in KeySchema does not exactly match "
                                 "number of attributes defined in AttributeDefinitions",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"},
                                     {"AttributeName": "x", "AttributeType": "N"}])


def test_create_table_range_first(ddb_raw, table_name):
    validation(ddb_raw.create_table,
               message="Invalid KeySchema: The first KeySchemaElement is not a HASH key type",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "r", "KeyType": "RANGE"},
                          {"AttributeName": "h", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "h", "AttributeType": "S"},
                                     {"AttributeName": "r", "AttributeType": "S"}])


def test_create_table_two_hash_keys(ddb_raw, table_name):
    validation(ddb_raw.create_table,
               message="Invalid KeySchema: The second KeySchemaElement is not a RANGE key type",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "h", "KeyType": "HASH"},
                          {"AttributeName": "r", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "h", "AttributeType": "S"},
                                     {"AttributeName": "r", "AttributeType": "S"}])


def test_create_table_same_hash_and_range(ddb_raw, table_name):
    validation(ddb_raw.create_table,
               message="Both the Hash Key and the Range Key element in the KeySchema have the same name",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "h", "KeyType": "HASH"},
                          {"AttributeName": "h", "KeyType": "RANGE"}],
               AttributeDefinitions=[{"AttributeName": "h", "AttributeType": "S"},
                                     {"AttributeName": "x", "AttributeType": "S"}])


def test_create_table_three_key_elements(ddb_raw, table_name):
    validation(ddb_raw.create_table, match="keySchema.*Member must have length less than or equal to 2",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": a, "KeyType": t}
                          for a, t in (("a", "HASH"), ("b", "RANGE"), ("c", "RANGE"))],
               AttributeDefinitions=[{"AttributeName": a, "AttributeType": "S"} for a in "abc"])


def test_create_table_empty_key_schema(ddb_raw, table_name):
    validation(ddb_raw.create_table, match="keySchema",
               TableName=table_name, **PPR, KeySchema=[],
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])


def test_create_table_missing_key_schema(ddb_raw, table_name):
    validation(ddb_raw.create_table, match="keySchema",
               TableName=table_name, **PPR,
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])


@pytest.mark.parametrize("attr_type", ["BOOL", "SS", "M", "s"])
def test_create_table_invalid_attribute_type(ddb_raw, table_name, attr_type):
    validation(ddb_raw.create_table, match=r"Member must satisfy enum value set",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": attr_type}])


def test_create_table_invalid_key_type(ddb_raw, table_name):
    validation(ddb_raw.create_table, match=r"Member must satisfy enum value set",
               TableName=table_name, **PPR,
               KeySchema=[{"AttributeName": "pk", "KeyType": "PRIMARY"}],
               AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])


def test_create_table_pay_per_request_with_throughput(ddb_raw, table_name):
    validation(ddb_raw.create_table,
               message=INVALID + "Neither ReadCapacityUnits nor WriteCapacityUnits can be "
                                 "specified when BillingMode is PAY_PER_REQUEST",
               TableName=table_name, **HASH_S, BillingMode="PAY_PER_REQUEST",
               ProvisionedThroughput={"ReadCapacityUnits": 1, "WriteCapacityUnits": 1})


@pytest.mark.parametrize("billing", [{"BillingMode": "PROVISIONED"}, {}])
def test_create_table_provisioned_without_throughput(ddb_raw, table_name, billing):
    validation(ddb_raw.create_table,
               message=INVALID + "ReadCapacityUnits and WriteCapacityUnits must both be "
                                 "specified when BillingMode is PROVISIONED",
               TableName=table_name, **HASH_S, **billing)


@pytest.mark.parametrize("rcu,wcu", [(0, 1), (1, 0), (-5, 1)])
def test_create_table_throughput_below_one(ddb_raw, table_name, rcu, wcu):
    validation(ddb_raw.create_table, match=r"Member must have value greater than or equal to 1",
               TableName=table_name, **HASH_S,
               ProvisionedThroughput={"ReadCapacityUnits": rcu, "WriteCapacityUnits": wcu})


def test_create_table_invalid_billing_mode(ddb_raw, table_name):
    validation(ddb_raw.create_table, match=r"billingMode.*Member must satisfy enum value set",
               TableName=table_name, **HASH_S, BillingMode="FREE")


def test_create_table_multiple_validation_errors_counted(ddb_raw, table_name):
    info = validation(ddb_raw.create_table, TableName=table_name, BillingMode="FREE",
                      KeySchema=[{"AttributeName": "pk", "KeyType": "PRIMARY"}],
                      AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}])
    assert info.message.startswith("2 validation errors detected: "), info.message
    assert "billingMode" in info.message and "keyType" in info.message, info.message


# ------------------------------------------------------------- Describe / Delete

def test_describe_missing_table(ddb, table_name):
    expect_error(ddb.describe_table, "ResourceNotFoundException",
                 message=f"Requested resource not found: Table: {table_name} not found",
                 TableName=table_name)


def test_describe_table_invalid_name(ddb_raw):
    validation(ddb_raw.describe_table, TableName="a!")


def test_delete_table(ddb, created, table_name):
    _create(ddb, created, table_name, **HASH_S, **PPR)
    wait_active(ddb, table_name)
    res = ddb.delete_table(TableName=table_name)
    d = res["TableDescription"]
    assert d["TableName"] == table_name
    assert d["TableStatus"] == "DELETING"
    assert d["TableArn"].endswith(":table/" + table_name)
    wait_deleted(ddb, table_name)
    assert table_name not in _all_tables(ddb)


def test_delete_missing_table(ddb, table_name):
    expect_error(ddb.delete_table, "ResourceNotFoundException",
                 message=f"Requested resource not found: Table: {table_name} not found",
                 TableName=table_name)


def test_delete_table_twice(ddb, created, table_name):
    _create(ddb, created, table_name, **HASH_S, **PPR)
    wait_active(ddb, table_name)
    ddb.delete_table(TableName=table_name)
    wait_deleted(ddb, table_name)
    expect_error(ddb.delete_table, "ResourceNotFoundException", TableName=table_name)


def test_item_ops_on_deleted_table(ddb, created, table_name):
    _create(ddb, created, table_name, **HASH_S, **PPR)
    wait_active(ddb, table_name)
    ddb.put_item(TableName=table_name, Item={"pk": {"S": "a"}})
    ddb.delete_table(TableName=table_name)
    wait_deleted(ddb, table_name)
    expect_error(ddb.get_item, "ResourceNotFoundException", message="Requested resource not found",
                 TableName=table_name, Key={"pk": {"S": "a"}})
    expect_error(ddb.put_item, "ResourceNotFoundException", message="Requested resource not found",
                 TableName=table_name, Item={"pk": {"S": "a"}})


def test_recreate_after_delete_is_empty(ddb, created, table_name):
    _create(ddb, created, table_name, **HASH_S, **PPR)
    wait_active(ddb, table_name)
    ddb.put_item(TableName=table_name, Item={"pk": {"S": "a"}})
    ddb.delete_table(TableName=table_name)
    wait_deleted(ddb, table_name)
    ddb.create_table(TableName=table_name, **HASH_S, **PPR)
    wait_active(ddb, table_name)
    assert "Item" not in ddb.get_item(TableName=table_name, Key={"pk": {"S": "a"}})
    assert ddb.scan(TableName=table_name)["Count"] == 0


@pytest.mark.parametrize("op,kw", [
    ("get_item", {"Key": {"pk": {"S": "a"}}}),
    ("put_item", {"Item": {"pk": {"S": "a"}}}),
    ("delete_item", {"Key": {"pk": {"S": "a"}}}),
    ("update_item", {"Key": {"pk": {"S": "a"}}}),
    ("scan", {}),
    ("query", {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "a"}}}),
])
def test_item_ops_on_missing_table(ddb, table_name, op, kw):
    expect_error(getattr(ddb, op), "ResourceNotFoundException",
                 message="Requested resource not found", TableName=table_name, **kw)


# ------------------------------------------------------------- ListTables

def _all_tables(ddb, **kw):
    names, start = [], None
    while True:
        args = dict(kw)
        if start:
            args["ExclusiveStartTableName"] = start
        res = ddb.list_tables(**args)
        names += res["TableNames"]
        start = res.get("LastEvaluatedTableName")
        if not start:
            return names


def _utf8_sorted(names):
    return sorted(names, key=lambda n: n.encode("utf-8"))


def test_list_tables_contains_created(ddb, make_table):
    name = make_table()
    res = ddb.list_tables()
    assert isinstance(res["TableNames"], list)
    assert name in _all_tables(ddb)


def test_list_tables_paging_with_limit(ddb, created, table_name):
    prefix = table_name[:200] + "-p"
    mine = [f"{prefix}{i}" for i in range(5)]
    for n in mine:
        _create(ddb, created, n, **HASH_S, **PPR)
    pages, start, seen = 0, None, []
    while True:
        args = {"Limit": 2}
        if start:
            args["ExclusiveStartTableName"] = start
        res = ddb.list_tables(**args)
        assert len(res["TableNames"]) <= 2
        assert res["TableNames"] == _utf8_sorted(res["TableNames"])
        seen += res["TableNames"]
        pages += 1
        start = res.get("LastEvaluatedTableName")
        if start:
            assert start == res["TableNames"][-1]
        else:
            break
    assert seen == _utf8_sorted(seen)
    assert len(seen) == len(set(seen))
    assert [n for n in seen if n in mine] == mine
    assert pages >= 3


def test_list_tables_exclusive_start(ddb, created, table_name):
    prefix = table_name[:200] + "-e"
    mine = [f"{prefix}{c}" for c in "abcd"]
    for n in mine:
        _create(ddb, created, n, **HASH_S, **PPR)
    names = ddb.list_tables(ExclusiveStartTableName=mine[1], Limit=100)["TableNames"]
    assert all(n.encode() > mine[1].encode() for n in names)
    assert mine[2] in names and mine[3] in names or len(names) == 100
    assert mine[0] not in names and mine[1] not in names
    # A start name that does not exist works too.
    names = ddb.list_tables(ExclusiveStartTableName=prefix + "bb", Limit=100)["TableNames"]
    assert names[0] == mine[2]
    assert mine[1] not in names


def test_list_tables_utf8_byte_order(ddb, created, table_name):
    prefix = table_name[:200] + "-o"
    suffixes = ["a", "_", "Z", "A", "9", "0", ".", "-", "z", "B"]
    for s in suffixes:
        _create(ddb, created, prefix + s, **HASH_S, **PPR)
    names = [n for n in _all_tables(ddb) if n.startswith(prefix)]
    # byte order: '-' < '.' < '0'..'9' < 'A'..'Z' < '_' < 'a'..'z'
    assert names == [prefix + s for s in ["-", ".", "0", "9", "A", "B", "Z", "_", "a", "z"]]


def test_list_tables_last_evaluated_absent_at_end(ddb, make_table):
    make_table()
    res = ddb.list_tables(Limit=100)
    while "LastEvaluatedTableName" in res:
        res = ddb.list_tables(Limit=100, ExclusiveStartTableName=res["LastEvaluatedTableName"])
    assert "LastEvaluatedTableName" not in res


@pytest.mark.parametrize("limit", [0, 101, -1])
def test_list_tables_invalid_limit(ddb_raw, limit):
    validation(ddb_raw.list_tables, match=r"limit", Limit=limit)


def test_list_tables_invalid_exclusive_start(ddb_raw):
    validation(ddb_raw.list_tables, ExclusiveStartTableName="a b")
