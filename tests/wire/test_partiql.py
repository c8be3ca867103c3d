"""PartiQL: ExecuteStatement, BatchExecuteStatement and ExecuteTransaction
lowered onto the item, query and transaction operations."""

import uuid

import pytest
from botocore.exceptions import ClientError

from wire_helpers import expect_error, validation

INCOMPLETE = "Where clause does not contain a mandatory equality on all key attributes"
DUP = "Duplicate primary key exists in table"


def S(v):
    return {"S": v}


def N(v):
    return {"N": str(v)}


def ex(ddb, stmt, params=None, **kw):
    if params is not None:
        kw["Parameters"] = params
    return ddb.execute_statement(Statement=stmt, **kw)


def get(ddb, table, key):
    return ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")


@pytest.fixture
def music(make_table, ddb):
    t = make_table(hash_key=("Artist", "S"), range_key=("SongTitle", "S"))
    for a, s, y in [("A", "s1", 2001), ("A", "s2", 2002), ("A", "t3", 2003), ("B", "s1", 1999), ("C", "x", 2010)]:
        ddb.put_item(TableName=t, Item={"Artist": S(a), "SongTitle": S(s), "Year": N(y),
                                        "Info": {"M": {"tags": {"L": [S("x"), S("y"), S("z")]}}}})
    return t


# ------------------------------------------------------------------ SELECT

def test_select_by_full_key(ddb, music):
    r = ex(ddb, f'SELECT * FROM "{music}" WHERE Artist = ? AND SongTitle = ?', [S("A"), S("s2")], ConsistentRead=True)
    assert r["Items"] == [get(ddb, music, {"Artist": S("A"), "SongTitle": S("s2")})]
    r = ex(ddb, f"SELECT * FROM \"{music}\" WHERE Artist = 'A' AND SongTitle = 'none'")
    assert r["Items"] == []


def test_select_projection_nested_paths(ddb, music):
    r = ex(ddb, f'select "Year", Info.tags[1] FROM "{music}" where Artist=\'A\' and SongTitle=\'s1\'')
    assert r["Items"] == [{"Year": N(2001), "Info": {"M": {"tags": {"L": [S("y")]}}}}]


def test_select_query_sort_key_conditions(ddb, music):
    def titles(stmt, params=None):
        return [i["SongTitle"]["S"] for i in ex(ddb, stmt, params)["Items"]]
    base = f'SELECT SongTitle FROM "{music}" WHERE Artist = \'A\''
    assert titles(base) == ["s1", "s2", "t3"]
    assert titles(base + " AND SongTitle > 's1'") == ["s2", "t3"]
    assert titles(f"SELECT SongTitle FROM \"{music}\" WHERE 'A' = Artist AND 's1' < SongTitle") == ["s2", "t3"]
    assert titles(base + " AND SongTitle <= 's2'") == ["s1", "s2"]
    assert titles(base + " AND SongTitle BETWEEN 's2' AND 'z'") == ["s2", "t3"]
    assert titles(base + " AND begins_with(SongTitle, 's')") == ["s1", "s2"]
    assert titles(base + " ORDER BY SongTitle DESC") == ["t3", "s2", "s1"]
    assert titles(base + " AND \"Year\" >= ? ORDER BY SongTitle DESC", [N(2002)]) == ["t3", "s2"]


def test_select_in_on_partition_key_with_order(ddb, music):
    r = ex(ddb, f'SELECT Artist, SongTitle FROM "{music}" WHERE Artist IN (\'C\', \'A\', \'B\') ORDER BY Artist DESC, SongTitle')
    got = [(i["Artist"]["S"], i["SongTitle"]["S"]) for i in r["Items"]]
    assert got == [("C", "x"), ("A", "s1"), ("A", "s2"), ("A", "t3"), ("B", "s1")] or \
        got == [("C", "x"), ("B", "s1"), ("A", "s1"), ("A", "s2"), ("A", "t3")]
    assert got[0] == ("C", "x") and got[-1] != ("C", "x")


