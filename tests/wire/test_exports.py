"""ExportTableToPointInTime, DescribeExport and ListExports: AWS's export
layout in a bucket (a directory of the suite's [s3] filesystem_root, and
an S3 bucket on moto), its manifests field by field, the data read back
equal to the table, ClientToken idempotency and every error."""

import base64
import gzip
import hashlib
import json
import os
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import boto3
import pytest

from conftest import _make_client, extra_server, server_env
from wire_helpers import REGION, expect_error, validation

pytestmark = pytest.mark.capability("backups")

ITEMS = [
    {"pk": {"S": f"k{i:03d}"}, "n": {"N": str(i)}, "b": {"B": bytes([i % 256, 1])},
     "m": {"M": {"l": {"L": [{"S": "x"}, {"BOOL": True}, {"NULL": True}]}}}, "ss": {"SS": ["a", "b"]}}
    for i in range(120)
]
# The items as DynamoDB JSON writes them (binary in base64).
ITEMS_JSON = [{**it, "b": {"B": base64.b64encode(it["b"]["B"]).decode()}} for it in ITEMS]


def fresh_bucket(root, name):
    d = Path(root) / name
    d.mkdir(mode=0o700)
    return d


def pitr_table(ddb, make_table, n=len(ITEMS)):
    t = make_table()
    for it in ITEMS[:n]:
        ddb.put_item(TableName=t, Item=it)
    ddb.update_continuous_backups(TableName=t, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    return t, ddb.describe_table(TableName=t)["Table"]


def wait_export(ddb, arn, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        d = ddb.describe_export(ExportArn=arn)["ExportDescription"]
        if d["ExportStatus"] != "IN_PROGRESS":
            return d
        assert time.monotonic() < deadline, f"export {arn} still IN_PROGRESS"
        time.sleep(0.05)


def check_layout(read, desc, table, fmt):
    """Checks an export's objects (read(key) -> bytes, keys as S3 names
    them) against its description, field by field, and answers the items
    of its data files."""
    manifest_key = desc["ExportManifest"]
    export_id = desc["ExportArn"].rsplit("/", 1)[1]
    prefix = (desc.get("S3Prefix", "").strip("/") + "/") if desc.get("S3Prefix") else ""
    assert manifest_key == f"{prefix}AWSDynamoDB/{export_id}/manifest-summary.json"
    base = manifest_key.rsplit("/", 1)[0] + "/"
    assert read(base + "_started") == b""
    summary_raw = read(manifest_key)
    assert read(base + "manifest-summary.checksum").decode() == hashlib.md5(summary_raw).hexdigest()
    s = json.loads(summary_raw)
    assert s["version"] == "2020-06-30"
    assert s["exportArn"] == desc["ExportArn"] and s["tableArn"] == table["TableArn"] and s["tableId"] == table["TableId"]
    assert s["s3Bucket"] == desc["S3Bucket"] and s["s3Prefix"] == desc.get("S3Prefix")
    assert s["s3SseAlgorithm"] == "AES256" and s["s3SseKmsKeyId"] is None
    assert s["outputFormat"] == fmt and s["exportType"] == "FULL_EXPORT"
    assert s["itemCount"] == desc["ItemCount"] and s["billedSizeBytes"] == desc["BilledSizeBytes"] > 0
    for k in ("startTime", "endTime", "exportTime"):
        datetime.strptime(s[k], "%Y-%m-%dT%H:%M:%S.%fZ")
    assert abs(datetime.strptime(s["exportTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc) - desc["ExportTime"]) < timedelta(milliseconds=2)
    assert s["manifestFilesS3Key"] == base + "manifest-files.json"
    files_raw = read(s["manifestFilesS3Key"])
    assert read(base + "manifest-files.checksum").decode() == hashlib.md5(files_raw).hexdigest()
    items, total = [], 0
    for line in files_raw.decode().splitlines():
        f = json.loads(line)
        assert set(f) == {"itemCount", "md5Checksum", "etag", "dataFileS3Key"}
        ext = ".ion.gz" if fmt == "ION" else ".json.gz"
        assert f["dataFileS3Key"].startswith(base + "data/") and f["dataFileS3Key"].endswith(ext)
        data = read(f["dataFileS3Key"])
        assert base64.b64encode(hashlib.md5(data).digest()).decode() == f["md5Checksum"]
        text = gzip.decompress(data).decode()
        if fmt == "ION":
            assert text.startswith("$ion_1_0 ")
            lines = text[len("$ion_1_0 "):].splitlines()
            assert all(ln.startswith("{Item:{") for ln in lines)
            items += lines
        else:
            items += [json.loads(ln)["Item"] for ln in text.splitlines()]
        total += f["itemCount"]
    assert total == len(items) == desc["ItemCount"]
    return items


def test_export_full_dynamodb_json_and_ion(ddb, make_table, buckets_root):
    if not buckets_root:
        pytest.skip("needs the suite's own server (its [s3] filesystem_root)")
    t, table = pitr_table(ddb, make_table)
    bucket = f"exp-{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    d = fresh_bucket(buckets_root, bucket)
    read = lambda key: (d / key).read_bytes()  # noqa: E731
    for fmt in ("DYNAMODB_JSON", "ION"):
        out = ddb.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket=bucket, S3Prefix="nightly/x",
                                                ExportFormat=fmt)["ExportDescription"]
        assert out["ExportStatus"] == "IN_PROGRESS" and out["ExportFormat"] == fmt and out["ExportType"] == "FULL_EXPORT"
        assert out["ExportArn"].startswith(table["TableArn"] + "/export/")
        desc = wait_export(ddb, out["ExportArn"])
        assert desc["ExportStatus"] == "COMPLETED", desc
        assert desc["ItemCount"] == len(ITEMS) and desc["EndTime"] >= desc["StartTime"]
        items = check_layout(read, desc, table, fmt)
        if fmt == "DYNAMODB_JSON":
            assert sorted(items, key=lambda i: i["pk"]["S"]) == ITEMS_JSON
    got = ddb.list_exports(TableArn=table["TableArn"])["ExportSummaries"]
    assert [e["ExportStatus"] for e in got] == ["COMPLETED", "COMPLETED"]


def test_export_client_token_and_paging(ddb, ddb_raw, make_table, buckets_root):
    if not buckets_root:
        pytest.skip("needs the suite's own server (its [s3] filesystem_root)")
    t, table = pitr_table(ddb, make_table, n=3)
    bucket = f"tok-{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    fresh_bucket(buckets_root, bucket)
    token = f"token-{t}"
    a = ddb.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket=bucket, ClientToken=token)["ExportDescription"]
    b = ddb.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket=bucket, ClientToken=token)["ExportDescription"]
    assert a["ExportArn"] == b["ExportArn"]
    expect_error(ddb_raw.export_table_to_point_in_time, "ExportConflictException", TableArn=table["TableArn"], S3Bucket=bucket,
                 S3Prefix="other", ClientToken=token, message="Export conflict: Duplicate request detected with conflicting parameters")
    arns = [a["ExportArn"]] + [ddb.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket=bucket)["ExportDescription"]["ExportArn"]
                               for _ in range(2)]
    for arn in arns:
        assert wait_export(ddb, arn)["ExportStatus"] == "COMPLETED"
    seen, kw = [], {"TableArn": table["TableArn"], "MaxResults": 2}
    while True:
        page = ddb.list_exports(**kw)
        assert len(page["ExportSummaries"]) <= 2
        seen += [e["ExportArn"] for e in page["ExportSummaries"]]
        if "NextToken" not in page:
            break
        kw["NextToken"] = page["NextToken"]
    assert seen == sorted(arns)
    # The token still names its export after it completed.
    c = ddb.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket=bucket, ClientToken=token)["ExportDescription"]
    assert c["ExportArn"] == a["ExportArn"] and c["ExportStatus"] == "COMPLETED"


