"""Query and Scan: key conditions, ordering, paging, Select, counts, segments."""

import pytest

from wire_helpers import validation

NUMS = ["10", "-2", "0", "1.5", "-10", "2", "100", "-0.5"]
NUMS_SORTED = ["-10", "-2", "-0.5", "0", "1.5", "2", "10", "100"]

STRS = ["b", "A", "\U0001F600", "a", "\u00e4", "ab", "B", "\uffff", "aa", "Z", "a b"]
BINS = [b"\x80", b"\x00", b"\xff", b"\x01", b"\x7f", b"\x00\x00", b"\x01\x02"]


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


@pytest.fixture
def num_table(ddb, make_table):
    t = make_table(range_key=("sk", "N"))
    for n in NUMS:
        ddb.put_item(TableName=t, Item={"pk": S("p"), "sk": N(n), "v": S("v" + n)})
    ddb.put_item(TableName=t, Item={"pk": S("other"), "sk": N(1)})
    return t


@pytest.fixture
def str_table(ddb, make_table):
    t = make_table(range_key=("sk", "S"))
    for s in STRS:
        ddb.put_item(TableName=t, Item={"pk": S("p"), "sk": S(s)})
    return t


@pytest.fixture
def bin_table(ddb, make_table):
    t = make_table(range_key=("sk", "B"))
    for b in BINS:
        ddb.put_item(TableName=t, Item={"pk": S("p"), "sk": {"B": b}})
    return t


def q(ddb, table, kce, values, **kw):
    return ddb.query(TableName=table, KeyConditionExpression=kce, ExpressionAttributeValues=values, **kw)


def sks(res, t="N"):
    return [i["sk"][t] for i in res["Items"]]


# ------------------------------------------------------------- ordering

def test_query_numeric_sort_order(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")})
    assert sks(res) == NUMS_SORTED
    assert res["Count"] == len(NUMS) and res["ScannedCount"] == len(NUMS)
    assert "LastEvaluatedKey" not in res


def test_query_scan_index_forward_false(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, ScanIndexForward=False)
    assert sks(res) == NUMS_SORTED[::-1]


def test_query_string_byte_order(ddb, str_table):
    res = q(ddb, str_table, "pk = :p", {":p": S("p")})
    assert sks(res, "S") == sorted(STRS, key=lambda s: s.encode("utf-8"))
    # UTF-8 byte order puts U+1F600 after U+FFFF (UTF-16 order would not)
    assert sks(res, "S")[-2:] == ["\uffff", "\U0001F600"]


def test_query_binary_unsigned_order(ddb, bin_table):
    res = q(ddb, bin_table, "pk = :p", {":p": S("p")})
    assert [i["sk"]["B"] for i in res["Items"]] == sorted(BINS)


# ------------------------------------------------------------- key conditions

@pytest.mark.parametrize("cond,values,expected", [
    ("sk = :a", {":a": N("1.50")}, ["1.5"]),
    ("sk < :a", {":a": N(0)}, ["-10", "-2", "-0.5"]),
    ("sk <= :a", {":a": N(0)}, ["-10", "-2", "-0.5", "0"]),
    ("sk > :a", {":a": N(2)}, ["10", "100"]),
    ("sk >= :a", {":a": N(2)}, ["2", "10", "100"]),
    ("sk BETWEEN :a AND :b", {":a": N(-2), ":b": N(2)}, ["-2", "-0.5", "0", "1.5", "2"]),
    ("sk BETWEEN :a AND :b", {":a": N(3), ":b": N(9)}, []),
])
def test_query_number_key_conditions(ddb, num_table, cond, values, expected):
    res = q(ddb, num_table, "pk = :p AND " + cond, dict(values, **{":p": S("p")}))
    assert sks(res) == expected
    assert res["Count"] == len(expected)


@pytest.mark.parametrize("cond,values,expected", [
    ("begins_with(sk, :a)", {":a": S("a")}, ["a", "a b", "aa", "ab"]),
    ("begins_with(sk, :a)", {":a": S("\u00e4")}, ["\u00e4"]),
    ("sk BETWEEN :a AND :b", {":a": S("B"), ":b": S("a")}, ["B", "Z", "a"]),
    ("sk < :a", {":a": S("a")}, ["A", "B", "Z"]),
    ("sk >= :a", {":a": S("\u00e4")}, ["\u00e4", "\uffff", "\U0001F600"]),
    ("sk = :a", {":a": S("a b")}, ["a b"]),
])
def test_query_string_key_conditions(ddb, str_table, cond, values, expected):
    res = q(ddb, str_table, "pk = :p AND " + cond, dict(values, **{":p": S("p")}))
    assert sks(res, "S") == expected


@pytest.mark.parametrize("cond,values,expected", [
    ("begins_with(sk, :a)", {":a": {"B": b"\x01"}}, [b"\x01", b"\x01\x02"]),
    ("begins_with(sk, :a)", {":a": {"B": b"\x00"}}, [b"\x00", b"\x00\x00"]),
    ("sk BETWEEN :a AND :b", {":a": {"B": b"\x01"}, ":b": {"B": b"\x80"}}, [b"\x01", b"\x01\x02", b"\x7f", b"\x80"]),
    ("sk > :a", {":a": {"B": b"\x7f"}}, [b"\x80", b"\xff"]),
])
def test_query_binary_key_conditions(ddb, bin_table, cond, values, expected):
    res = q(ddb, bin_table, "pk = :p AND " + cond, dict(values, **{":p": S("p")}))
    assert [i["sk"]["B"] for i in res["Items"]] == expected


def test_query_condition_order_and_names(ddb, num_table):
    res = ddb.query(TableName=num_table, KeyConditionExpression="#s > :a AND #p = :p",
                    ExpressionAttributeNames={"#s": "sk", "#p": "pk"},
                    ExpressionAttributeValues={":a": N(10), ":p": S("p")})
    assert sks(res) == ["100"]


def test_query_hash_only_table(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("a"), "x": N(1)})
    ddb.put_item(TableName=table, Item={"pk": S("b"), "x": N(2)})
    res = q(ddb, table, "pk = :p", {":p": S("b")})
    assert res["Items"] == [{"pk": S("b"), "x": N(2)}] and res["Count"] == 1


