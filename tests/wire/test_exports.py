"""ExportTableToPointInTime, DescribeExport and ListExports.

The suite's server has a backup store (point-in-time recovery needs one)
and an [s3] section (conftest.s3_env): a filesystem_root, or moto with
EXTENDDB_TEST_S3=moto. An export reads the table's point-in-time history
at ExportTime and writes AWS's layout to the bucket; these tests read it
back as a consumer of AWS exports would (manifests, checksums, gzip data
files in DYNAMODB_JSON or Ion) and compare it with the table.
"""

import base64
import gzip
import hashlib
import json
import random
import re
import time
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import pytest

from wire_helpers import expect_error, validation

pytestmark = pytest.mark.capability("backups")

EXPORT_ID_RE = r"[0-9]{14}-[0-9a-f]{8}"


def bucket_name():
    return "exp-" + "".join(random.choice("0123456789abcdef") for _ in range(12))


def enable_pitr(ddb, table, after=None):
    """Turns point-in-time recovery on and waits until the window reaches
    `after` (default: now)."""
    ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": True})
    wait_window(ddb, table, after)


def wait_window(ddb, table, after=None):
    after = after or datetime.now(timezone.utc)
    deadline = time.monotonic() + 60
    while True:
        p = ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
        latest = p.get("LatestRestorableDateTime")
        if latest is not None and latest >= after:
            return p
        assert time.monotonic() < deadline, f"the window never reached {after}: {p}"
        time.sleep(0.2)


