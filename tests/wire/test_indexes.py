"""Global and local secondary indexes: CreateTable, DescribeTable, Query and
Scan on an index, projections, index maintenance, validation."""

import pytest

from wire_helpers import validation

INVALID = "One or more parameter values were invalid: "


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def ks(h, r=None):
    out = [{"AttributeName": h, "KeyType": "HASH"}]
    if r:
        out.append({"AttributeName": r, "KeyType": "RANGE"})
    return out


def ad(**types):
    return [{"AttributeName": k, "AttributeType": v} for k, v in types.items()]


GSIS = [
    {"IndexName": "gsi_all", "KeySchema": ks("gpk", "gsk"), "Projection": {"ProjectionType": "ALL"}},
    {"IndexName": "gsi_keys", "KeySchema": ks("gpk", "gsk"), "Projection": {"ProjectionType": "KEYS_ONLY"}},
    {"IndexName": "gsi_inc", "KeySchema": ks("gpk"),
     "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["a", "c"]}},
]
LSIS = [
    {"IndexName": "lsi_all", "KeySchema": ks("pk", "lsk"), "Projection": {"ProjectionType": "ALL"}},
    {"IndexName": "lsi_keys", "KeySchema": ks("pk", "lsk"), "Projection": {"ProjectionType": "KEYS_ONLY"}},
]


@pytest.fixture
def itable(make_table):
    return make_table(
        range_key=("sk", "S"),
        AttributeDefinitions=ad(pk="S", sk="S", gpk="S", gsk="N", lsk="N"),
        GlobalSecondaryIndexes=GSIS, LocalSecondaryIndexes=LSIS)


def item(sk, gpk=None, gsk=None, lsk=None, pk="p", **extra):
    it = {"pk": S(pk), "sk": S(sk)}
    if gpk is not None:
        it["gpk"] = S(gpk)
    if gsk is not None:
        it["gsk"] = N(gsk)
    if lsk is not None:
        it["lsk"] = N(lsk)
    it.update(extra)
    return it


@pytest.fixture
def populated(ddb, itable):
    """Ten items in gpk 'g' with gsk 0..9 (inserted out of order), plus
    two items in gpk 'h' and one item without any index key."""
    for i in (5, 2, 8, 0, 9, 1, 7, 3, 6, 4):
        ddb.put_item(TableName=itable, Item=item(f"s{i}", "g", i, 100 - i,
                                                 a=S(f"a{i}"), b=S(f"b{i}"), c=N(i)))
    ddb.put_item(TableName=itable, Item=item("h1", "h", 1, 1, pk="q"))
    ddb.put_item(TableName=itable, Item=item("h2", "h", 2, 2, pk="q"))
    ddb.put_item(TableName=itable, Item=item("nokey", a=S("x")))
    return itable


def qidx(ddb, table, index, kce, values, **kw):
    return ddb.query(TableName=table, IndexName=index, KeyConditionExpression=kce,
                     ExpressionAttributeValues=values, **kw)


def gq(ddb, table, index="gsi_all", gpk="g", **kw):
    return qidx(ddb, table, index, "gpk = :g", {":g": S(gpk)}, **kw)


# ------------------------------------------------------------- describe

def test_describe_gsi_section(ddb, itable):
    desc = ddb.describe_table(TableName=itable)["Table"]
    gsis = {g["IndexName"]: g for g in desc["GlobalSecondaryIndexes"]}
    assert sorted(gsis) == ["gsi_all", "gsi_inc", "gsi_keys"]
    for spec in GSIS:
        g = gsis[spec["IndexName"]]
        assert g["KeySchema"] == spec["KeySchema"]
        assert g["IndexStatus"] == "ACTIVE"
        assert g["IndexSizeBytes"] == 0 and g["ItemCount"] == 0
        assert g["IndexArn"] == desc["TableArn"] + "/index/" + spec["IndexName"]
    assert gsis["gsi_all"]["Projection"] == {"ProjectionType": "ALL"}
    assert gsis["gsi_keys"]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    inc = gsis["gsi_inc"]["Projection"]
    assert inc["ProjectionType"] == "INCLUDE" and sorted(inc["NonKeyAttributes"]) == ["a", "c"]


def test_describe_lsi_section(ddb, itable):
    desc = ddb.describe_table(TableName=itable)["Table"]
    lsis = {x["IndexName"]: x for x in desc["LocalSecondaryIndexes"]}
    assert sorted(lsis) == ["lsi_all", "lsi_keys"]
    for spec in LSIS:
        x = lsis[spec["IndexName"]]
        assert x["KeySchema"] == spec["KeySchema"]
        assert x["Projection"] == spec["Projection"]
        assert "IndexStatus" not in x
        assert "IndexSizeBytes" in x and "ItemCount" in x
        assert x["IndexArn"] == desc["TableArn"] + "/index/" + spec["IndexName"]


def test_create_table_response_has_indexes(ddb, table_name):
    res = ddb.create_table(TableName=table_name, KeySchema=ks("pk", "sk"),
                           AttributeDefinitions=ad(pk="S", sk="S", gpk="S", gsk="N", lsk="N"),
                           BillingMode="PAY_PER_REQUEST", GlobalSecondaryIndexes=GSIS,
                           LocalSecondaryIndexes=LSIS)
    try:
        td = res["TableDescription"]
        assert sorted(g["IndexName"] for g in td["GlobalSecondaryIndexes"]) == ["gsi_all", "gsi_inc", "gsi_keys"]
        assert sorted(x["IndexName"] for x in td["LocalSecondaryIndexes"]) == ["lsi_all", "lsi_keys"]
        assert sorted(a["AttributeName"] for a in td["AttributeDefinitions"]) == ["gpk", "gsk", "lsk", "pk", "sk"]
    finally:
        ddb.delete_table(TableName=table_name)


def test_describe_gsi_provisioned_throughput(ddb, make_table):
    t = make_table(AttributeDefinitions=ad(pk="S", g="S"),
                   ProvisionedThroughput={"ReadCapacityUnits": 5, "WriteCapacityUnits": 5},
                   GlobalSecondaryIndexes=[{
                       "IndexName": "gix", "KeySchema": ks("g"), "Projection": {"ProjectionType": "ALL"},
                       "ProvisionedThroughput": {"ReadCapacityUnits": 3, "WriteCapacityUnits": 4}}])
    g = ddb.describe_table(TableName=t)["Table"]["GlobalSecondaryIndexes"][0]
    assert g["ProvisionedThroughput"]["ReadCapacityUnits"] == 3
    assert g["ProvisionedThroughput"]["WriteCapacityUnits"] == 4


# ------------------------------------------------------------- create validation

def create(ddb_raw, name, **kw):
    params = dict(TableName=name, KeySchema=ks("pk", "sk"), BillingMode="PAY_PER_REQUEST",
                  AttributeDefinitions=ad(pk="S", sk="S", g="S"))
    params.update(kw)
    return ddb_raw.create_table(**params)


def test_create_gsi_undefined_attribute_rejected(ddb_raw, table_name):
    validation(create, ddb_raw=ddb_raw, name=table_name, GlobalSecondaryIndexes=[
        {"IndexName": "x", "KeySchema": ks("undefined"), "Projection": {"ProjectionType": "ALL"}}])


def test_create_duplicate_index_names_rejected(ddb_raw, table_name):
    gi = {"IndexName": "dup", "KeySchema": ks("g"), "Projection": {"ProjectionType": "ALL"}}
    validation(create, ddb_raw=ddb_raw, name=table_name, GlobalSecondaryIndexes=[gi, gi])


def test_create_gsi_and_lsi_same_name_rejected(ddb_raw, table_name):
    validation(create, ddb_raw=ddb_raw, name=table_name,
               GlobalSecondaryIndexes=[{"IndexName": "same", "KeySchema": ks("g"),
                                        "Projection": {"ProjectionType": "ALL"}}],
               LocalSecondaryIndexes=[{"IndexName": "same", "KeySchema": ks("pk", "g"),
                                       "Projection": {"ProjectionType": "ALL"}}])


def test_create_lsi_with_other_hash_key_rejected(ddb_raw, table_name):
    validation(create, ddb_raw=ddb_raw, name=table_name, LocalSecondaryIndexes=[
        {"IndexName": "l", "KeySchema": ks("g", "sk"), "Projection": {"ProjectionType": "ALL"}}])


def test_create_lsi_on_hash_only_table_rejected(ddb_raw, table_name):
    validation(ddb_raw.create_table, TableName=table_name, KeySchema=ks("pk"),
               BillingMode="PAY_PER_REQUEST", AttributeDefinitions=ad(pk="S", g="S"),
               LocalSecondaryIndexes=[{"IndexName": "l", "KeySchema": ks("pk", "g"),
                                       "Projection": {"ProjectionType": "ALL"}}])


def test_create_include_without_non_key_attributes_rejected(ddb_raw, table_name):
    validation(create, ddb_raw=ddb_raw, name=table_name, GlobalSecondaryIndexes=[
        {"IndexName": "x", "KeySchema": ks("g"), "Projection": {"ProjectionType": "INCLUDE"}}])


def test_create_keys_only_with_non_key_attributes_rejected(ddb_raw, table_name):
    validation(create, ddb_raw=ddb_raw, name=table_name, GlobalSecondaryIndexes=[
        {"IndexName": "x", "KeySchema": ks("g"),
         "Projection": {"ProjectionType": "KEYS_ONLY", "NonKeyAttributes": ["a"]}}])


def test_create_index_attribute_definition_unused_rejected(ddb_raw, table_name):
    validation(ddb_raw.create_table, TableName=table_name, KeySchema=ks("pk"),
               BillingMode="PAY_PER_REQUEST", AttributeDefinitions=ad(pk="S", g="S", unused="N"),
               GlobalSecondaryIndexes=[{"IndexName": "x", "KeySchema": ks("g"),
                                        "Projection": {"ProjectionType": "ALL"}}])


# ------------------------------------------------------------- query on GSI

def test_query_gsi_sorted_by_index_range_key(ddb, populated):
    res = gq(ddb, populated)
    assert [i["gsk"]["N"] for i in res["Items"]] == [str(i) for i in range(10)]
    assert res["Count"] == 10
    assert res["Items"][3] == item("s3", "g", 3, 97, a=S("a3"), b=S("b3"), c=N(3))


def test_query_gsi_descending(ddb, populated):
    res = gq(ddb, populated, ScanIndexForward=False)
    assert [i["gsk"]["N"] for i in res["Items"]] == [str(i) for i in range(9, -1, -1)]


def test_query_gsi_range_condition(ddb, populated):
    res = qidx(ddb, populated, "gsi_all", "gpk = :g AND gsk BETWEEN :lo AND :hi",
               {":g": S("g"), ":lo": N(3), ":hi": N(5)})
    assert [i["sk"]["S"] for i in res["Items"]] == ["s3", "s4", "s5"]


def test_query_gsi_spans_table_partitions(ddb, populated):
    res = gq(ddb, populated, gpk="h")
    assert [(i["pk"]["S"], i["sk"]["S"]) for i in res["Items"]] == [("q", "h1"), ("q", "h2")]


def test_query_gsi_paging_lek_has_table_and_index_keys(ddb, populated):
    seen, kw, pages = [], {}, 0
    while True:
        res = gq(ddb, populated, Limit=3, **kw)
        pages += 1
        seen += [i["gsk"]["N"] for i in res["Items"]]
        lek = res.get("LastEvaluatedKey")
        if not lek:
            break
        assert set(lek) == {"pk", "sk", "gpk", "gsk"}
        assert lek["gsk"] == res["Items"][-1]["gsk"]
        assert lek["sk"] == res["Items"][-1]["sk"]
        kw["ExclusiveStartKey"] = lek
        assert pages < 10
    assert seen == [str(i) for i in range(10)]
    assert pages >= 4


def test_query_gsi_paging_descending(ddb, populated):
    seen, kw = [], {}
    for _ in range(10):
        res = gq(ddb, populated, Limit=4, ScanIndexForward=False, **kw)
        seen += [i["gsk"]["N"] for i in res["Items"]]
        if "LastEvaluatedKey" not in res:
            break
        kw["ExclusiveStartKey"] = res["LastEvaluatedKey"]
    assert seen == [str(i) for i in range(9, -1, -1)]


def test_query_gsi_hash_only_index_lek(ddb, populated):
    res = qidx(ddb, populated, "gsi_inc", "gpk = :g", {":g": S("g")}, Limit=2)
    assert set(res["LastEvaluatedKey"]) == {"pk", "sk", "gpk"}


def test_query_keys_only_projection(ddb, populated):
    res = gq(ddb, populated, index="gsi_keys")
    assert res["Count"] == 10
    for it in res["Items"]:
        assert set(it) == {"pk", "sk", "gpk", "gsk"}


def test_query_include_projection(ddb, populated):
    res = qidx(ddb, populated, "gsi_inc", "gpk = :g", {":g": S("g")})
    assert res["Count"] == 10
    for it in res["Items"]:
        assert set(it) == {"pk", "sk", "gpk", "a", "c"}


def test_query_select_all_projected_attributes(ddb, populated):
    res = gq(ddb, populated, index="gsi_keys", Select="ALL_PROJECTED_ATTRIBUTES")
    assert all(set(i) == {"pk", "sk", "gpk", "gsk"} for i in res["Items"])
    res = gq(ddb, populated, index="gsi_all", Select="ALL_PROJECTED_ATTRIBUTES")
    assert res["Items"][0] == item("s0", "g", 0, 100, a=S("a0"), b=S("b0"), c=N(0))


def test_query_gsi_select_all_attributes_on_keys_only_rejected(ddb, populated):
    validation(gq, ddb=ddb, table=populated, index="gsi_keys", Select="ALL_ATTRIBUTES")


def test_query_gsi_select_count(ddb, populated):
    res = gq(ddb, populated, Select="COUNT")
    assert res["Count"] == 10 and "Items" not in res


def test_query_gsi_projection_expression(ddb, populated):
    res = gq(ddb, populated, ProjectionExpression="sk, b")
    assert res["Items"][0] == {"sk": S("s0"), "b": S("b0")}


def test_query_gsi_filter_expression(ddb, populated):
    res = qidx(ddb, populated, "gsi_all", "gpk = :g", {":g": S("g"), ":five": N(5)},
               FilterExpression="c >= :five")
    assert [i["gsk"]["N"] for i in res["Items"]] == ["5", "6", "7", "8", "9"]
    assert res["ScannedCount"] == 10


def test_query_gsi_with_table_key_condition_rejected(ddb, populated):
    validation(qidx, ddb=ddb, table=populated, index="gsi_all", kce="pk = :p",
               values={":p": S("p")})


def test_query_unknown_index(ddb, populated):
    validation(gq, message="The table does not have the specified index: nope",
               ddb=ddb, table=populated, index="nope")


def test_scan_unknown_index(ddb, populated):
    validation(ddb.scan, message="The table does not have the specified index: nope",
               TableName=populated, IndexName="nope")


def test_query_gsi_consistent_read_rejected(ddb, populated):
    validation(gq, match="Consistent reads are not supported on global secondary indexes",
               ddb=ddb, table=populated, ConsistentRead=True)


def test_scan_gsi_consistent_read_rejected(ddb, populated):
    validation(ddb.scan, match="Consistent reads are not supported on global secondary indexes",
               TableName=populated, IndexName="gsi_all", ConsistentRead=True)


# ------------------------------------------------------------- scan on an index

def test_scan_gsi_only_items_with_index_key(ddb, populated):
    res = ddb.scan(TableName=populated, IndexName="gsi_all")
    assert res["Count"] == 12
    assert "nokey" not in [i["sk"]["S"] for i in res["Items"]]


def test_scan_gsi_paging(ddb, populated):
    seen, kw = [], {}
    for _ in range(20):
        res = ddb.scan(TableName=populated, IndexName="gsi_keys", Limit=5, **kw)
        seen += [(i["pk"]["S"], i["sk"]["S"]) for i in res["Items"]]
        if "LastEvaluatedKey" not in res:
            break
        assert set(res["LastEvaluatedKey"]) == {"pk", "sk", "gpk", "gsk"}
        kw["ExclusiveStartKey"] = res["LastEvaluatedKey"]
    assert len(seen) == 12 and len(set(seen)) == 12


def test_scan_include_projection(ddb, populated):
    res = ddb.scan(TableName=populated, IndexName="gsi_inc")
    assert res["Count"] == 12
    assert all(set(i) <= {"pk", "sk", "gpk", "a", "c"} for i in res["Items"])


# ------------------------------------------------------------- LSI

def test_query_lsi_sorted_by_lsi_key(ddb, populated):
    res = qidx(ddb, populated, "lsi_all", "pk = :p", {":p": S("p")})
    # lsk = 100 - i, so ascending lsk is descending i
    assert [i["sk"]["S"] for i in res["Items"]] == [f"s{i}" for i in range(9, -1, -1)]


def test_query_lsi_range_and_consistent_read(ddb, populated):
    res = qidx(ddb, populated, "lsi_all", "pk = :p AND lsk > :x", {":p": S("p"), ":x": N(97)},
               ConsistentRead=True)
    assert [i["sk"]["S"] for i in res["Items"]] == ["s2", "s1", "s0"]


def test_query_lsi_keys_only(ddb, populated):
    res = qidx(ddb, populated, "lsi_keys", "pk = :p", {":p": S("p")})
    assert res["Count"] == 10
    assert all(set(i) == {"pk", "sk", "lsk"} for i in res["Items"])


def test_query_lsi_paging_lek(ddb, populated):
    res = qidx(ddb, populated, "lsi_all", "pk = :p", {":p": S("p")}, Limit=4)
    assert set(res["LastEvaluatedKey"]) == {"pk", "sk", "lsk"}
    res2 = qidx(ddb, populated, "lsi_all", "pk = :p", {":p": S("p")}, Limit=100,
                ExclusiveStartKey=res["LastEvaluatedKey"])
    assert [i["sk"]["S"] for i in res2["Items"]] == [f"s{i}" for i in range(5, -1, -1)]


def test_lsi_excludes_items_without_lsi_key(ddb, populated):
    ddb.put_item(TableName=populated, Item=item("nolsk", "g", 50))
    res = qidx(ddb, populated, "lsi_all", "pk = :p", {":p": S("p")})
    assert "nolsk" not in [i["sk"]["S"] for i in res["Items"]]
    assert res["Count"] == 10


# ------------------------------------------------------------- maintenance

def test_item_without_index_key_not_in_gsi(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", gpk=None, gsk=5))
    ddb.put_item(TableName=itable, Item=item("y", gpk="g"))  # gsk missing: not in gsi_all
    assert gq(ddb, itable)["Count"] == 0
    res = qidx(ddb, itable, "gsi_inc", "gpk = :g", {":g": S("g")})
    assert [i["sk"]["S"] for i in res["Items"]] == ["y"]


def test_gsi_follows_index_key_change(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g1", 1))
    ddb.update_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")},
                    UpdateExpression="SET gpk = :g", ExpressionAttributeValues={":g": S("g2")})
    assert gq(ddb, itable, gpk="g1")["Count"] == 0
    res = gq(ddb, itable, gpk="g2")
    assert [i["sk"]["S"] for i in res["Items"]] == ["x"]


def test_gsi_follows_range_key_change(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1))
    ddb.put_item(TableName=itable, Item=item("y", "g", 2))
    ddb.update_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")},
                    UpdateExpression="SET gsk = :v", ExpressionAttributeValues={":v": N(3)})
    assert [i["sk"]["S"] for i in gq(ddb, itable)["Items"]] == ["y", "x"]