def test_query_empty_partition(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("nobody")})
    assert res["Items"] == [] and res["Count"] == 0 and res["ScannedCount"] == 0
    assert "LastEvaluatedKey" not in res


def test_query_missing_hash_condition(ddb, num_table):
    validation(ddb.query, message="Query condition missed key schema element: pk",
               TableName=num_table, KeyConditionExpression="sk = :a", ExpressionAttributeValues={":a": N(1)})


def test_query_non_key_attribute_in_key_condition(ddb, num_table):
    validation(ddb.query, TableName=num_table, KeyConditionExpression="pk = :p AND v = :a",
               ExpressionAttributeValues={":p": S("p"), ":a": S("x")})


def test_query_hash_key_range_operator(ddb, num_table):
    validation(ddb.query, message="Query key condition not supported",
               TableName=num_table, KeyConditionExpression="pk > :p", ExpressionAttributeValues={":p": S("p")})


def test_query_begins_with_on_number(ddb, num_table):
    validation(ddb.query, TableName=num_table, KeyConditionExpression="pk = :p AND begins_with(sk, :a)",
               ExpressionAttributeValues={":p": S("p"), ":a": N(1)})


def test_query_or_in_key_condition(ddb, num_table):
    validation(ddb.query, TableName=num_table, KeyConditionExpression="pk = :p OR sk = :a",
               ExpressionAttributeValues={":p": S("p"), ":a": N(1)})


def test_query_key_value_type_mismatch(ddb, num_table):
    validation(ddb.query, message="One or more parameter values were invalid: Condition parameter type "
                                  "does not match schema type",
               TableName=num_table, KeyConditionExpression="pk = :p AND sk = :a",
               ExpressionAttributeValues={":p": S("p"), ":a": S("1")})


def test_query_filter_on_key_attribute(ddb, num_table):
    validation(ddb.query,
               message="Filter Expression can only contain non-primary key attributes: Primary key attribute: sk",
               TableName=num_table, KeyConditionExpression="pk = :p", FilterExpression="sk > :a",
               ExpressionAttributeValues={":p": S("p"), ":a": N(1)})


def test_query_without_key_condition(ddb_raw, num_table):
    validation(ddb_raw.query, TableName=num_table)


# ------------------------------------------------------------- limit, paging

def test_query_limit_and_last_evaluated_key(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, Limit=3)
    assert sks(res) == NUMS_SORTED[:3]
    assert res["LastEvaluatedKey"] == {"pk": S("p"), "sk": N(NUMS_SORTED[2])}
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, Limit=3, ExclusiveStartKey=res["LastEvaluatedKey"])
    assert sks(res) == NUMS_SORTED[3:6]


def test_query_paging_backwards(ddb, num_table):
    got, start = [], None
    while True:
        kw = {"ExclusiveStartKey": start} if start else {}
        res = q(ddb, num_table, "pk = :p", {":p": S("p")}, Limit=3, ScanIndexForward=False, **kw)
        got += sks(res)
        start = res.get("LastEvaluatedKey")
        if not start:
            break
    assert got == NUMS_SORTED[::-1]