def wait_export(ddb, arn, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        d = ddb.describe_export(ExportArn=arn)["ExportDescription"]
        if d["ExportStatus"] != "IN_PROGRESS":
            return d
        assert time.monotonic() < deadline, f"export still IN_PROGRESS: {d}"
        time.sleep(0.2)


def table_arn(ddb, table):
    return ddb.describe_table(TableName=table)["Table"]["TableArn"]


def scan_all(ddb, table):
    items, kw = [], {}
    while True:
        r = ddb.scan(TableName=table, **kw)
        items += r["Items"]
        if "LastEvaluatedKey" not in r:
            return items
        kw = {"ExclusiveStartKey": r["LastEvaluatedKey"]}


# ------------------------------------------------------------ Ion text

class IonText:
    """A reader of the Ion text an export writes: structs, lists,
    annotations, strings, decimals and integers, blobs, booleans and
    null. Values come back as DynamoDB AttributeValues."""

    TOKEN = re.compile(r'\s*(\{\{[^}]*\}\}|"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|::|[{}\[\]:,]|[^\s{}\[\]:,\'"]+)')

    def __init__(self, text):
        self.toks = self.TOKEN.findall(text)
        self.i = 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def next(self):
        t = self.toks[self.i]
        self.i += 1
        return t

    def values(self):
        while self.peek() is not None:
            if self.peek() == "$ion_1_0":
                self.next()
                continue
            yield self.value()

    @staticmethod
    def unquote(t):
        if t[0] == "'":
            t = '"' + t[1:-1].replace('"', '\\"') + '"'
        return json.loads(re.sub(r"\\x([0-9a-fA-F]{2})", r"\\u00\1", t))

    def symbol(self):
        t = self.next()
        return self.unquote(t) if t[0] in "'\"" else t

    def value(self):
        ann = None
        if self.i + 1 < len(self.toks) and self.toks[self.i + 1] == "::":
            ann = self.symbol()
            self.next()
        t = self.next()
        if t == "{":
            m = {}
            while self.peek() != "}":
                k = self.symbol()
                assert self.next() == ":"
                m[k] = self.value()
                if self.peek() == ",":
                    self.next()
            self.next()
            return {"M": m}
        if t == "[":
            out = []
            while self.peek() != "]":
                out.append(self.value())
                if self.peek() == ",":
                    self.next()
            self.next()
            if ann is None:
                return {"L": out}
            kind = {"$dynamodb_SS": "SS", "$dynamodb_NS": "NS", "$dynamodb_BS": "BS"}[ann]
            return {kind: [next(iter(v.values())) for v in out]}
        if t.startswith("{{"):
            return {"B": base64.b64decode(t[2:-2].strip())}
        if t[0] == '"':
            return {"S": self.unquote(t)}
        if t in ("true", "false"):
            return {"BOOL": t == "true"}
        if t.startswith("null"):
            return {"NULL": True}
        return {"N": str(Decimal(t.replace("d", "E").rstrip(".") if "d" in t else t.rstrip(".") or "0"))}


def canon(v):
    """An AttributeValue in a comparable form (numbers by value, sets as
    sets, binaries as bytes)."""
    (k, x), = v.items()
    if k == "N":
        return ("N", Decimal(x).normalize())
    if k == "NS":
        return ("NS", frozenset(Decimal(n).normalize() for n in x))
    if k in ("SS",):
        return ("SS", frozenset(x))
    if k == "B":
        return ("B", bytes(x) if not isinstance(x, str) else base64.b64decode(x))
    if k == "BS":
        return ("BS", frozenset(bytes(b) if not isinstance(b, str) else base64.b64decode(b) for b in x))
    if k == "M":
        return ("M", tuple(sorted((n, canon(e)) for n, e in x.items())))
    if k == "L":
        return ("L", tuple(canon(e) for e in x))
    return (k, x)


def canon_item(item):
    return canon({"M": item})


def json_item(item):
    """A DynamoDB-JSON item as the data file holds it (B as base64)."""
    return {k: {t: (base64.b64decode(x) if t == "B" else [base64.b64decode(b) for b in x] if t == "BS" else
                    {n: json_item({n: e})[n] for n, e in x.items()} if t == "M" else
                    [json_item({"_": e})["_"] for e in x] if t == "L" else x)
                for t, x in v.items()} for k, v in item.items()}


def read_export(s3_buckets, bucket, desc):
    """Reads a COMPLETED export's objects, checking the layout, the
    manifests and their checksums; answers (summary, items)."""
    manifest_key = desc["ExportManifest"]
    prefix = manifest_key.rsplit("/", 1)[0]
    summary_raw = s3_buckets.get(bucket, manifest_key)
    summary = json.loads(summary_raw)
    files_raw = s3_buckets.get(bucket, summary["manifestFilesS3Key"])
    assert s3_buckets.get(bucket, prefix + "/_started") == b""
    for name, raw in (("manifest-summary", summary_raw), ("manifest-files", files_raw)):
        assert s3_buckets.get(bucket, f"{prefix}/{name}.checksum").decode() == hashlib.md5(raw).hexdigest()
    keys = set(s3_buckets.keys(bucket, prefix + "/"))
    items = []
    count = 0
    entries = [json.loads(line) for line in files_raw.decode().splitlines()]
    assert entries
    for e in entries:
        assert set(e) == {"itemCount", "md5Checksum", "etag", "dataFileS3Key"}
        key = e["dataFileS3Key"]
        ext = ".json.gz" if summary["outputFormat"] == "DYNAMODB_JSON" else ".ion.gz"
        assert re.fullmatch(re.escape(prefix) + r"/data/[a-z2-7]{26}" + re.escape(ext), key), key
        assert key in keys
        body = s3_buckets.get(bucket, key)
        assert e["md5Checksum"] == base64.b64encode(hashlib.md5(body).digest()).decode()
        assert e["etag"] == hashlib.md5(body).hexdigest()
        text = gzip.decompress(body).decode()
        if summary["outputFormat"] == "DYNAMODB_JSON":
            got = [json_item(json.loads(line)["Item"]) for line in text.splitlines()]
        else:
            assert text.startswith("$ion_1_0")
            got = []
            for v in IonText(text).values():
                assert set(v["M"]) == {"Item"}
                got.append(v["M"]["Item"]["M"])
        assert len(got) == e["itemCount"]
        items += got
        count += e["itemCount"]
    assert count == summary["itemCount"]
    return summary, items


ITEMS = [
    {"pk": {"S": "a"}, "sk": {"N": "1"}, "s": {"S": "text \"quoted\" ü"}, "n": {"N": "-12.50"}, "big": {"N": "1E+30"},
     "b": {"B": b"\x00\x01\xff"}, "t": {"BOOL": True}, "z": {"NULL": True}},
    {"pk": {"S": "a"}, "sk": {"N": "2"}, "ss": {"SS": ["x", "y"]}, "ns": {"NS": ["1", "2.5", "-3"]},
     "bs": {"BS": [b"\x01", b"\x02\x03"]}},
    {"pk": {"S": "b"}, "sk": {"N": "1"}, "l": {"L": [{"S": "x"}, {"N": "1"}, {"L": []}, {"M": {}}]},
     "m": {"M": {"in": {"S": "<&>"}, "deep": {"M": {"k": {"SS": ["only"]}}}}}, "with space": {"S": "line\nbreak"}},
]


@pytest.mark.parametrize("fmt", ["DYNAMODB_JSON", "ION"])
def test_full_export_reads_back_as_the_table(ddb, make_table, s3_buckets, fmt):
    table = make_table(range_key=("sk", "N"))
    for it in ITEMS:
        ddb.put_item(TableName=table, Item=it)
    for i in range(40):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"bulk{i % 7}"}, "sk": {"N": str(i)}, "v": {"S": "x" * i}})
    enable_pitr(ddb, table)
    # Changes after the base: in the log the export replays.
    ddb.delete_item(TableName=table, Key={"pk": {"S": "bulk0"}, "sk": {"N": "0"}})
    ddb.put_item(TableName=table, Item={"pk": {"S": "after"}, "sk": {"N": "1"}, "v": {"N": "7"}})
    ddb.update_item(TableName=table, Key={"pk": {"S": "a"}, "sk": {"N": "1"}}, UpdateExpression="SET t = :f",
                    ExpressionAttributeValues={":f": {"BOOL": False}})
    wait_window(ddb, table)
    bucket = s3_buckets.create(bucket_name())
    arn = table_arn(ddb, table)
    res = ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=bucket, S3Prefix="exports/run1", ExportFormat=fmt)
    d = res["ExportDescription"]
    assert d["ExportStatus"] == "IN_PROGRESS"
    assert re.fullmatch(re.escape(arn) + "/export/" + EXPORT_ID_RE, d["ExportArn"])
    assert d["ExportFormat"] == fmt and d["S3Bucket"] == bucket and d["S3Prefix"] == "exports/run1"
    assert d["S3SseAlgorithm"] == "AES256" and d["TableArn"] == arn
    assert "ItemCount" not in d and "EndTime" not in d and "ExportManifest" not in d
    done = wait_export(ddb, d["ExportArn"])
    assert done["ExportStatus"] == "COMPLETED", done
    export_id = d["ExportArn"].rsplit("/", 1)[1]
    assert done["ExportManifest"] == f"exports/run1/AWSDynamoDB/{export_id}/manifest-summary.json"
    summary, items = read_export(s3_buckets, bucket, done)
    table_items = scan_all(ddb, table)
    assert sorted(map(canon_item, items)) == sorted(map(canon_item, table_items))
    assert done["ItemCount"] == len(table_items) == summary["itemCount"]
    assert done["BilledSizeBytes"] == summary["billedSizeBytes"] > 0
    assert summary == {
        "version": "2020-06-30", "exportArn": d["ExportArn"],
        "startTime": summary["startTime"], "endTime": summary["endTime"],
        "tableArn": arn, "tableId": d["TableId"],
        "exportTime": d["ExportTime"].astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") +
        f"{d['ExportTime'].microsecond // 1000:03d}Z",
        "s3Bucket": bucket, "s3Prefix": "exports/run1", "s3SseAlgorithm": "AES256", "s3SseKmsKeyId": None,
        "manifestFilesS3Key": f"exports/run1/AWSDynamoDB/{export_id}/manifest-files.json",
        "billedSizeBytes": summary["billedSizeBytes"], "itemCount": len(table_items),
        "outputFormat": fmt, "exportType": "FULL_EXPORT"}
    assert summary["startTime"] <= summary["endTime"]
    # Every object is one of the layout's.
    names = {k.split(f"AWSDynamoDB/{export_id}/", 1)[1] for k in s3_buckets.keys(bucket)}
    assert {"_started", "manifest-summary.json", "manifest-summary.checksum", "manifest-files.json",
            "manifest-files.checksum"} <= names
    assert all(n.startswith("data/") for n in names - {"_started", "manifest-summary.json", "manifest-summary.checksum",
                                                          "manifest-files.json", "manifest-files.checksum"})