def test_export_errors(ddb, ddb_raw, make_table, buckets_root):
    plain = make_table()
    arn = ddb.describe_table(TableName=plain)["Table"]["TableArn"]
    expect_error(ddb_raw.export_table_to_point_in_time, "PointInTimeRecoveryUnavailableException", TableArn=arn, S3Bucket="some-bucket",
                 message=f"Point in time recovery is not enabled for table '{plain}'")
    expect_error(ddb_raw.export_table_to_point_in_time, "TableNotFoundException", TableArn=arn + "-gone", S3Bucket="some-bucket")
    validation(ddb_raw.export_table_to_point_in_time, TableArn="orders", S3Bucket="some-bucket", match="Invalid TableArn")
    validation(ddb_raw.export_table_to_point_in_time, TableArn=arn, S3Bucket="some-bucket", ExportFormat="CSV",
               match="Member must satisfy enum value set: \\[ION, DYNAMODB_JSON\\]")
    t, table = pitr_table(ddb, make_table, n=1)
    expect_error(ddb_raw.export_table_to_point_in_time, "InvalidExportTimeException", TableArn=table["TableArn"], S3Bucket="some-bucket",
                 ExportTime=datetime.now(timezone.utc) + timedelta(hours=1))
    expect_error(ddb_raw.export_table_to_point_in_time, "InvalidExportTimeException", TableArn=table["TableArn"], S3Bucket="some-bucket",
                 ExportTime=datetime(2001, 1, 1, tzinfo=timezone.utc))
    validation(ddb_raw.export_table_to_point_in_time, TableArn=table["TableArn"], S3Bucket="some-bucket", ExportType="INCREMENTAL_EXPORT",
               match="^Invalid Request: INCREMENTAL_EXPORT is not supported")
    fake = table["TableArn"] + "/export/01796465913882-27c99ca6"
    expect_error(ddb_raw.describe_export, "ExportNotFoundException", ExportArn=fake, message=f"Export not found: {fake}")
    validation(ddb_raw.describe_export, ExportArn=table["TableArn"] + "/backup/01796465913882-27c99ca6", message="Invalid Export ARN")
    validation(ddb_raw.list_exports, NextToken="nonsense", match="^Invalid Request: Provided nextToken is invalid")
    if buckets_root:
        # A bucket that does not exist: accepted, then FAILED, as on the
        # service.
        out = ddb.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket="no-such-bucket-here")["ExportDescription"]
        d = wait_export(ddb, out["ExportArn"])
        assert d["ExportStatus"] == "FAILED" and d["FailureCode"] == "S3NoSuchBucket" and d["FailureMessage"], d


