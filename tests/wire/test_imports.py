"""ImportTable, DescribeImport and ListImports: hand-made AWS export files
(DYNAMODB_JSON and ION, tests/wire/testdata/awsexport) and CSV import to
the expected table; an export -> import round trip is identical; an
extenddb backup's data/ (zstd) imports as it is; bad items are counted
and the rest imported (FAILED ItemValidationError, as on the service);
a missing bucket ends FAILED with no table; tokens and every error."""

import base64
import gzip
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from wire_helpers import expect_error, validation

pytestmark = pytest.mark.capability("backups")

FIXTURES = Path(__file__).parent / "testdata" / "awsexport"
MUSIC_KEYS = dict(AttributeDefinitions=[{"AttributeName": "Artist", "AttributeType": "S"}, {"AttributeName": "SongTitle", "AttributeType": "S"}],
                  KeySchema=[{"AttributeName": "Artist", "KeyType": "HASH"}, {"AttributeName": "SongTitle", "KeyType": "RANGE"}],
                  BillingMode="PAY_PER_REQUEST")
MUSIC = {
    ("Acme Band", "Happy Day"): {"Artist": {"S": "Acme Band"}, "SongTitle": {"S": "Happy Day"}, "Year": {"N": "2019"}, "Price": {"N": "1.98"},
                                 "Tags": {"SS": ["pop", "summer"]}, "Ratings": {"NS": ["4", "5"]}},
    ("Acme Band", "PartiQL Rocks"): {"Artist": {"S": "Acme Band"}, "SongTitle": {"S": "PartiQL Rocks"}, "Year": {"N": "2020"},
                                     "Awards": {"M": {"Grammy": {"BOOL": False}, "Count": {"N": "0"}}}, "Chart": {"L": [{"N": "12"}, {"N": "7"}]}},
    ("No One You Know", "Call Me Today"): {"Artist": {"S": "No One You Know"}, "SongTitle": {"S": "Call Me Today"},
                                           "Cover": {"B": b"hello"}, "Notes": {"NULL": True}},
}