def test_export_time_selects_the_image(ddb, make_table, s3_buckets):
    """The image is the table at ExportTime, not now."""
    table = make_table()
    ddb.put_item(TableName=table, Item={"pk": {"S": "k"}, "v": {"S": "old"}})
    enable_pitr(ddb, table)
    ddb.put_item(TableName=table, Item={"pk": {"S": "gone-later"}, "v": {"S": "x"}})
    time.sleep(0.05)
    at = datetime.now(timezone.utc)
    time.sleep(0.05)
    ddb.put_item(TableName=table, Item={"pk": {"S": "k"}, "v": {"S": "new"}})
    ddb.delete_item(TableName=table, Key={"pk": {"S": "gone-later"}})
    ddb.put_item(TableName=table, Item={"pk": {"S": "born-later"}})
    wait_window(ddb, table)
    bucket = s3_buckets.create(bucket_name())
    d = ddb.export_table_to_point_in_time(TableArn=table_arn(ddb, table), S3Bucket=bucket, ExportTime=at)["ExportDescription"]
    done = wait_export(ddb, d["ExportArn"])
    assert done["ExportStatus"] == "COMPLETED", done
    assert done["ExportManifest"].startswith("AWSDynamoDB/")  # no prefix
    _, items = read_export(s3_buckets, bucket, done)
    assert sorted(map(canon_item, items)) == sorted(map(canon_item, [
        {"pk": {"S": "k"}, "v": {"S": "old"}}, {"pk": {"S": "gone-later"}, "v": {"S": "x"}}]))