def test_gsi_reflects_non_key_update(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1, a=S("old")))
    ddb.update_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")},
                    UpdateExpression="SET a = :v", ExpressionAttributeValues={":v": S("new")})
    assert gq(ddb, itable)["Items"][0]["a"] == S("new")
    assert qidx(ddb, itable, "gsi_inc", "gpk = :g", {":g": S("g")})["Items"][0]["a"] == S("new")


def test_gsi_entry_removed_when_key_attribute_removed(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1))
    ddb.update_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")}, UpdateExpression="REMOVE gsk")
    assert gq(ddb, itable)["Count"] == 0
    # still in the hash-only index, which needs only gpk
    assert qidx(ddb, itable, "gsi_inc", "gpk = :g", {":g": S("g")})["Count"] == 1


def test_gsi_entry_removed_when_put_without_key(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1))
    ddb.put_item(TableName=itable, Item=item("x"))
    assert gq(ddb, itable)["Count"] == 0
    assert ddb.scan(TableName=itable, IndexName="gsi_keys")["Count"] == 0


def test_gsi_entry_removed_on_delete(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1, 1))
    ddb.delete_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")})
    assert gq(ddb, itable)["Count"] == 0
    assert qidx(ddb, itable, "lsi_all", "pk = :p", {":p": S("p")})["Count"] == 0