def _page_all(call, **kw):
    items, pages, start = [], 0, None
    while True:
        if start:
            kw["ExclusiveStartKey"] = start
        res = call(**kw)
        items += res["Items"]
        pages += 1
        start = res.get("LastEvaluatedKey")
        if not start:
            return items, pages
        assert pages < 1000


@pytest.fixture
def many(ddb, make_table):
    t = make_table(range_key=("sk", "N"))
    for p in range(5):
        for i in range(10):
            ddb.put_item(TableName=t, Item={"pk": S(f"p{p}"), "sk": N(i), "even": {"BOOL": i % 2 == 0}})
    return t


def test_query_paging_reassembles_every_item_once(ddb, many):
    items, pages = _page_all(ddb.query, TableName=many, Limit=3, KeyConditionExpression="pk = :p",
                             ExpressionAttributeValues={":p": S("p3")})
    assert [i["sk"]["N"] for i in items] == [str(i) for i in range(10)]
    assert pages >= 4


def test_scan_paging_reassembles_every_item_once(ddb, many):
    items, pages = _page_all(ddb.scan, TableName=many, Limit=7)
    keys = [(i["pk"]["S"], i["sk"]["N"]) for i in items]
    assert len(keys) == 50 and len(set(keys)) == 50
    assert pages >= 8


def test_scan_items_of_one_partition_in_sort_order(ddb, many):
    items, _ = _page_all(ddb.scan, TableName=many, Limit=4)
    for p in range(5):
        got = [int(i["sk"]["N"]) for i in items if i["pk"]["S"] == f"p{p}"]
        assert got == list(range(10))


def test_query_one_mb_page_limit(ddb, make_table):
    t = make_table(range_key=("sk", "N"))
    blob = "x" * (100 * 1024)
    for i in range(25):
        ddb.put_item(TableName=t, Item={"pk": S("p"), "sk": N(i), "d": S(blob)})
    first = q(ddb, t, "pk = :p", {":p": S("p")})
    assert "LastEvaluatedKey" in first
    assert 5 <= first["Count"] <= 11, first["Count"]
    items, pages = _page_all(ddb.query, TableName=t, KeyConditionExpression="pk = :p",
                             ExpressionAttributeValues={":p": S("p")})
    assert [int(i["sk"]["N"]) for i in items] == list(range(25))
    assert pages >= 3


def test_scan_one_mb_page_limit(ddb, make_table):
    t = make_table()
    blob = "y" * (100 * 1024)
    for i in range(25):
        ddb.put_item(TableName=t, Item={"pk": S(f"k{i}"), "d": S(blob)})
    first = ddb.scan(TableName=t)
    assert "LastEvaluatedKey" in first
    assert 5 <= first["Count"] <= 11, first["Count"]
    items, _ = _page_all(ddb.scan, TableName=t)
    assert sorted(i["pk"]["S"] for i in items) == sorted(f"k{i}" for i in range(25))


@pytest.mark.parametrize("limit", [0, -1])
def test_invalid_limit(ddb_raw, num_table, limit):
    validation(ddb_raw.query, match=r"limit.*Member must have value greater than or equal to 1",
               TableName=num_table, Limit=limit, KeyConditionExpression="pk = :p",
               ExpressionAttributeValues={":p": S("p")})
    validation(ddb_raw.scan, match=r"limit.*Member must have value greater than or equal to 1",
               TableName=num_table, Limit=limit)


def test_invalid_exclusive_start_key(ddb, num_table):
    validation(ddb.query, match=r"^The provided starting key is invalid",
               TableName=num_table, KeyConditionExpression="pk = :p",
               ExpressionAttributeValues={":p": S("p")}, ExclusiveStartKey={"nope": S("x")})
    validation(ddb.scan, match=r"^The provided starting key is invalid",
               TableName=num_table, ExclusiveStartKey={"pk": S("p")})


# ------------------------------------------------------------- Select, filters, counts

def test_select_count(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, Select="COUNT")
    assert "Items" not in res
    assert res["Count"] == len(NUMS) and res["ScannedCount"] == len(NUMS)
    res = ddb.scan(TableName=num_table, Select="COUNT")
    assert "Items" not in res and res["Count"] == len(NUMS) + 1


def test_select_all_attributes(ddb, num_table):
    res = q(ddb, num_table, "pk = :p AND sk = :z", {":p": S("p"), ":z": N(0)}, Select="ALL_ATTRIBUTES")
    assert res["Items"] == [{"pk": S("p"), "sk": N(0), "v": S("v0")}]


def test_select_specific_attributes(ddb, num_table):
    res = q(ddb, num_table, "pk = :p AND sk = :z", {":p": S("p"), ":z": N(0)},
            Select="SPECIFIC_ATTRIBUTES", ProjectionExpression="v")
    assert res["Items"] == [{"v": S("v0")}]