def test_client_token_is_idempotent(ddb, make_table, s3_buckets):
    table = make_table()
    ddb.put_item(TableName=table, Item={"pk": {"S": "k"}})
    enable_pitr(ddb, table)
    bucket = s3_buckets.create(bucket_name())
    arn = table_arn(ddb, table)
    args = dict(TableArn=arn, S3Bucket=bucket, S3Prefix="p", ClientToken="token-" + bucket)
    first = ddb.export_table_to_point_in_time(**args)["ExportDescription"]
    again = ddb.export_table_to_point_in_time(**args)["ExportDescription"]
    assert again["ExportArn"] == first["ExportArn"]
    wait_export(ddb, first["ExportArn"])
    after = ddb.export_table_to_point_in_time(**args)["ExportDescription"]
    assert after["ExportArn"] == first["ExportArn"] and after["ExportStatus"] == "COMPLETED"
    for change in ({"S3Prefix": "other"}, {"ExportFormat": "ION"}, {"S3Bucket": s3_buckets.create(bucket_name())}):
        expect_error(ddb.export_table_to_point_in_time, "ExportConflictException",
                     message="Export conflict: Duplicate request detected with conflicting parameters", **{**args, **change})
    # Another token is another export.
    other = ddb.export_table_to_point_in_time(**{**args, "ClientToken": "other-" + bucket})["ExportDescription"]
    assert other["ExportArn"] != first["ExportArn"]
    wait_export(ddb, other["ExportArn"])


def test_missing_bucket_fails_the_export(ddb, make_table):
    table = make_table()
    enable_pitr(ddb, table)
    d = ddb.export_table_to_point_in_time(TableArn=table_arn(ddb, table), S3Bucket=bucket_name())["ExportDescription"]
    assert d["ExportStatus"] == "IN_PROGRESS"
    done = wait_export(ddb, d["ExportArn"])
    assert done["ExportStatus"] == "FAILED" and done["FailureCode"] == "S3NoSuchBucket", done
    assert done["FailureMessage"].startswith("The specified bucket does not exist")
    assert "ItemCount" not in done and "ExportManifest" not in done and "EndTime" in done