def test_gsi_updated_by_batch_and_transaction(ddb, itable):
    ddb.batch_write_item(RequestItems={itable: [{"PutRequest": {"Item": item("b1", "g", 1)}}]})
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": itable, "Item": item("t1", "g", 2)}}])
    assert [i["sk"]["S"] for i in gq(ddb, itable)["Items"]] == ["b1", "t1"]
    ddb.transact_write_items(TransactItems=[{"Delete": {"TableName": itable,
                                                        "Key": {"pk": S("p"), "sk": S("b1")}}}])
    assert [i["sk"]["S"] for i in gq(ddb, itable)["Items"]] == ["t1"]


def test_gsi_non_unique_keys(ddb, itable):
    for s in ("a", "b", "c"):
        ddb.put_item(TableName=itable, Item=item(s, "g", 7))
    res = gq(ddb, itable)
    assert sorted(i["sk"]["S"] for i in res["Items"]) == ["a", "b", "c"]


def test_gsi_non_unique_keys_paging(ddb, itable):
    for s in "abcdefg":
        ddb.put_item(TableName=itable, Item=item(s, "g", 7))
    seen, kw = [], {}
    for _ in range(10):
        res = gq(ddb, itable, Limit=2, **kw)
        seen += [i["sk"]["S"] for i in res["Items"]]
        if "LastEvaluatedKey" not in res:
            break
        kw["ExclusiveStartKey"] = res["LastEvaluatedKey"]
    assert sorted(seen) == list("abcdefg")