def test_projection_without_select(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, ProjectionExpression="sk")
    assert res["Items"] == [{"sk": N(n)} for n in NUMS_SORTED]


def test_select_all_attributes_with_projection(ddb, num_table):
    validation(ddb.query, TableName=num_table, Select="ALL_ATTRIBUTES", ProjectionExpression="v",
               KeyConditionExpression="pk = :p", ExpressionAttributeValues={":p": S("p")})


def test_select_invalid(ddb_raw, num_table):
    validation(ddb_raw.scan, match=r"select.*Member must satisfy enum value set",
               TableName=num_table, Select="SOME")


def test_query_filter_counts(ddb, many):
    res = q(ddb, many, "pk = :p", {":p": S("p1"), ":t": {"BOOL": True}}, FilterExpression="even = :t")
    assert res["Count"] == 5 and res["ScannedCount"] == 10
    assert [i["sk"]["N"] for i in res["Items"]] == ["0", "2", "4", "6", "8"]


def test_filter_applied_after_limit(ddb, many):
    res = q(ddb, many, "pk = :p", {":p": S("p1"), ":t": {"BOOL": True}}, FilterExpression="even = :t", Limit=3)
    assert res["ScannedCount"] == 3
    assert res["Count"] == 2
    assert [i["sk"]["N"] for i in res["Items"]] == ["0", "2"]
    assert res["LastEvaluatedKey"] == {"pk": S("p1"), "sk": N(2)}


def test_filter_matching_nothing_still_pages(ddb, many):
    res = q(ddb, many, "pk = :p", {":p": S("p1"), ":x": N(99)}, FilterExpression="sk2 = :x", Limit=4)
    assert res["Count"] == 0 and res["Items"] == [] and res["ScannedCount"] == 4
    assert "LastEvaluatedKey" in res


def test_scan_filter_counts(ddb, many):
    res = ddb.scan(TableName=many, FilterExpression="even = :f AND pk IN (:a, :b)",
                   ExpressionAttributeValues={":f": {"BOOL": False}, ":a": S("p0"), ":b": S("p4")})
    assert res["Count"] == 10 and res["ScannedCount"] == 50


def test_scan_select_count_with_filter(ddb, many):
    res = ddb.scan(TableName=many, Select="COUNT", FilterExpression="sk < :n",
                   ExpressionAttributeValues={":n": N(3)})
    assert res["Count"] == 15 and res["ScannedCount"] == 50 and "Items" not in res


def test_consistent_read_accepted(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, ConsistentRead=True)
    assert res["Count"] == len(NUMS)
    assert ddb.scan(TableName=num_table, ConsistentRead=True)["Count"] == len(NUMS) + 1


def test_query_consumed_capacity(ddb, num_table):
    res = q(ddb, num_table, "pk = :p", {":p": S("p")}, ReturnConsumedCapacity="TOTAL")
    cc = res["ConsumedCapacity"]
    assert cc["TableName"] == num_table and cc["CapacityUnits"] > 0
    res = ddb.scan(TableName=num_table, ReturnConsumedCapacity="TOTAL", ConsistentRead=True)
    assert res["ConsumedCapacity"]["CapacityUnits"] >= 1.0


# ------------------------------------------------------------- parallel scan

@pytest.mark.parametrize("total", [1, 2, 4, 7])
def test_parallel_scan_covers_all_items_once(ddb, many, total):
    seen = []
    for seg in range(total):
        items, _ = _page_all(ddb.scan, TableName=many, Segment=seg, TotalSegments=total, Limit=6)
        seen += [(i["pk"]["S"], i["sk"]["N"]) for i in items]
    assert len(seen) == 50 and len(set(seen)) == 50


def test_parallel_scan_partition_stays_in_one_segment(ddb, many):
    owner = {}
    for seg in range(4):
        items, _ = _page_all(ddb.scan, TableName=many, Segment=seg, TotalSegments=4)
        for i in items:
            owner.setdefault(i["pk"]["S"], set()).add(seg)
    assert all(len(s) == 1 for s in owner.values()), owner


@pytest.mark.parametrize("kw", [
    {"Segment": 4, "TotalSegments": 4},
    {"Segment": 0},
    {"TotalSegments": 2},
    {"Segment": 0, "TotalSegments": 0},
    {"Segment": -1, "TotalSegments": 2},
    {"Segment": 0, "TotalSegments": 1000001},
])
def test_parallel_scan_invalid_segments(ddb_raw, many, kw):
    validation(ddb_raw.scan, TableName=many, **kw)


def test_segment_error_message(ddb, many):
    validation(ddb.scan,
               message="The Segment parameter is zero-based and must be less than parameter TotalSegments: "
                       "Segment: 3 is not less than TotalSegments: 3",
               TableName=many, Segment=3, TotalSegments=3)