def test_list_exports(ddb, make_table, s3_buckets):
    table = make_table()
    enable_pitr(ddb, table)
    bucket = s3_buckets.create(bucket_name())
    arn = table_arn(ddb, table)
    arns = []
    for i in range(3):
        arns.append(ddb.export_table_to_point_in_time(TableArn=arn, S3Bucket=bucket, S3Prefix=f"n{i}")["ExportDescription"]["ExportArn"])
        time.sleep(0.01)
    for a in arns:
        assert wait_export(ddb, a)["ExportStatus"] == "COMPLETED"
    seen, kw = [], {}
    while True:
        r = ddb.list_exports(TableArn=arn, MaxResults=1, **kw)
        assert len(r["ExportSummaries"]) <= 1
        seen += r["ExportSummaries"]
        if "NextToken" not in r:
            break
        kw = {"NextToken": r["NextToken"]}
    # Newest first.
    assert seen == [{"ExportArn": a, "ExportStatus": "COMPLETED", "ExportType": "FULL_EXPORT"} for a in reversed(arns)]
    everything = [s["ExportArn"] for s in ddb.list_exports(MaxResults=25)["ExportSummaries"]]
    assert set(arns) <= set(everything) or len(everything) == 25
    # The records outlive the table; the table's listing does not.
    ddb.delete_table(TableName=table)
    assert ddb.list_exports(TableArn=arn)["ExportSummaries"] == []
    assert ddb.describe_export(ExportArn=arns[0])["ExportDescription"]["ExportStatus"] == "COMPLETED"