# ------------------------------------------------------------- key validation

def test_put_index_key_wrong_type_rejected(ddb, itable):
    validation(ddb.put_item, match=r"^One or more parameter values were invalid: Type mismatch for Index Key gsk",
               TableName=itable, Item=item("x", "g") | {"gsk": S("notanumber")})
    assert ddb.get_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")}).get("Item") is None


def test_put_lsi_key_wrong_type_rejected(ddb, itable):
    validation(ddb.put_item, match="Type mismatch for Index Key lsk",
               TableName=itable, Item=item("x") | {"lsk": S("1")})
    assert ddb.get_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")}).get("Item") is None


def test_update_index_key_wrong_type_rejected(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1))
    validation(ddb.update_item, match=r"^One or more parameter values were invalid: Type mismatch for Index Key gpk",
               TableName=itable, Key={"pk": S("p"), "sk": S("x")},
               UpdateExpression="SET gpk = :v, a = :a", ExpressionAttributeValues={":v": N(1), ":a": S("a")})
    assert ddb.get_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")})["Item"] == item("x", "g", 1)


def test_batch_write_index_key_wrong_type_rejected(ddb, itable):
    validation(ddb.batch_write_item, match="Type mismatch for Index Key gpk", RequestItems={itable: [
        {"PutRequest": {"Item": item("ok", "g", 1)}},
        {"PutRequest": {"Item": item("bad") | {"gpk": {"B": b"x"}}}}]})
    assert ddb.scan(TableName=itable)["Count"] == 0