def test_select_scan_with_filter_and_functions(ddb, music):
    def keys(where, params=None):
        r = ex(ddb, f'SELECT * FROM "{music}" WHERE {where}', params)
        return sorted((i["Artist"]["S"], i["SongTitle"]["S"]) for i in r["Items"])
    assert keys('"Year" < 2000') == [("B", "s1")]
    assert keys("SongTitle = 's1'") == [("A", "s1"), ("B", "s1")]
    assert keys("contains(Info.tags, 'y') AND \"Year\" BETWEEN 2003 AND 2010") == [("A", "t3"), ("C", "x")]
    assert keys("size(Info.tags) = 3 AND Artist <> 'A'") == [("B", "s1"), ("C", "x")]
    assert keys("attribute_type(\"Year\", 'N') AND NOT begins_with(SongTitle, 's')") == [("A", "t3"), ("C", "x")]
    assert keys("Absent IS MISSING AND \"Year\" IS NOT MISSING AND \"Year\" IN (1999, 2010)") == [("B", "s1"), ("C", "x")]
    assert keys("Nope IS NOT MISSING") == []
    assert len(ex(ddb, f'SELECT * FROM "{music}"')["Items"]) == 5


def test_select_is_null(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("n"), "v": {"NULL": True}})
    ddb.put_item(TableName=table, Item={"pk": S("s"), "v": S("x")})
    r = ex(ddb, f'SELECT pk FROM "{table}" WHERE v IS NULL')
    assert r["Items"] == [{"pk": S("n")}]
    r = ex(ddb, f'SELECT pk FROM "{table}" WHERE v IS NOT NULL')
    assert r["Items"] == [{"pk": S("s")}]


def test_select_is_null_of_a_missing_attribute(ddb, table):
    # IS NULL tests the type of a value: an item without the attribute is
    # not NULL (IS NOT NULL holds for it); IS MISSING tests absence.
    ddb.put_item(TableName=table, Item={"pk": S("n"), "v": {"NULL": True}})
    ddb.put_item(TableName=table, Item={"pk": S("s"), "v": S("x")})
    ddb.put_item(TableName=table, Item={"pk": S("m")})

    def pks(where):
        return sorted(i["pk"]["S"] for i in ex(ddb, f'SELECT pk FROM "{table}" WHERE {where}')["Items"])
    assert pks("v IS NULL") == ["n"]
    assert pks("v IS NOT NULL") == ["m", "s"]
    assert pks("v IS MISSING") == ["m"]
    assert pks("v IS NOT MISSING") == ["n", "s"]
    assert pks("v IS MISSING OR v IS NULL") == ["m", "n"]
    assert pks("NOT (v IS NULL)") == ["m", "s"]
    # The same tests as a write's condition.
    ex(ddb, f"UPDATE \"{table}\" SET w = 1 WHERE pk = 'm' AND v IS NOT NULL")
    expect_error(ddb.execute_statement, "ConditionalCheckFailedException", None,
                 Statement=f"UPDATE \"{table}\" SET w = 1 WHERE pk = 'm' AND v IS NULL")
    assert get(ddb, table, {"pk": S("m")}) == {"pk": S("m"), "w": N(1)}


def test_select_or_of_partition_keys_is_queries(ddb, make_table):
    t = make_table(hash_key=("pk", "S"), range_key=("sk", "N"))
    for p in ("a", "b", "c"):
        for i in range(3):
            ddb.put_item(TableName=t, Item={"pk": S(p), "sk": N(i)})
    # Bulk the table outside the partitions read: a Scan would pay for it.
    filler = "f" * 8000
    for i in range(20):
        ddb.put_item(TableName=t, Item={"pk": S(f"z{i}"), "sk": N(0), "v": S(filler)})

    def rows(r):
        return [(i["pk"]["S"], int(i["sk"]["N"])) for i in r["Items"]]
    stmt = f"SELECT pk, sk FROM \"{t}\" WHERE pk = 'b' OR pk = 'a'"
    r = ex(ddb, stmt, ReturnConsumedCapacity="TOTAL")
    assert sorted(rows(r)) == [(p, i) for p in ("a", "b") for i in range(3)]
    # Two small partitions read by Queries, not 20 items of 8 KB by a Scan.
    assert r["ConsumedCapacity"]["CapacityUnits"] <= 1.0
    # ORDER BY needs a partition key condition: the OR is one.
    r = ex(ddb, stmt + " ORDER BY pk DESC, sk DESC")
    assert rows(r) == [("b", 2), ("b", 1), ("b", 0), ("a", 2), ("a", 1), ("a", 0)]
    r = ex(ddb, f"SELECT pk, sk FROM \"{t}\" WHERE (pk = ? OR pk IN ('c', 'a') OR pk = 'a') AND sk > 0 ORDER BY pk",
           [S("b")])
    assert rows(r) == [("a", 1), ("a", 2), ("b", 1), ("b", 2), ("c", 1), ("c", 2)]
    # Paged with Limit, the pages continue across the partitions.
    seen, token = [], None
    while True:
        kw = {"Limit": 2}
        if token:
            kw["NextToken"] = token
        r = ex(ddb, stmt + " ORDER BY pk", **kw)
        assert len(r["Items"]) <= 2
        seen += rows(r)
        token = r.get("NextToken")
        if not token:
            break
    assert seen == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1), ("b", 2)]
    # An OR that is not only partition key equalities is a filter of a Scan.
    r = ex(ddb, f"SELECT pk, sk FROM \"{t}\" WHERE pk = 'a' OR sk = 2", ReturnConsumedCapacity="TOTAL")
    assert sorted(rows(r)) == [("a", 0), ("a", 1), ("a", 2), ("b", 2), ("c", 2)]
    assert r["ConsumedCapacity"]["CapacityUnits"] > 10
    validation(ddb.execute_statement, match="non-optional hash key condition",
               Statement=f"SELECT pk FROM \"{t}\" WHERE pk = 'a' OR sk = 2 ORDER BY pk")


