"""ImportTable beyond test_imports.py: hand-made AWS export folders
(testdata/awsimport: a full DYNAMODB_JSON export in two gzip files, an Ion
one with every type and a GSI queried after the import), a raw key prefix
matching as S3 does, CSV with HeaderList, a delimiter and GZIP, a wrong
compression counted as item errors, ListImports paging, records outliving
their table, the exact conflict and enum texts DynamoDB answers, and an
import from moto's S3."""

import gzip
import os
import shutil
import time
import uuid
from pathlib import Path

import boto3
import pytest

from conftest import _make_client, extra_server, server_env
from wire_helpers import REGION, expect_error, validation

pytestmark = pytest.mark.capability("backups")

FIXTURES = Path(__file__).resolve().parent / "testdata" / "awsimport"

# The items of the hand-made AWS export fixtures (testdata), as boto3
# reads them back.
FIXTURE_ITEMS = [
    {"pk": {"S": "u1"}, "sk": {"N": "1"}, "name": {"S": "Ann"}, "tags": {"SS": ["a", "b"]}, "score": {"N": "9.5"},
     "blob": {"B": b"hi"}, "ok": {"BOOL": True}, "nil": {"NULL": True}, "m": {"M": {"x": {"L": [{"N": "1"}, {"S": "y"}]}}},
     "ns": {"NS": ["1", "2"]}, "bs": {"BS": [b"\x01"]}},
    {"pk": {"S": "u2"}, "sk": {"N": "2"}, "name": {"S": "Bob"}},
    {"pk": {"S": "u3"}, "sk": {"N": "3"}},
]