def test_export_errors(ddb, ddb_raw, make_table, s3_buckets):
    table = make_table()
    arn = table_arn(ddb, table)
    bucket = s3_buckets.create(bucket_name())
    expect_error(ddb.export_table_to_point_in_time, "PointInTimeRecoveryUnavailableException",
                 message=f"Point in time recovery is not enabled for table '{table}'", TableArn=arn, S3Bucket=bucket)
    gone = arn + "-nope"
    expect_error(ddb.export_table_to_point_in_time, "TableNotFoundException", message=f"Table not found: {gone}",
                 TableArn=gone, S3Bucket=bucket)
    validation(ddb.export_table_to_point_in_time, message="One or more parameter values were invalid: tableArn is not a valid ARN",
               TableArn=table, S3Bucket=bucket)
    validation(ddb.export_table_to_point_in_time, message="Invalid Request: Table ARN is invalid.",
               TableArn=arn + "/index/gsi", S3Bucket=bucket)
    enable_pitr(ddb, table)
    now = datetime.now(timezone.utc)
    for at in (now + timedelta(hours=1), now - timedelta(days=1)):
        expect_error(ddb.export_table_to_point_in_time, "InvalidExportTimeException", message="Export Time is invalid",
                     TableArn=arn, S3Bucket=bucket, ExportTime=at)
    for member, value, allowed in (("ExportFormat", "CSV", "[DYNAMODB_JSON, ION]"),
                                   ("ExportType", "PARTIAL_EXPORT", "[FULL_EXPORT, INCREMENTAL_EXPORT]"),
                                   ("S3SseAlgorithm", "aws:kms", "[AES256, KMS]")):
        validation(ddb_raw.export_table_to_point_in_time,
                   message=f"1 validation error detected: Value '{value}' at '{member[0].lower() + member[1:]}' "
                           f"failed to satisfy constraint: Member must satisfy enum value set: {allowed}",
                   TableArn=arn, S3Bucket=bucket, **{member: value})
    validation(ddb_raw.export_table_to_point_in_time,
               message="1 validation error detected: Value 'not-an-account' at 's3BucketOwner' failed to satisfy "
                       "constraint: Member must satisfy regular expression pattern: [0-9]{12}",
               TableArn=arn, S3Bucket=bucket, S3BucketOwner="not-an-account")
    validation(ddb_raw.export_table_to_point_in_time, match=r"^1 validation error detected: Value 'arn:aws:s3:::b' at 's3Bucket'",
               TableArn=arn, S3Bucket="arn:aws:s3:::b")
    validation(ddb_raw.export_table_to_point_in_time, match=r"Value null at 's3Bucket' failed to satisfy constraint: Member must not be null",
               TableArn=arn)
    for alg in (None, "AES256"):
        kw = {"S3SseAlgorithm": alg} if alg else {}
        validation(ddb.export_table_to_point_in_time, message="Invalid Request: KMS Key Id is not supported for this encryption type",
                   TableArn=arn, S3Bucket=bucket, S3SseKmsKeyId="alias/aws/s3", **kw)
    inc = {"ExportFromTime": now - timedelta(hours=1)}
    validation(ddb.export_table_to_point_in_time,
               message="Invalid Request: Export Type expected to be Incremental Export when incremental export specification is provided",
               TableArn=arn, S3Bucket=bucket, IncrementalExportSpecification=inc)
    validation(ddb.export_table_to_point_in_time,
               message="Invalid Request: When Export Type is Full Export , Incremental Export Specification should not be provided",
               TableArn=arn, S3Bucket=bucket, ExportType="FULL_EXPORT", IncrementalExportSpecification=inc)
    validation(ddb.export_table_to_point_in_time,
               message="Invalid Request: Incremental Export Specification expected when export type is set as Incremental Export",
               TableArn=arn, S3Bucket=bucket, ExportType="INCREMENTAL_EXPORT")
    validation(ddb.export_table_to_point_in_time,
               message="Invalid Request: ExportFromTime must be provided in IncrementalExportSpecification",
               TableArn=arn, S3Bucket=bucket, ExportType="INCREMENTAL_EXPORT",
               IncrementalExportSpecification={"ExportViewType": "NEW_IMAGE"})
    validation(ddb_raw.export_table_to_point_in_time,
               match=r"^1 validation error detected: Value 'NEW_IMAGES' at 'incrementalExportSpecification.exportViewType'",
               TableArn=arn, S3Bucket=bucket, ExportType="INCREMENTAL_EXPORT",
               IncrementalExportSpecification={"ExportFromTime": now, "ExportViewType": "NEW_IMAGES"})
    # The incremental period: after point-in-time recovery was turned on,
    # at least 15 minutes, not in the future.
    p = wait_window(ddb, table)
    start = p["LatestRestorableDateTime"]
    expect_error(ddb.export_table_to_point_in_time, "InvalidExportTimeException",
                 match=r"^Incremental export period from time cannot be less than the table creation time : \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$",
                 TableArn=arn, S3Bucket=bucket, ExportType="INCREMENTAL_EXPORT",
                 IncrementalExportSpecification={"ExportFromTime": now - timedelta(hours=1)})
    expect_error(ddb.export_table_to_point_in_time, "InvalidExportTimeException",
                 match=r"^Incremental export period to time cannot be greater than the current time : ",
                 TableArn=arn, S3Bucket=bucket, ExportType="INCREMENTAL_EXPORT",
                 IncrementalExportSpecification={"ExportFromTime": start, "ExportToTime": start + timedelta(hours=2)})
    expect_error(ddb.export_table_to_point_in_time, "InvalidExportTimeException",
                 message="Difference between export period from time and export period to time is less than 15 minutes",
                 TableArn=arn, S3Bucket=bucket, ExportType="INCREMENTAL_EXPORT",
                 IncrementalExportSpecification={"ExportFromTime": start, "ExportViewType": "NEW_IMAGE"})
    # DescribeExport and ListExports.
    unknown = arn + "/export/01234567890123-0badc0de"
    expect_error(ddb.describe_export, "ExportNotFoundException", message=f"Export not found: Export not found: {unknown}",
                 ExportArn=unknown)
    validation(ddb.describe_export, message="Invalid Export ARN", ExportArn=arn + "/backup/01234567890123-0badc0de")
    validation(ddb_raw.list_exports, message="1 validation error detected: Value '26' at 'maxResults' failed to satisfy "
                                             "constraint: Member must have value less than or equal to 25", MaxResults=26)
    validation(ddb.list_exports, message="Invalid Request: Provided nextToken is invalid: abc", NextToken="abc")