def test_select_on_index(ddb, make_table):
    t = make_table(AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "g", "AttributeType": "S"}],
                   GlobalSecondaryIndexes=[{"IndexName": "byg", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                            "Projection": {"ProjectionType": "ALL"}}])
    for i in range(3):
        ddb.put_item(TableName=t, Item={"pk": S(f"k{i}"), "g": S("G" if i < 2 else "H")})
    r = ex(ddb, f'SELECT pk FROM "{t}"."byg" WHERE g = \'G\'')
    assert sorted(i["pk"]["S"] for i in r["Items"]) == ["k0", "k1"]
    validation(ddb.execute_statement, match="does not have the specified index: nope",
               Statement=f'SELECT * FROM "{t}"."nope" WHERE g = \'G\'')
    validation(ddb.execute_statement, match="onsistent read",
               Statement=f'SELECT * FROM "{t}"."byg" WHERE g = \'G\'', ConsistentRead=True)


def test_select_paging_limit_and_next_token(ddb, table):
    for i in range(7):
        ddb.put_item(TableName=table, Item={"pk": S(f"p{i}"), "n": N(i)})
    seen, token, pages = [], None, 0
    while True:
        kw = {"Limit": 3}
        if token:
            kw["NextToken"] = token
        r = ex(ddb, f'SELECT pk FROM "{table}" WHERE n >= 0', **kw)
        pages += 1
        assert len(r["Items"]) <= 3
        seen += [i["pk"]["S"] for i in r["Items"]]
        token = r.get("NextToken")
        if not token:
            break
    assert sorted(seen) == [f"p{i}" for i in range(7)] and pages >= 3
    # A token belongs to its statement.
    r = ex(ddb, f'SELECT pk FROM "{table}" WHERE n >= 0', Limit=2)
    validation(ddb.execute_statement, "NextToken does not match request",
               Statement=f'SELECT pk FROM "{table}" WHERE n >= 1', NextToken=r["NextToken"])
    validation(ddb.execute_statement, "Invalid NextToken", Statement=f'SELECT pk FROM "{table}"', NextToken="!!garbage")


def test_select_paging_in_list(ddb, music):
    seen, token = [], None
    while True:
        kw = {"Limit": 2}
        if token:
            kw["NextToken"] = token
        r = ex(ddb, f'SELECT * FROM "{music}" WHERE Artist IN [\'A\', \'B\', \'C\']', **kw)
        seen += [(i["Artist"]["S"], i["SongTitle"]["S"]) for i in r["Items"]]
        token = r.get("NextToken")
        if not token:
            break
    assert sorted(seen) == [("A", "s1"), ("A", "s2"), ("A", "t3"), ("B", "s1"), ("C", "x")]


def test_select_one_megabyte_page(ddb, table):
    big = "x" * 300_000
    for i in range(5):
        ddb.put_item(TableName=table, Item={"pk": S(f"b{i}"), "v": S(big)})
    r = ex(ddb, f'SELECT pk FROM "{table}"')
    assert 0 < len(r["Items"]) < 5 and "NextToken" in r
    r2 = ex(ddb, f'SELECT pk FROM "{table}"', NextToken=r["NextToken"])
    assert len(r["Items"]) + len(r2["Items"]) <= 5