def test_export_to_s3_on_moto(tmp_path):
    ep = os.environ.get("EXTENDDB_TEST_MOTO_ENDPOINT")
    if not ep:
        if "moto" in os.environ.get("EXTENDDB_TEST_STORES", ""):
            pytest.fail("EXTENDDB_TEST_STORES names moto but EXTENDDB_TEST_MOTO_ENDPOINT is empty")
        pytest.skip("no moto (EXTENDDB_TEST_MOTO_ENDPOINT; scripts/moto.sh start)")
    s3 = boto3.client("s3", endpoint_url=ep, region_name=REGION, aws_access_key_id="test", aws_secret_access_key="test")
    bucket = f"extenddb-export-{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    s3.create_bucket(Bucket=bucket)
    env = server_env(tmp_path, EXTENDDB__S3__ENDPOINT=ep, EXTENDDB__S3__REGION=REGION, EXTENDDB__S3__ACCESS_KEY_ID="test",
                     EXTENDDB__S3__SECRET_ACCESS_KEY="test")
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    with extra_server(tmp_path, ["--data-dir", str(data)], env, "moto-export.log") as (sep, _):
        c = _make_client(sep)
        c.create_table(TableName="orders", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        for it in ITEMS:
            c.put_item(TableName="orders", Item=it)
        c.update_continuous_backups(TableName="orders", PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
        table = c.describe_table(TableName="orders")["Table"]
        out = c.export_table_to_point_in_time(TableArn=table["TableArn"], S3Bucket=bucket)["ExportDescription"]
        desc = wait_export(c, out["ExportArn"])
        assert desc["ExportStatus"] == "COMPLETED", desc
        read = lambda key: s3.get_object(Bucket=bucket, Key=key)["Body"].read()  # noqa: E731
        items = check_layout(read, desc, table, "DYNAMODB_JSON")
        assert sorted(items, key=lambda i: i["pk"]["S"]) == ITEMS_JSON