def test_put_index_key_empty_string_rejected(ddb, itable):
    validation(ddb.put_item, TableName=itable, Item=item("x", ""))
    assert ddb.scan(TableName=itable)["Count"] == 0


def test_number_gsi_key_order(ddb, make_table):
    t = make_table(AttributeDefinitions=ad(pk="S", g="S", n="N"), GlobalSecondaryIndexes=[
        {"IndexName": "gix", "KeySchema": ks("g", "n"), "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    nums = ["10", "-2", "0", "1.5", "-10", "2", "100"]
    for i, n in enumerate(nums):
        ddb.put_item(TableName=t, Item={"pk": S(str(i)), "g": S("x"), "n": N(n)})
    res = qidx(ddb, t, "gix", "g = :x", {":x": S("x")})
    assert [i["n"]["N"] for i in res["Items"]] == ["-10", "-2", "0", "1.5", "2", "10", "100"]


def test_binary_gsi_hash_key(ddb, make_table):
    t = make_table(AttributeDefinitions=ad(pk="S", b="B"), GlobalSecondaryIndexes=[
        {"IndexName": "gix", "KeySchema": ks("b"), "Projection": {"ProjectionType": "ALL"}}])
    ddb.put_item(TableName=t, Item={"pk": S("1"), "b": {"B": b"\x00\xff"}})
    ddb.put_item(TableName=t, Item={"pk": S("2"), "b": {"B": b"\x01"}})
    res = qidx(ddb, t, "gix", "b = :b", {":b": {"B": b"\x00\xff"}})
    assert [i["pk"]["S"] for i in res["Items"]] == ["1"]


def test_query_lsi_keys_only_all_attributes_fetches_from_table(ddb, populated):
    res = qidx(ddb, populated, "lsi_keys", "pk = :p AND lsk = :l", {":p": S("p"), ":l": N(97)},
               Select="ALL_ATTRIBUTES")
    assert res["Items"] == [item("s3", "g", 3, 97, a=S("a3"), b=S("b3"), c=N(3))]


def test_query_lsi_keys_only_projection_of_unprojected_attribute(ddb, populated):
    res = qidx(ddb, populated, "lsi_keys", "pk = :p AND lsk = :l", {":p": S("p"), ":l": N(97)},
               ProjectionExpression="b, lsk")
    assert res["Items"] == [{"b": S("b3"), "lsk": N(97)}]


def test_query_gsi_default_select_keys_only(ddb, populated):
    """Without Select or a projection, an index query returns the projected attributes."""
    res = gq(ddb, populated, index="gsi_keys", Limit=1)
    assert res["Items"] == [{"pk": S("p"), "sk": S("s0"), "gpk": S("g"), "gsk": N(0)}]


def test_failed_conditional_write_leaves_index_unchanged(ddb, itable):
    ddb.put_item(TableName=itable, Item=item("x", "g", 1))
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.put_item(TableName=itable, Item=item("x", "other", 2), ConditionExpression="attribute_not_exists(pk)")
    with pytest.raises(ddb.exceptions.ConditionalCheckFailedException):
        ddb.update_item(TableName=itable, Key={"pk": S("p"), "sk": S("x")}, UpdateExpression="REMOVE gpk",
                        ConditionExpression="gsk = :two", ExpressionAttributeValues={":two": N(2)})
    assert [i["sk"]["S"] for i in gq(ddb, itable)["Items"]] == ["x"]
    assert gq(ddb, itable, gpk="other")["Count"] == 0


def test_parallel_scan_on_gsi(ddb, populated):
    seen = []
    for seg in range(3):
        kw = {}
        while True:
            res = ddb.scan(TableName=populated, IndexName="gsi_all", Segment=seg, TotalSegments=3, Limit=4, **kw)
            seen += [(i["pk"]["S"], i["sk"]["S"]) for i in res["Items"]]
            if "LastEvaluatedKey" not in res:
                break
            kw["ExclusiveStartKey"] = res["LastEvaluatedKey"]
    assert len(seen) == 12 and len(set(seen)) == 12