def test_select_one_megabyte_page_across_partition_keys(ddb, make_table):
    # The 1 MB bound is the page's, whatever number of partitions it reads.
    t = make_table(hash_key=("pk", "S"), range_key=("sk", "N"))
    big = "x" * 100_000
    for p in ("a", "b"):
        for i in range(7):
            ddb.put_item(TableName=t, Item={"pk": S(p), "sk": N(i), "v": S(big)})
    for stmt in (f"SELECT pk, sk FROM \"{t}\" WHERE pk IN ('a', 'b')",
                 f"SELECT pk, sk FROM \"{t}\" WHERE pk = 'a' OR pk = 'b'"):
        seen, token, pages = [], None, []
        while True:
            r = ex(ddb, stmt, **({"NextToken": token} if token else {}))
            pages.append(len(r["Items"]))
            seen += [(i["pk"]["S"], int(i["sk"]["N"])) for i in r["Items"]]
            token = r.get("NextToken")
            if not token:
                break
        # 14 items of 100 KB: no page holds more than 1 MB of them.
        assert max(pages) <= 11 and len(pages) >= 2, pages
        assert sorted(seen) == [(p, i) for p in ("a", "b") for i in range(7)]


def test_select_consumed_capacity(ddb, music):
    r = ex(ddb, f"SELECT * FROM \"{music}\" WHERE Artist = 'A' AND SongTitle = 's1'", ReturnConsumedCapacity="TOTAL")
    assert r["ConsumedCapacity"]["TableName"] == music and r["ConsumedCapacity"]["CapacityUnits"] == 0.5


# ------------------------------------------------------------------ writes

def test_insert_and_duplicate(ddb, table):
    ex(ddb, f"INSERT INTO \"{table}\" VALUE {{'pk': 'a', 'n': 1.50, 'b': true, 'z': NULL, 'l': [1, 'x'], "
            f"'m': {{'k': <<'s', 't'>>}}, 'ns': <<1, 2>>, 'p': ?}}", [{"B": b"\x01\x02"}])
    assert get(ddb, table, {"pk": S("a")}) == {
        "pk": S("a"), "n": N("1.5"), "b": {"BOOL": True}, "z": {"NULL": True}, "l": {"L": [N(1), S("x")]},
        "m": {"M": {"k": {"SS": ["s", "t"]}}}, "ns": {"NS": ["1", "2"]}, "p": {"B": b"\x01\x02"}}
    expect_error(ddb.execute_statement, "DuplicateItemException", DUP,
                 Statement=f"INSERT INTO \"{table}\" VALUE {{'pk': 'a'}}")
    ex(ddb, f'INSERT INTO "{table}" VALUE ?', [{"M": {"pk": S("b"), "v": N(2)}}])
    assert get(ddb, table, {"pk": S("b")}) == {"pk": S("b"), "v": N(2)}
    validation(ddb.execute_statement, match="Missing the key pk",
               Statement=f"INSERT INTO \"{table}\" VALUE {{'x': 1}}")


def test_update_set_remove_and_returning(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("u"), "n": N(1), "l": {"L": [N(1)]}, "ss": {"SS": ["a", "b"]}, "gone": S("x")})
    r = ex(ddb, f"UPDATE \"{table}\" SET n = n + 2 SET l = list_append(l, [2, 3]) REMOVE gone "
                f"SET ss = set_add(ss, <<'c'>>) SET m = {{'k': 'v'}} WHERE pk = 'u' RETURNING ALL NEW *")
    want = {"pk": S("u"), "n": N(3), "l": {"L": [N(1), N(2), N(3)]}, "ss": {"SS": ["a", "b", "c"]}, "m": {"M": {"k": S("v")}}}
    assert r["Items"] == [want] and get(ddb, table, {"pk": S("u")}) == want
    r = ex(ddb, f"UPDATE \"{table}\" SET ss = set_delete(ss, <<'a'>>), m.k = ? WHERE pk = 'u' RETURNING MODIFIED OLD *", [S("w")])
    assert r["Items"] == [{"ss": {"SS": ["a", "b", "c"]}, "m": {"M": {"k": S("v")}}}]
    r = ex(ddb, f"UPDATE \"{table}\" SET n = 10 WHERE pk = 'u' RETURNING MODIFIED NEW *")
    assert r["Items"] == [{"n": N(10)}]
    r = ex(ddb, f"UPDATE \"{table}\" SET n = 11 WHERE pk = 'u'")
    assert r["Items"] == []