@pytest.fixture
def bucket(buckets_root, request):
    if not buckets_root:
        pytest.skip("needs the suite's own server (its [s3] filesystem_root)")
    d = Path(buckets_root) / f"imp-{os.getpid()}-{abs(hash(request.node.name)) % 10**8}"
    d.mkdir(mode=0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def imported(ddb):
    names = []
    yield names
    for n in names:
        try:
            ddb.delete_table(TableName=n)
        except Exception:
            pass


def put(d, key, data):
    p = d / key
    p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    p.write_bytes(data)


def wait_import(ddb, arn, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        d = ddb.describe_import(ImportArn=arn)["ImportTableDescription"]
        if d["ImportStatus"] != "IN_PROGRESS":
            return d
        assert time.monotonic() < deadline, f"import {arn} still IN_PROGRESS"
        time.sleep(0.05)


def scan_all(ddb, name):
    out, kw = [], {}
    while True:
        r = ddb.scan(TableName=name, ConsistentRead=True, **kw)
        out += r["Items"]
        if "LastEvaluatedKey" not in r:
            return out
        kw["ExclusiveStartKey"] = r["LastEvaluatedKey"]


def by_key(items, *keys):
    return {tuple(next(iter(i[k].values())) for k in keys): i for i in items}


@pytest.mark.parametrize("fmt,fixture", [("DYNAMODB_JSON", "full.json"), ("ION", "full.ion")])
def test_import_aws_export_fixture(ddb, bucket, table_name, imported, fmt, fixture):
    data = (FIXTURES / fixture).read_bytes()
    put(bucket, "exports/AWSDynamoDB/01796465913882-27c99ca6/data/part-0" + (".json.gz" if fmt == "DYNAMODB_JSON" else ".ion.gz"),
        gzip.compress(data))
    imported.append(table_name)
    out = ddb.import_table(S3BucketSource={"S3Bucket": bucket.name, "S3KeyPrefix": "exports/AWSDynamoDB/01796465913882-27c99ca6/data/"},
                           InputFormat=fmt, InputCompressionType="GZIP",
                           TableCreationParameters={"TableName": table_name, **MUSIC_KEYS})["ImportTableDescription"]
    assert out["ImportStatus"] == "IN_PROGRESS" and out["ImportArn"].startswith(out["TableArn"] + "/import/")
    d = wait_import(ddb, out["ImportArn"])
    assert d["ImportStatus"] == "COMPLETED", d
    assert (d["ProcessedItemCount"], d["ImportedItemCount"], d["ErrorCount"]) == (3, 3, 0)
    assert d["ProcessedSizeBytes"] > 0 and d["InputFormat"] == fmt and d["InputCompressionType"] == "GZIP"
    t = ddb.describe_table(TableName=table_name)["Table"]
    assert t["TableStatus"] == "ACTIVE" and t["KeySchema"] == MUSIC_KEYS["KeySchema"]
    assert by_key(scan_all(ddb, table_name), "Artist", "SongTitle") == MUSIC


def test_import_csv(ddb, bucket, table_name, imported):
    put(bucket, "csv/part1.csv", b"Artist|SongTitle|Year\nAcme|One|2001\nAcme|Two|\n")
    put(bucket, "csv/part2.csv", b"Acme|Three|2003\n")
    imported.append(table_name)
    keys = dict(AttributeDefinitions=[{"AttributeName": "Artist", "AttributeType": "S"}, {"AttributeName": "SongTitle", "AttributeType": "S"}],
                KeySchema=MUSIC_KEYS["KeySchema"], BillingMode="PAY_PER_REQUEST")
    # A header in the first file only: the HeaderList names the columns.
    out = ddb.import_table(S3BucketSource={"S3Bucket": bucket.name, "S3KeyPrefix": "csv/part2"}, InputFormat="CSV",
                           InputFormatOptions={"Csv": {"Delimiter": "|", "HeaderList": ["Artist", "SongTitle", "Year"]}},
                           TableCreationParameters={"TableName": table_name, **keys})["ImportTableDescription"]
    d = wait_import(ddb, out["ImportArn"])
    assert d["ImportStatus"] == "COMPLETED" and d["ImportedItemCount"] == 1, d
    assert scan_all(ddb, table_name) == [{"Artist": {"S": "Acme"}, "SongTitle": {"S": "Three"}, "Year": {"S": "2003"}}]
    other = table_name + "-2"
    imported.append(other)
    out = ddb.import_table(S3BucketSource={"S3Bucket": bucket.name, "S3KeyPrefix": "csv/part1"}, InputFormat="CSV",
                           InputFormatOptions={"Csv": {"Delimiter": "|"}},
                           TableCreationParameters={"TableName": other, **keys})["ImportTableDescription"]
    d = wait_import(ddb, out["ImportArn"])
    assert d["ImportStatus"] == "COMPLETED" and d["ImportedItemCount"] == 2, d
    got = by_key(scan_all(ddb, other), "Artist", "SongTitle")
    assert got[("Acme", "Two")] == {"Artist": {"S": "Acme"}, "SongTitle": {"S": "Two"}}  # an empty cell is no attribute


def test_import_counts_bad_items(ddb, bucket, table_name, imported):
    lines = [json.dumps({"Item": {"pk": {"S": f"k{i}"}, "n": {"N": str(i)}}}) for i in range(20)]
    lines[3] = json.dumps({"Item": {"other": {"S": "no key"}}})
    lines[7] = "not json at all"
    lines[11] = json.dumps({"Item": {"pk": {"N": "5"}}})  # the key's type is wrong
    # DynamoDB's item size (names and values): 400 KB exactly is imported,
    # one byte more is not.
    lines.append(json.dumps({"Item": {"pk": {"S": "k20"}, "pad": {"S": "z" * (400 * 1024 - 8)}}}))
    lines.append(json.dumps({"Item": {"pk": {"S": "k21"}, "pad": {"S": "z" * (400 * 1024 - 7)}}}))
    put(bucket, "bad/data.json", ("\n".join(lines) + "\n").encode())
    imported.append(table_name)
    out = ddb.import_table(S3BucketSource={"S3Bucket": bucket.name, "S3KeyPrefix": "bad/"}, InputFormat="DYNAMODB_JSON",
                           TableCreationParameters={"TableName": table_name, "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                                                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                                                    "BillingMode": "PAY_PER_REQUEST"})["ImportTableDescription"]
    d = wait_import(ddb, out["ImportArn"])
    # As on the service: FAILED, with the good items in an ACTIVE table.
    assert d["ImportStatus"] == "FAILED" and d["FailureCode"] == "ItemValidationError" and d["FailureMessage"], d
    assert (d["ProcessedItemCount"], d["ImportedItemCount"], d["ErrorCount"]) == (22, 18, 4)
    assert ddb.describe_table(TableName=table_name)["Table"]["TableStatus"] == "ACTIVE"
    assert len(scan_all(ddb, table_name)) == 18


def test_export_then_import_round_trip(ddb, make_table, bucket, table_name, imported):
    src = make_table(range_key=("sk", "N"))
    items = [{"pk": {"S": f"p{i % 7}"}, "sk": {"N": str(i)}, "b": {"B": bytes([i % 256])}, "l": {"L": [{"S": "x"}, {"N": str(i)}]},
              "ns": {"NS": [str(i), str(i + 1)]}, "m": {"M": {"k": {"BOOL": i % 2 == 0}}}} for i in range(150)]
    for it in items:
        ddb.put_item(TableName=src, Item=it)
    ddb.update_continuous_backups(TableName=src, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    arn = ddb.describe_table(TableName=src)["Table"]["TableArn"]
    want = by_key(scan_all(ddb, src), "pk", "sk")
    for fmt in ("DYNAMODB_JSON", "ION"):
        e = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=bucket.name, S3Prefix="rt", ExportFormat=fmt)["ExportDescription"]
        deadline = time.monotonic() + 60
        while ddb.describe_export(ExportArn=e["ExportArn"])["ExportDescription"]["ExportStatus"] == "IN_PROGRESS":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        export_id = e["ExportArn"].rsplit("/", 1)[1]
        target = f"{table_name}-{fmt.lower().replace('_', '')}"
        imported.append(target)
        out = ddb.import_table(S3BucketSource={"S3Bucket": bucket.name, "S3KeyPrefix": f"rt/AWSDynamoDB/{export_id}/data/"},
                               InputFormat=fmt, InputCompressionType="GZIP",
                               TableCreationParameters={"TableName": target, "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                                                                          {"AttributeName": "sk", "KeyType": "RANGE"}],
                                                        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"},
                                                                                 {"AttributeName": "sk", "AttributeType": "N"}],
                                                        "BillingMode": "PAY_PER_REQUEST"})["ImportTableDescription"]
        d = wait_import(ddb, out["ImportArn"])
        assert d["ImportStatus"] == "COMPLETED" and d["ImportedItemCount"] == 150, d
        assert by_key(scan_all(ddb, target), "pk", "sk") == want


def test_import_an_extenddb_backup(ddb, make_table, bucket, table_name, imported, backup_root):
    if not backup_root:
        pytest.skip("needs the suite's filesystem store")
    from test_backups import ACCOUNT, ARN_RE, wait_backup
    src = make_table()
    for i in range(40):
        ddb.put_item(TableName=src, Item={"pk": {"S": f"k{i}"}, "v": {"N": str(i)}})
    b = ddb.create_backup(TableName=src, BackupName="to-import")["BackupDetails"]
    wait_backup(ddb, b["BackupArn"])
    data = Path(backup_root) / ACCOUNT / src / ARN_RE.match(b["BackupArn"]).group("id") / "data"
    for f in data.iterdir():
        put(bucket, "backup/data/" + f.name, f.read_bytes())
    imported.append(table_name)
    out = ddb.import_table(S3BucketSource={"S3Bucket": bucket.name, "S3KeyPrefix": "backup/data/"}, InputFormat="DYNAMODB_JSON",
                           InputCompressionType="ZSTD",
                           TableCreationParameters={"TableName": table_name, "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}],
                                                    "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
                                                    "BillingMode": "PAY_PER_REQUEST"})["ImportTableDescription"]
    d = wait_import(ddb, out["ImportArn"])
    assert d["ImportStatus"] == "COMPLETED" and d["ImportedItemCount"] == 40, d
    assert by_key(scan_all(ddb, table_name), "pk") == by_key(scan_all(ddb, src), "pk")
    ddb.delete_backup(BackupArn=b["BackupArn"])


def test_import_errors(ddb, ddb_raw, make_table, bucket, table_name, imported):
    existing = make_table()
    keys = {"KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"}], "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}],
            "BillingMode": "PAY_PER_REQUEST"}
    src = {"S3Bucket": bucket.name, "S3KeyPrefix": "none/"}
    expect_error(ddb_raw.import_table, "ResourceInUseException", S3BucketSource=src, InputFormat="DYNAMODB_JSON",
                 TableCreationParameters={"TableName": existing, **keys}, message=f"Table already exists: {existing}")
    validation(ddb_raw.import_table, S3BucketSource=src, InputFormat="DYNAMODB_JSON", InputFormatOptions={"Csv": {"Delimiter": ";"}},
               TableCreationParameters={"TableName": table_name, **keys},
               message="Invalid Request: Unsupported InputFormatOptions for the given input format: DYNAMODB_JSON.")
    validation(ddb_raw.import_table, S3BucketSource=src, InputFormat="XML", TableCreationParameters={"TableName": table_name, **keys},
               match="Member must satisfy enum value set: \\[ION, CSV, DYNAMODB_JSON\\]")
    validation(ddb_raw.import_table, S3BucketSource=src, InputFormat="CSV",
               TableCreationParameters={"TableName": table_name, "KeySchema": keys["KeySchema"], "BillingMode": "PAY_PER_REQUEST",
                                        "AttributeDefinitions": [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "x", "AttributeType": "S"}]},
               message="One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
    assert table_name not in ddb.list_tables()["TableNames"]
    # An empty prefix: COMPLETED with an empty table, as on the service.
    imported.append(table_name)
    tok = f"tok-{table_name}"
    out = ddb.import_table(S3BucketSource=src, InputFormat="DYNAMODB_JSON", ClientToken=tok,
                           TableCreationParameters={"TableName": table_name, **keys})["ImportTableDescription"]
    again = ddb.import_table(S3BucketSource=src, InputFormat="DYNAMODB_JSON", ClientToken=tok,
                             TableCreationParameters={"TableName": table_name, **keys})["ImportTableDescription"]
    assert again["ImportArn"] == out["ImportArn"]
    expect_error(ddb_raw.import_table, "ImportConflictException", S3BucketSource=src, InputFormat="CSV", ClientToken=tok,
                 TableCreationParameters={"TableName": table_name, **keys})
    d = wait_import(ddb, out["ImportArn"])
    assert d["ImportStatus"] == "COMPLETED" and d["ImportedItemCount"] == 0, d
    assert ddb.describe_table(TableName=table_name)["Table"]["TableStatus"] == "ACTIVE"
    # A bucket that does not exist: accepted, then FAILED, no table.
    gone = table_name + "-nb"
    out = ddb.import_table(S3BucketSource={"S3Bucket": "no-such-bucket-for-imports"}, InputFormat="DYNAMODB_JSON",
                           TableCreationParameters={"TableName": gone, **keys})["ImportTableDescription"]
    d = wait_import(ddb, out["ImportArn"])
    assert d["ImportStatus"] == "FAILED" and d["FailureCode"] == "S3NoSuchBucket", d
    assert gone not in ddb.list_tables()["TableNames"]
    fake = out["TableArn"] + "/import/01796465913882-27c99ca6"
    expect_error(ddb_raw.describe_import, "ImportNotFoundException", ImportArn=fake, message=f"Import not found: {fake}")
    validation(ddb_raw.describe_import, ImportArn=out["TableArn"] + "/export/01796465913882-27c99ca6", message="Invalid Import ARN")
    validation(ddb_raw.list_imports, PageSize=26, match="Member must have value between 1 and 25")
    listed = [i["ImportArn"] for i in ddb.list_imports(TableArn=d["TableArn"])["ImportSummaryList"]]
    assert listed == [out["ImportArn"]]