KEYS = dict(KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"}])


def uniq(prefix):
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def bucket(root, files=None):
    """A fresh bucket directory holding files {key: bytes}."""
    name = uniq("imp")
    d = Path(root) / name
    d.mkdir(mode=0o700)
    for key, data in (files or {}).items():
        p = d / key
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return name, d


def params(name, **kw):
    p = {"TableName": name, "BillingMode": "PAY_PER_REQUEST", **KEYS}
    p.update(kw)
    return p


def wait_import(ddb, arn, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        d = ddb.describe_import(ImportArn=arn)["ImportTableDescription"]
        if d["ImportStatus"] != "IN_PROGRESS":
            return d
        assert time.monotonic() < deadline, f"import {arn} still IN_PROGRESS"
        time.sleep(0.05)


def scan_all(ddb, table):
    items, kw = [], {}
    while True:
        r = ddb.scan(TableName=table, **kw)
        items += r["Items"]
        if "LastEvaluatedKey" not in r:
            return sorted(items, key=lambda i: (i["pk"].get("S", ""), i["sk"]["N"] if "sk" in i else ""))
        kw["ExclusiveStartKey"] = r["LastEvaluatedKey"]


def run_import(ddb, bkt, prefix, fmt, table, compression=None, options=None, **tcp):
    kw = dict(S3BucketSource={"S3Bucket": bkt, "S3KeyPrefix": prefix}, InputFormat=fmt,
              TableCreationParameters=params(table, **tcp))
    if compression:
        kw["InputCompressionType"] = compression
    if options:
        kw["InputFormatOptions"] = options
    out = ddb.import_table(**kw)["ImportTableDescription"]
    assert out["ImportStatus"] == "IN_PROGRESS"
    return out, wait_import(ddb, out["ImportArn"])


def copy_fixture(root, sub):
    name, d = bucket(root)
    shutil.copytree(FIXTURES / sub, d, dirs_exist_ok=True)
    d.chmod(0o700)  # copytree gives the root the fixture's mode
    return name


def test_import_aws_json_export_gzip(ddb, buckets_root):
    bkt = copy_fixture(buckets_root, "aws-full-json")
    table = uniq("imp-json")
    # The export's data/ folder, as on DynamoDB (the folder above holds
    # manifests, which an import would count as bad items).
    out, d = run_import(ddb, bkt, "AWSDynamoDB/01700000000000-a1b2c3d4/data/", "DYNAMODB_JSON", table, "GZIP")
    assert d["ImportStatus"] == "COMPLETED", d
    assert (d["ProcessedItemCount"], d["ImportedItemCount"], d["ErrorCount"]) == (3, 3, 0)
    assert d["ProcessedSizeBytes"] > 0 and d["EndTime"] >= d["StartTime"]
    assert d["TableArn"] == out["TableArn"] and d["TableId"] == out["TableId"]
    assert d["S3BucketSource"] == {"S3Bucket": bkt, "S3KeyPrefix": "AWSDynamoDB/01700000000000-a1b2c3d4/data/",
                                   "S3BucketOwner": d["S3BucketSource"]["S3BucketOwner"]}
    assert d["InputCompressionType"] == "GZIP" and d["InputFormat"] == "DYNAMODB_JSON"
    t = ddb.describe_table(TableName=table)["Table"]
    assert t["TableStatus"] == "ACTIVE" and t["TableArn"] == d["TableArn"] and t["TableId"] == d["TableId"]
    assert t["KeySchema"] == KEYS["KeySchema"]
    assert scan_all(ddb, table) == FIXTURE_ITEMS


def test_import_ion_and_gsi(ddb, buckets_root):
    bkt = copy_fixture(buckets_root, "aws-full-ion")
    table = uniq("imp-ion")
    gsi = [{"IndexName": "byName", "KeySchema": [{"AttributeName": "name", "KeyType": "HASH"}], "Projection": {"ProjectionType": "ALL"}}]
    defs = KEYS["AttributeDefinitions"] + [{"AttributeName": "name", "AttributeType": "S"}]
    _, d = run_import(ddb, bkt, "AWSDynamoDB/01700000000001-b2c3d4e5/data/", "ION", table, "GZIP", GlobalSecondaryIndexes=gsi, AttributeDefinitions=defs)
    assert d["ImportStatus"] == "COMPLETED", d
    assert d["ImportedItemCount"] == 3
    assert scan_all(ddb, table) == FIXTURE_ITEMS
    t = ddb.describe_table(TableName=table)["Table"]
    assert [g["IndexName"] for g in t["GlobalSecondaryIndexes"]] == ["byName"]
    q = ddb.query(TableName=table, IndexName="byName", KeyConditionExpression="#n = :v",
                  ExpressionAttributeNames={"#n": "name"}, ExpressionAttributeValues={":v": {"S": "Bob"}})
    assert [i["pk"]["S"] for i in q["Items"]] == ["u2"]


def test_import_uncompressed_raw_prefix(ddb, buckets_root):
    lines = b"".join(b'{"Item":{"pk":{"S":"k%d"},"sk":{"N":"%d"}}}\n' % (i, i) for i in range(1200))
    bkt, _ = bucket(buckets_root, {"data/a.json": lines, "data2/b.json": b'{"Item":{"pk":{"S":"z"},"sk":{"N":"0"}}}\n'})
    table = uniq("imp-raw")
    # "data" matches data/ and data2/, as S3 key prefixes do.
    _, d = run_import(ddb, bkt, "data", "DYNAMODB_JSON", table)
    assert d["ImportStatus"] == "COMPLETED", d
    assert d["InputCompressionType"] == "NONE"
    assert d["ImportedItemCount"] == 1201
    assert len(scan_all(ddb, table)) == 1201


def test_import_csv(ddb, buckets_root):
    bkt, _ = bucket(buckets_root, {"h.csv": (FIXTURES / "csv" / "header.csv").read_bytes(),
                                   "n/x.csv": gzip.compress((FIXTURES / "csv" / "noheader.csv").read_bytes())})
    t1, t2 = uniq("imp-csv"), uniq("imp-csv")
    _, d = run_import(ddb, bkt, "h.csv", "CSV", t1)
    assert d["ImportStatus"] == "COMPLETED", d
    assert "InputFormatOptions" not in d
    assert scan_all(ddb, t1) == [
        {"pk": {"S": "u1"}, "sk": {"N": "1"}, "name": {"S": "Ann"}, "city": {"S": "Paris, FR"}},
        {"pk": {"S": "u2"}, "sk": {"N": "2"}, "name": {"S": "Bob"}},
        {"pk": {"S": "u3"}, "sk": {"N": "3"}},
    ]
    opts = {"Csv": {"Delimiter": ";", "HeaderList": ["pk", "sk", "name"]}}
    _, d = run_import(ddb, bkt, "n/", "CSV", t2, "GZIP", opts)
    assert d["ImportStatus"] == "COMPLETED", d
    assert d["InputFormatOptions"] == opts
    assert [i["pk"]["S"] for i in scan_all(ddb, t2)] == ["u1", "u2", "u3"]


def test_import_item_errors_counted(ddb, buckets_root):
    bkt = copy_fixture(buckets_root, "json-errors")
    table = uniq("imp-err")
    _, d = run_import(ddb, bkt, "items.json", "DYNAMODB_JSON", table)
    # As on DynamoDB: FAILED, the valid items loaded, the table ACTIVE.
    assert d["ImportStatus"] == "FAILED", d
    assert d["FailureCode"] == "ItemValidationError"
    assert (d["ProcessedItemCount"], d["ImportedItemCount"], d["ErrorCount"]) == (6, 2, 4)
    assert ddb.describe_table(TableName=table)["Table"]["TableStatus"] == "ACTIVE"
    assert [i["pk"]["S"] for i in scan_all(ddb, table)] == ["u1", "u7"]


def test_import_wrong_compression_is_item_error(ddb, buckets_root):
    bkt = copy_fixture(buckets_root, "aws-full-json")
    _, d = run_import(ddb, bkt, "AWSDynamoDB/01700000000000-a1b2c3d4/data/", "DYNAMODB_JSON", uniq("imp-cmp"), "NONE")
    assert d["ImportStatus"] == "FAILED" and d["FailureCode"] == "ItemValidationError", d
    # gzip bytes read as text: every "line" of it is an error.
    assert d["ImportedItemCount"] == 0 and d["ErrorCount"] >= 2 and d["ProcessedItemCount"] == d["ErrorCount"]


def test_import_client_token_and_conflicts(ddb, buckets_root, make_table):
    bkt = copy_fixture(buckets_root, "aws-full-json")
    table, tok = uniq("imp-tok"), uuid.uuid4().hex
    kw = dict(ClientToken=tok, S3BucketSource={"S3Bucket": bkt, "S3KeyPrefix": "AWSDynamoDB/01700000000000-a1b2c3d4/data/"}, InputFormat="DYNAMODB_JSON",
              InputCompressionType="GZIP", TableCreationParameters=params(table))
    a = ddb.import_table(**kw)["ImportTableDescription"]
    b = ddb.import_table(**kw)["ImportTableDescription"]
    assert a["ImportArn"] == b["ImportArn"] and b["ClientToken"] == tok
    expect_error(ddb.import_table, "ImportConflictException",
                 "Import conflict: Duplicate request detected with conflicting parameters",
                 **{**kw, "TableCreationParameters": params(table + "x")})
    assert wait_import(ddb, a["ImportArn"])["ImportStatus"] == "COMPLETED"
    # An existing table is never the target of an import.
    existing = make_table()
    expect_error(ddb.import_table, "ResourceInUseException", f"Table already exists: {existing}",
                 S3BucketSource={"S3Bucket": bkt}, InputFormat="DYNAMODB_JSON", TableCreationParameters=params(existing))


def test_import_table_validation(ddb, buckets_root):
    src = {"S3Bucket": "some-bucket"}
    tcp = params(uniq("imp-val"))
    validation(ddb.import_table, match=r"Value 'BZIP2' at 'inputCompressionType' failed to satisfy constraint: Member must satisfy enum value set: \[ZSTD, NONE, GZIP\]",
               S3BucketSource=src, InputFormat="DYNAMODB_JSON", InputCompressionType="BZIP2", TableCreationParameters=tcp)
    validation(ddb.import_table, "Invalid Request: Unsupported InputFormatOptions for the given input format: DYNAMODB_JSON.",
               S3BucketSource=src, InputFormat="DYNAMODB_JSON", InputFormatOptions={"Csv": {"Delimiter": ","}}, TableCreationParameters=tcp)
    validation(ddb.import_table, match=r"^2 validation errors detected: Value ';;' at 'inputFormatOptions.csv.delimiter'",
               S3BucketSource=src, InputFormat="CSV", InputFormatOptions={"Csv": {"Delimiter": ";;"}}, TableCreationParameters=tcp)
    p = dict(tcp)
    del p["BillingMode"]
    validation(ddb.import_table, "One or more parameter values were invalid: ReadCapacityUnits and WriteCapacityUnits must both be specified when BillingMode is PROVISIONED",
               S3BucketSource=src, InputFormat="DYNAMODB_JSON", TableCreationParameters=p)
    validation(ddb.import_table, match="Member must satisfy regular expression pattern",
               S3BucketSource={"S3Bucket": "bad bucket!"}, InputFormat="DYNAMODB_JSON", TableCreationParameters=tcp)


def test_describe_and_list_imports(ddb, buckets_root):
    bkt = copy_fixture(buckets_root, "aws-full-json")
    tables = [uniq("imp-list") for _ in range(3)]
    arns = [run_import(ddb, bkt, "AWSDynamoDB/01700000000000-a1b2c3d4/data/", "DYNAMODB_JSON", t, "GZIP")[1]["ImportArn"] for t in tables]
    t0 = ddb.describe_table(TableName=tables[0])["Table"]["TableArn"]
    one = ddb.list_imports(TableArn=t0)["ImportSummaryList"]
    assert [s["ImportArn"] for s in one] == [arns[0]]
    assert one[0]["ImportStatus"] == "COMPLETED" and one[0]["InputFormat"] == "DYNAMODB_JSON"
    seen, kw = [], {"PageSize": 1}
    while True:
        r = ddb.list_imports(**kw)
        assert len(r["ImportSummaryList"]) <= 1
        seen += [s["ImportArn"] for s in r["ImportSummaryList"]]
        if "NextToken" not in r:
            break
        kw["NextToken"] = r["NextToken"]
    assert all(a in seen for a in arns) and len(seen) == len(set(seen))
    validation(ddb.list_imports, match="Value '26' at 'pageSize' failed to satisfy constraint: Member must have value between 1 and 25", PageSize=26)
    validation(ddb.list_imports, match="Provided nextToken is invalid", NextToken="n" * 120)
    missing = arns[0][:-8] + "00000000"
    expect_error(ddb.describe_import, "ImportNotFoundException", ImportArn=missing)
    validation(ddb.describe_import, "Invalid Import ARN", ImportArn=t0 + "/backup/01700000000000-abcdef12")
    # An import's record outlives its table.
    ddb.delete_table(TableName=tables[0])
    assert ddb.describe_import(ImportArn=arns[0])["ImportTableDescription"]["ImportStatus"] == "COMPLETED"


def test_import_from_s3_on_moto(tmp_path):
    ep = os.environ.get("EXTENDDB_TEST_MOTO_ENDPOINT")
    if not ep:
        if "moto" in os.environ.get("EXTENDDB_TEST_STORES", ""):
            pytest.fail("EXTENDDB_TEST_STORES names moto but EXTENDDB_TEST_MOTO_ENDPOINT is empty")
        pytest.skip("no moto (EXTENDDB_TEST_MOTO_ENDPOINT; scripts/moto.sh start)")
    s3 = boto3.client("s3", endpoint_url=ep, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test")
    bkt = f"extenddb-import-{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    s3.create_bucket(Bucket=bkt)
    for p in (FIXTURES / "aws-full-json").rglob("*"):
        if p.is_file():
            s3.put_object(Bucket=bkt, Key="exports/" + str(p.relative_to(FIXTURES / "aws-full-json")), Body=p.read_bytes())
    env = server_env(tmp_path, EXTENDDB__S3__ENDPOINT=ep, EXTENDDB__S3__REGION=REGION, EXTENDDB__S3__ACCESS_KEY_ID="test",
                     EXTENDDB__S3__SECRET_ACCESS_KEY="test")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with extra_server(tmp_path, ["--data-dir", str(data)], env, "moto-import.log") as (sep, _):
        c = _make_client(sep)
        _, d = run_import(c, bkt, "exports/AWSDynamoDB/01700000000000-a1b2c3d4/data/", "DYNAMODB_JSON", "orders", "GZIP")
        assert d["ImportStatus"] == "COMPLETED", d
        assert scan_all(c, "orders") == FIXTURE_ITEMS
        _, d = run_import(c, bkt + "-missing", "x", "DYNAMODB_JSON", "orders2")
        assert d["ImportStatus"] == "FAILED" and d["FailureCode"] == "S3NoSuchBucket", d