def test_update_conditions(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("c"), "v": N(1)})
    ex(ddb, f"UPDATE \"{table}\" SET v = 2 WHERE pk = 'c' AND v = 1")
    info = expect_error(ddb.execute_statement, "ConditionalCheckFailedException", "The conditional request failed",
                        Statement=f"UPDATE \"{table}\" SET v = 3 WHERE pk = 'c' AND v = 1",
                        ReturnValuesOnConditionCheckFailure="ALL_OLD")
    assert info.response.get("Item") == {"pk": S("c"), "v": N(2)}
    # UPDATE never creates an item.
    expect_error(ddb.execute_statement, "ConditionalCheckFailedException",
                 Statement=f"UPDATE \"{table}\" SET v = 3 WHERE pk = 'missing'")
    assert get(ddb, table, {"pk": S("missing")}) is None
    validation(ddb.execute_statement, match="part of the key",
               Statement=f"UPDATE \"{table}\" SET pk = 'z' WHERE pk = 'c'")


def test_delete(ddb, table_hr):
    t = table_hr
    ddb.put_item(TableName=t, Item={"pk": S("d"), "sk": S("1"), "v": N(5)})
    validation(ddb.execute_statement, INCOMPLETE, Statement=f"DELETE FROM \"{t}\" WHERE pk = 'd'")
    validation(ddb.execute_statement, INCOMPLETE, Statement=f"DELETE FROM \"{t}\" WHERE pk = 'd' AND sk > '0'")
    expect_error(ddb.execute_statement, "ConditionalCheckFailedException",
                 Statement=f"DELETE FROM \"{t}\" WHERE pk = 'd' AND sk = '1' AND v = 6")
    # A missing item is deleted successfully, condition or not.
    assert ex(ddb, f"DELETE FROM \"{t}\" WHERE pk = 'none' AND sk = '1' AND v = 6")["Items"] == []
    r = ex(ddb, f"DELETE FROM \"{t}\" WHERE pk = 'd' AND sk = '1' AND v = 5 RETURNING ALL OLD *")
    assert r["Items"] == [{"pk": S("d"), "sk": S("1"), "v": N(5)}]
    assert get(ddb, t, {"pk": S("d"), "sk": S("1")}) is None


def test_write_needs_full_key(ddb, table_hr):
    for stmt in [f"UPDATE \"{table_hr}\" SET v = 1 WHERE pk = 'a'",
                 f"UPDATE \"{table_hr}\" SET v = 1 WHERE pk = 'a' OR sk = 'b'",
                 f"DELETE FROM \"{table_hr}\" WHERE v = 1"]:
        validation(ddb.execute_statement, INCOMPLETE, Statement=stmt)


# ------------------------------------------------------------------ errors

@pytest.mark.parametrize("stmt,msg", [
    ("SELECT * FROM", "Statement wasn't well formed, can't be processed: unexpected end of statement"),
    ("SELECT * FROM t WHERE a = 'x", None),
    ("SELECT a, * FROM tbl", "Other attributes should not be present in the projection when '*' is used."),
    ("DROP TABLE tbl", "Unsupported operation: DROP"),
    ("INSERT INTO tbl VALUE {'a': 1} RETURNING ALL OLD *", "RETURNING is not supported in INSERT"),
    ("DELETE FROM tbl WHERE a = 1 RETURNING ALL NEW *", "Invalid returning clause: RETURNING ALL NEW *. Only RETURNING ALL OLD * is allowed in DELETE statements."),
    ("SELECT * FROM tbl WHERE a = MISSING", "MISSING must be compared using IS operator"),
    ("SELECT * FROM tbl; SELECT * FROM tbl", "Only one operation is allowed in a statement."),
    ("EXISTS(SELECT * FROM tbl WHERE a = 1)", "EXISTS can only be used in ExecuteTransaction write requests."),
    ("SELECT * FROM ab WHERE a = 1", "Table name should be within the length [3, 255] and only contain 'a-z', 'A-Z', '0-9', '-', '_', '.'."),
])
def test_statement_errors(ddb, stmt, msg):
    info = validation(ddb.execute_statement, msg, Statement=stmt)
    assert info.message.strip()


def test_parameter_count_and_missing_table(ddb, table):
    validation(ddb.execute_statement, "Number of parameters in request and statement don't match.",
               Statement=f'SELECT * FROM "{table}" WHERE pk = ? AND x = ?', Parameters=[S("a")])
    validation(ddb.execute_statement, "Number of parameters in request and statement don't match.",
               Statement=f'SELECT * FROM "{table}"', Parameters=[S("a")])
    expect_error(ddb.execute_statement, "ResourceNotFoundException", Statement='SELECT * FROM "no_such_table_x"')
    validation(ddb.execute_statement, match="ORDER BY",
               Statement=f'SELECT * FROM "{table}" ORDER BY pk')
    validation(ddb.execute_statement, "Variable reference v in ORDER BY clause must be part of the primary key",
               Statement=f"SELECT * FROM \"{table}\" WHERE pk = 'a' ORDER BY v")


def test_long_adversarial_statement_is_answered(ddb, table):
    stmt = f'SELECT * FROM "{table}" WHERE ' + "(" * 4000
    info = validation(ddb.execute_statement, Statement=stmt)
    assert "nests more than" in info.message


# ------------------------------------------------------------------ batch

def test_batch_writes_with_per_statement_errors(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("dup")})
    r = ddb.batch_execute_statement(Statements=[
        {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'b1'}}"},
        {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'dup'}}"},
        {"Statement": f"UPDATE \"{table}\" SET v = 1 WHERE pk = ?", "Parameters": [S("dup")]},
        {"Statement": f"UPDATE \"{table}\" SET v = 1 WHERE pk = 'dup' AND v = 5", "ReturnValuesOnConditionCheckFailure": "ALL_OLD"},
        {"Statement": f"DELETE FROM \"{table}\" WHERE x = 1"},
        {"Statement": "SELEC oops"},
    ])
    rs = r["Responses"]
    assert len(rs) == 6
    assert "Error" not in rs[0] and rs[0]["TableName"] == table
    assert rs[1]["Error"]["Code"] == "DuplicateItem" and rs[1]["Error"]["Message"] == DUP
    assert "Error" not in rs[2]
    assert rs[3]["Error"]["Code"] == "ConditionalCheckFailed" and rs[3]["Error"]["Item"] == {"pk": S("dup"), "v": N(1)}
    assert rs[4]["Error"] == {"Code": "ValidationError", "Message": INCOMPLETE}
    assert rs[5]["Error"]["Code"] == "ValidationError"
    assert get(ddb, table, {"pk": S("b1")}) == {"pk": S("b1")}


def test_batch_reads(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("r1"), "v": N(1)})
    r = ddb.batch_execute_statement(Statements=[
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'r1'", "ConsistentRead": True},
        {"Statement": f"SELECT v FROM \"{table}\" WHERE pk = ?", "Parameters": [S("r1")]},
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'nope'"},
        {"Statement": f"SELECT * FROM \"{table}\" WHERE v = 1"},
    ], ReturnConsumedCapacity="TOTAL")
    rs = r["Responses"]
    assert rs[0]["Item"] == {"pk": S("r1"), "v": N(1)} and rs[1]["Item"] == {"v": N(1)}
    assert "Item" not in rs[2] and "Error" not in rs[2]
    assert rs[3]["Error"]["Code"] == "ValidationError"
    assert r["ConsumedCapacity"][0]["TableName"] == table


def test_batch_limits_and_mixing(ddb, table):
    validation(ddb.batch_execute_statement, match="cannot mix both", Statements=[
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'a'"},
        {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'a'}}"}])
    stmts = [{"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'k{i}'"} for i in range(26)]
    validation(ddb.batch_execute_statement, match="less than or equal to 25", Statements=stmts)


# ------------------------------------------------------------------ transactions

def test_transaction_writes_and_exists(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("acct"), "bal": N(10)})
    ddb.put_item(TableName=table, Item={"pk": S("gone")})
    ddb.put_item(TableName=table, Item={"pk": S("other"), "bal": N(1)})
    r = ddb.execute_transaction(TransactStatements=[
        {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'new', 'v': 1}}"},
        {"Statement": f"UPDATE \"{table}\" SET bal = bal - 3 WHERE pk = 'acct' AND bal >= 3"},
        {"Statement": f"DELETE FROM \"{table}\" WHERE pk = ?", "Parameters": [S("gone")]},
    ])
    assert r["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert get(ddb, table, {"pk": S("acct")})["bal"] == N(7)
    assert get(ddb, table, {"pk": S("new")}) == {"pk": S("new"), "v": N(1)}
    assert get(ddb, table, {"pk": S("gone")}) is None
    try:
        ddb.execute_transaction(TransactStatements=[
            {"Statement": f"EXISTS(SELECT * FROM \"{table}\" WHERE pk = 'other' AND bal > 100)"},
            {"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'new'}}"},
            {"Statement": f"UPDATE \"{table}\" SET bal = 0 WHERE pk = 'acct'"},
        ])
    except ClientError as e:
        assert e.response["Error"]["Code"] == "TransactionCanceledException"
        codes = [x["Code"] for x in e.response["CancellationReasons"]]
        assert codes == ["ConditionalCheckFailed", "DuplicateItem", "None"], codes
        assert "[ConditionalCheckFailed, DuplicateItem, None]" in e.response["Error"]["Message"]
    else:
        raise AssertionError("transaction succeeded")
    assert get(ddb, table, {"pk": S("acct")})["bal"] == N(7)


def test_transaction_reads(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("x"), "v": N(1), "w": N(2)})
    r = ddb.execute_transaction(TransactStatements=[
        {"Statement": f"SELECT v FROM \"{table}\" WHERE pk = 'x'"},
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'missing'"},
    ])
    assert r["Responses"][0] == {"Item": {"v": N(1)}} and "Item" not in r["Responses"][1]
    validation(ddb.execute_transaction, "Select statements within ExecuteTransaction must specify the primary key in the where clause.",
               TransactStatements=[{"Statement": f"SELECT * FROM \"{table}\" WHERE v = 1"}])
    validation(ddb.execute_transaction, match="cannot mix both", TransactStatements=[
        {"Statement": f"SELECT * FROM \"{table}\" WHERE pk = 'x'"},
        {"Statement": f"UPDATE \"{table}\" SET v = 2 WHERE pk = 'x'"}])


def test_transaction_idempotency(ddb, table):
    ddb.put_item(TableName=table, Item={"pk": S("i"), "n": N(0)})
    tok = str(uuid.uuid4())
    stmts = [{"Statement": f"UPDATE \"{table}\" SET n = n + 1 WHERE pk = 'i'"}]
    ddb.execute_transaction(TransactStatements=stmts, ClientRequestToken=tok)
    ddb.execute_transaction(TransactStatements=stmts, ClientRequestToken=tok)
    assert get(ddb, table, {"pk": S("i")})["n"] == N(1)
    expect_error(ddb.execute_transaction, "IdempotentParameterMismatchException", ClientRequestToken=tok,
                 TransactStatements=[{"Statement": f"UPDATE \"{table}\" SET n = n + 2 WHERE pk = 'i'"}])


def test_transaction_limit(ddb, table):
    stmts = [{"Statement": f"INSERT INTO \"{table}\" VALUE {{'pk': 'k{i}'}}"} for i in range(101)]
    validation(ddb.execute_transaction, match="less than or equal to 100", TransactStatements=stmts)


def test_insert_nesting_limit_counts_parameters(ddb, table):
    deep = S("x")
    for _ in range(30):
        deep = {"L": [deep]}
    ex(ddb, f"INSERT INTO \"{table}\" VALUE {{'pk': 'deep', 'a': [[?]]}}", [deep])
    assert get(ddb, table, {"pk": S("deep")})["a"] == {"L": [{"L": [deep]}]}
    validation(ddb.execute_statement, "Nesting Levels have exceeded supported limits",
               Statement=f"INSERT INTO \"{table}\" VALUE {{'pk': 'deeper', 'a': [[[?]]]}}", Parameters=[deep])


def test_where_clause_too_long_once_translated(ddb, table):
    # 600 short conditions: under the 8 KB statement limit, over the 4 KB
    # expression limit once written with placeholders.
    where = " AND ".join(f"a{i} = 1" for i in range(600))
    stmt = f'SELECT * FROM "{table}" WHERE {where}'
    assert len(stmt) <= 8192
    validation(ddb.execute_statement, match=r"^The WHERE clause is too long: written as a DynamoDB expression it has \d+ bytes",
               Statement=stmt)
