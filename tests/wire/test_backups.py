"""On-demand backups: CreateBackup, DescribeBackup, ListBackups, DeleteBackup.

The suite's server keeps its backups in a filesystem store of its own
(conftest.server_env); servers started here cover the configurations the
main one does not have (no store, one job at a time).
"""

import contextlib
import json
import os
import random
import re
import shlex
import subprocess
import time
from pathlib import Path
from urllib.parse import urlparse, urlunparse

import pytest

from conftest import _build_binary, _make_client, extra_server, server_env
from wire_helpers import REGION, expect_error, validation

ACCOUNT = "000000000000"
ARN_RE = re.compile(r"^arn:aws:dynamodb:" + re.escape(REGION) + r":" + ACCOUNT +
                    r":table/(?P<table>[A-Za-z0-9_.-]+)/backup/(?P<id>\d{14}-[0-9a-f]{8})$")


def S(v):
    return {"S": v}


def wait_backup(ddb, arn, status="AVAILABLE", timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        d = ddb.describe_backup(BackupArn=arn)["BackupDescription"]
        if d["BackupDetails"]["BackupStatus"] == status:
            return d
        assert time.monotonic() < deadline, f"backup {arn} still {d['BackupDetails']['BackupStatus']}"
        time.sleep(0.05)


def fill(ddb, table, n, value="v"):
    for start in range(0, n, 25):
        ddb.batch_write_item(RequestItems={table: [
            {"PutRequest": {"Item": {"pk": S(f"k{i:05d}"), "v": S(value)}}} for i in range(start, min(n, start + 25))]})


def fake_arn(table="nope", backup_id="01732908000123-1a2b3c4d"):
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}/backup/{backup_id}"


@contextlib.contextmanager
def aux_server(tmp_path, **env):
    """A server of its own (in-memory SQLite) with extra environment."""
    with extra_server(tmp_path, ["--memory"], server_env(tmp_path, **env), "aux.log") as (ep, _):
        yield _make_client(ep)


# ------------------------------------------------------------- round trip

@pytest.mark.capability("backups")
def test_backup_round_trip(ddb, make_table, backup_root):
    table = make_table(GlobalSecondaryIndexes=[{
        "IndexName": "byv", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "KEYS_ONLY"}}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "v", "AttributeType": "S"}])
    fill(ddb, table, 60, "before")
    before = time.time()
    res = ddb.create_backup(TableName=table, BackupName="nightly.1")
    # Writes acknowledged after the request are not in the backup.
    fill(ddb, table, 80, "after")
    det = res["BackupDetails"]
    m = ARN_RE.match(det["BackupArn"])
    assert m and m.group("table") == table, det
    assert det["BackupName"] == "nightly.1"
    assert det["BackupStatus"] in ("CREATING", "AVAILABLE")
    assert det["BackupType"] == "USER"
    created = det["BackupCreationDateTime"].timestamp()
    assert before - 5 < created < time.time() + 5
    assert int(m.group("id")[:14]) == round(created * 1000)

    d = wait_backup(ddb, det["BackupArn"])
    bd = d["BackupDetails"]
    assert bd["BackupArn"] == det["BackupArn"] and bd["BackupSizeBytes"] > 0
    src = d["SourceTableDetails"]
    desc = ddb.describe_table(TableName=table)["Table"]
    assert src["TableName"] == table
    assert src["TableId"] == desc["TableId"]
    assert src["TableArn"] == desc["TableArn"]
    assert src["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert src["ItemCount"] == 60
    assert src["BillingMode"] == "PAY_PER_REQUEST"
    assert src["ProvisionedThroughput"] == {"ReadCapacityUnits": 0, "WriteCapacityUnits": 0}
    assert src["TableCreationDateTime"] == desc["CreationDateTime"]
    feat = d["SourceTableFeatureDetails"]
    assert [g["IndexName"] for g in feat["GlobalSecondaryIndexes"]] == ["byv"]
    assert feat["GlobalSecondaryIndexes"][0]["Projection"] == {"ProjectionType": "KEYS_ONLY"}
    assert feat["TimeToLiveDescription"] == {"TimeToLiveStatus": "DISABLED"}

    listed = ddb.list_backups(TableName=table)["BackupSummaries"]
    assert [b["BackupArn"] for b in listed] == [det["BackupArn"]]
    s = listed[0]
    assert s["TableName"] == table and s["TableArn"] == desc["TableArn"] and s["TableId"] == desc["TableId"]
    assert s["BackupStatus"] == "AVAILABLE" and s["BackupType"] == "USER" and s["BackupName"] == "nightly.1"
    assert s["BackupSizeBytes"] == bd["BackupSizeBytes"]

    if backup_root:
        # The backup is complete in the store: sha256sum -c on its sidecar.
        d = Path(backup_root) / ACCOUNT / table / m.group("id")
        r = subprocess.run(["sha256sum", "-c", "extenddb-manifest.json.sha256"], cwd=d, capture_output=True, text=True)
        assert r.returncode == 0, r.stdout + r.stderr
        # ... which lists every file of the backup: data files, the AWS
        # export manifests and the manifest.
        files = sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file() and p.name != "extenddb-manifest.json.sha256")
        assert sorted(l.rsplit(": ", 1)[0] for l in r.stdout.splitlines() if l.endswith(": OK")) == files, r.stdout
        assert {"manifest-files.json", "manifest-summary.json", "extenddb-manifest.json"} <= set(files)
        assert sorted(p.name for p in (d / "data").iterdir())[0] == "000001.json.zst"

    out = ddb.delete_backup(BackupArn=det["BackupArn"])["BackupDescription"]
    assert out["BackupDetails"]["BackupArn"] == det["BackupArn"]
    assert out["BackupDetails"]["BackupStatus"] == "DELETED"
    assert out["SourceTableDetails"]["TableName"] == table
    expect_error(ddb.describe_backup, "BackupNotFoundException", BackupArn=det["BackupArn"],
                 message=f"Backup not found: {det['BackupArn']}")
    expect_error(ddb.delete_backup, "BackupNotFoundException", BackupArn=det["BackupArn"])
    assert ddb.list_backups(TableName=table)["BackupSummaries"] == []
    if backup_root:
        deadline = time.monotonic() + 10
        while (Path(backup_root) / ACCOUNT / table / m.group("id")).exists():
            assert time.monotonic() < deadline, "deleted backup's objects remain"
            time.sleep(0.05)


@pytest.mark.capability("backups")
def test_backup_survives_table_delete(ddb, make_table):
    table = make_table()
    fill(ddb, table, 3)
    arn = ddb.create_backup(TableName=table, BackupName="keep")["BackupDetails"]["BackupArn"]
    wait_backup(ddb, arn)
    ddb.delete_table(TableName=table)
    d = ddb.describe_backup(BackupArn=arn)["BackupDescription"]
    assert d["SourceTableDetails"]["TableName"] == table and d["SourceTableDetails"]["ItemCount"] == 3
    ddb.delete_backup(BackupArn=arn)


# ------------------------------------------------------------- listing

@pytest.mark.capability("backups")
def test_list_backups_paging_and_filters(ddb, make_table):
    table = make_table()
    fill(ddb, table, 2)
    arns = []
    for i in range(3):
        arns.append(ddb.create_backup(TableName=table, BackupName=f"b{i}-x")["BackupDetails"]["BackupArn"])
        time.sleep(0.005)
    for a in arns:
        wait_backup(ddb, a)
    assert sorted(arns) == arns  # ids start with the instant: creation order
    seen, start = [], None
    for _ in range(5):
        kw = {"TableName": table, "Limit": 1}
        if start:
            kw["ExclusiveStartBackupArn"] = start
        page = ddb.list_backups(**kw)
        seen += [b["BackupArn"] for b in page["BackupSummaries"]]
        start = page.get("LastEvaluatedBackupArn")
        if not start:
            break
    assert seen == arns
    page = ddb.list_backups(TableName=table, Limit=3)
    assert [b["BackupArn"] for b in page["BackupSummaries"]] == arns and "LastEvaluatedBackupArn" not in page
    # The table may be named by its ARN.
    tarn = ddb.describe_table(TableName=table)["Table"]["TableArn"]
    assert [b["BackupArn"] for b in ddb.list_backups(TableName=tarn)["BackupSummaries"]] == arns
    # Time range: lower bound inclusive, upper bound exclusive.
    times = [ddb.describe_backup(BackupArn=a)["BackupDescription"]["BackupDetails"]["BackupCreationDateTime"] for a in arns]
    got = ddb.list_backups(TableName=table, TimeRangeLowerBound=times[1], TimeRangeUpperBound=times[2])
    assert [b["BackupArn"] for b in got["BackupSummaries"]] == [arns[1]]
    # Backup types: all of ours are USER.
    assert ddb.list_backups(TableName=table, BackupType="SYSTEM")["BackupSummaries"] == []
    assert len(ddb.list_backups(TableName=table, BackupType="ALL")["BackupSummaries"]) == 3
    for a in arns:
        ddb.delete_backup(BackupArn=a)


def test_list_backups_validation(ddb_raw):
    validation(ddb_raw.list_backups, Limit=0,
               message="1 validation error detected: Value '0' at 'limit' failed to satisfy constraint: "
                       "Member must have value greater than or equal to 1")
    validation(ddb_raw.list_backups, Limit=101, match="Member must have value less than or equal to 100")
    validation(ddb_raw.list_backups, BackupType="NIGHTLY",
               match=r"Value 'NIGHTLY' at 'backupType' failed to satisfy constraint: Member must satisfy enum value set")


# ------------------------------------------------------------- errors

@pytest.mark.capability("backups")
def test_create_backup_table_not_found(ddb):
    expect_error(ddb.create_backup, "TableNotFoundException", TableName="no-such-table-xyz", BackupName="bk1",
                 message="Table not found: no-such-table-xyz")


def test_create_backup_validation(ddb_raw, table):
    validation(ddb_raw.create_backup, TableName=table, BackupName="ab",
               message="1 validation error detected: Value 'ab' at 'backupName' failed to satisfy constraint: "
                       "Member must have length greater than or equal to 3")
    validation(ddb_raw.create_backup, TableName=table, BackupName="bad name",
               match=r"Value 'bad name' at 'backupName' failed to satisfy constraint: Member must satisfy regular expression pattern: \[a-zA-Z0-9_.-\]\+")
    validation(ddb_raw.create_backup, TableName=table,
               match="Value null at 'backupName' failed to satisfy constraint: Member must not be null")


@pytest.mark.capability("backups")
def test_backup_not_found(ddb, ddb_raw):
    arn = fake_arn()
    expect_error(ddb.describe_backup, "BackupNotFoundException", BackupArn=arn, message=f"Backup not found: {arn}")
    expect_error(ddb.delete_backup, "BackupNotFoundException", BackupArn=arn, message=f"Backup not found: {arn}")
    validation(ddb_raw.describe_backup, BackupArn="arn:short",
               match="Value 'arn:short' at 'backupArn' failed to satisfy constraint: Member must have length greater than or equal to 37")


def test_backups_not_configured(tmp_path):
    with aux_server(tmp_path, EXTENDDB_TEST_BACKUP_STORE="disabled", EXTENDDB__BACKUP__STORE__KIND="disabled") as c:
        c.create_table(TableName="t1x", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        for fn, kw in [(c.create_backup, {"TableName": "t1x", "BackupName": "bk1"}),
                       (c.describe_backup, {"BackupArn": fake_arn("t1x")}),
                       (c.delete_backup, {"BackupArn": fake_arn("t1x")}),
                       (c.list_backups, {})]:
            info = validation(fn, **kw)
            assert "[backup.store]" in info.message, info.message


def test_limit_exceeded_and_backup_in_use(tmp_path):
    hold = tmp_path / "hold"
    hold.write_text("")
    with aux_server(tmp_path, EXTENDDB__BACKUP__MAX_CONCURRENT_JOBS="1",
                    EXTENDDB_TEST_HOLD_AT="backup.snapshot-open", EXTENDDB_TEST_HOLD_FILE=str(hold)) as c:
        c.create_table(TableName="t1x", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        arn = c.create_backup(TableName="t1x", BackupName="first")["BackupDetails"]["BackupArn"]
        info = expect_error(c.create_backup, "LimitExceededException", TableName="t1x", BackupName="second")
        assert "max_concurrent_jobs" in info.message
        # A backup being created cannot be deleted.
        expect_error(c.delete_backup, "BackupInUseException", BackupArn=arn)
        assert c.describe_backup(BackupArn=arn)["BackupDescription"]["BackupDetails"]["BackupStatus"] == "CREATING"
        os.remove(hold)
        wait_backup(c, arn)
        arn2 = c.create_backup(TableName="t1x", BackupName="second")["BackupDetails"]["BackupArn"]
        wait_backup(c, arn2)


# ------------------------------------------------------------- continuous backups

def test_continuous_backups_without_pitr(ddb, table):
    want = {"ContinuousBackupsStatus": "ENABLED",
            "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}
    assert ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"] == want
    res = ddb.update_continuous_backups(TableName=table,
                                        PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False})
    assert res["ContinuousBackupsDescription"] == want
    expect_error(ddb.describe_continuous_backups, "TableNotFoundException", TableName="no-such-table-xyz",
                 message="Table not found: no-such-table-xyz")
    expect_error(ddb.update_continuous_backups, "TableNotFoundException", TableName="no-such-table-xyz",
                 PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False})


# ------------------------------------------------------------- restore

def wait_table(ddb, name, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            t = ddb.describe_table(TableName=name)["Table"]
        except ddb.exceptions.ResourceNotFoundException:
            t = None
        if t is not None and t["TableStatus"] == "ACTIVE":
            return t
        assert time.monotonic() < deadline, f"table {name}: {t and t['TableStatus']}"
        time.sleep(0.05)


def scan_all(ddb, name, **kw):
    items, start = [], None
    while True:
        if start:
            kw["ExclusiveStartKey"] = start
        page = ddb.scan(TableName=name, **kw)
        items += page["Items"]
        start = page.get("LastEvaluatedKey")
        if not start:
            return sorted(items, key=lambda it: (it["pk"]["S"], it.get("sk", {}).get("N", "")))


@pytest.mark.capability("backups")
def test_restore_round_trip(ddb, make_table, table_name):
    src = make_table(range_key=("sk", "N"), GlobalSecondaryIndexes=[{
        "IndexName": "byv", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}],
        "Projection": {"ProjectionType": "ALL"}}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"},
                              {"AttributeName": "v", "AttributeType": "S"}])
    for start in range(0, 250, 25):
        ddb.batch_write_item(RequestItems={src: [{"PutRequest": {"Item": {
            "pk": S(f"p{i % 7}"), "sk": {"N": str(i)}, "v": S(f"v{i % 5}"), "n": {"N": str(i * 1.5)},
            "b": {"B": bytes([i % 256])}, "ss": {"SS": ["a", f"s{i}"]}}}} for i in range(start, start + 25)]})
    ddb.update_time_to_live(TableName=src, TimeToLiveSpecification={"Enabled": True, "AttributeName": "exp"})
    arn = ddb.create_backup(TableName=src, BackupName="for-restore")["BackupDetails"]["BackupArn"]
    wait_backup(ddb, arn)
    out = ddb.restore_table_from_backup(TargetTableName=table_name, BackupArn=arn)["TableDescription"]
    try:
        assert out["TableName"] == table_name and out["TableStatus"] == "CREATING"
        rs = out["RestoreSummary"]
        assert rs["SourceBackupArn"] == arn and rs["RestoreInProgress"] is True
        assert rs["SourceTableArn"] == ddb.describe_table(TableName=src)["Table"]["TableArn"]
        t = wait_table(ddb, table_name)
        assert "RestoreSummary" not in t
        assert t["KeySchema"] == ddb.describe_table(TableName=src)["Table"]["KeySchema"]
        assert [g["IndexName"] for g in t["GlobalSecondaryIndexes"]] == ["byv"]
        assert t["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
        assert scan_all(ddb, table_name) == scan_all(ddb, src)
        # The index was built.
        q = ddb.query(TableName=table_name, IndexName="byv", KeyConditionExpression="v = :v",
                      ExpressionAttributeValues={":v": S("v3")})
        assert q["Count"] == 50
        # TTL is not restored, as on the service.
        assert ddb.describe_time_to_live(TableName=table_name)["TimeToLiveDescription"]["TimeToLiveStatus"] == "DISABLED"
        expect_error(ddb.restore_table_from_backup, "TableAlreadyExistsException", TargetTableName=table_name, BackupArn=arn,
                     message=f"Table already exists: {table_name}")
    finally:
        wait_table(ddb, table_name)
        ddb.delete_table(TableName=table_name)
    ddb.delete_backup(BackupArn=arn)


@pytest.mark.capability("backups")
def test_restore_overrides(ddb, make_table, table_name):
    src = make_table(GlobalSecondaryIndexes=[
        {"IndexName": "gi1", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}], "Projection": {"ProjectionType": "KEYS_ONLY"}},
        {"IndexName": "gi2", "KeySchema": [{"AttributeName": "w", "KeyType": "HASH"}], "Projection": {"ProjectionType": "ALL"}}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "v", "AttributeType": "S"},
                              {"AttributeName": "w", "AttributeType": "S"}])
    ddb.put_item(TableName=src, Item={"pk": S("a"), "v": S("x"), "w": S("y")})
    arn = ddb.create_backup(TableName=src, BackupName="ovr")["BackupDetails"]["BackupArn"]
    wait_backup(ddb, arn)
    expect_error(ddb.restore_table_from_backup, "ValidationException", TargetTableName=table_name, BackupArn=arn,
                 GlobalSecondaryIndexOverride=[{"IndexName": "nope", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}],
                                                "Projection": {"ProjectionType": "ALL"}}])
    ddb.restore_table_from_backup(TargetTableName=table_name, BackupArn=arn, BillingModeOverride="PROVISIONED",
                                  ProvisionedThroughputOverride={"ReadCapacityUnits": 5, "WriteCapacityUnits": 6},
                                  GlobalSecondaryIndexOverride=[{"IndexName": "gi2", "KeySchema": [{"AttributeName": "w", "KeyType": "HASH"}],
                                                                 "Projection": {"ProjectionType": "ALL"},
                                                                 "ProvisionedThroughput": {"ReadCapacityUnits": 1, "WriteCapacityUnits": 2}}],
                                  SSESpecificationOverride={"Enabled": True, "SSEType": "KMS"})
    try:
        t = wait_table(ddb, table_name)
        assert [g["IndexName"] for g in t["GlobalSecondaryIndexes"]] == ["gi2"]
        assert t["ProvisionedThroughput"]["ReadCapacityUnits"] == 5 and t["ProvisionedThroughput"]["WriteCapacityUnits"] == 6
        assert t["GlobalSecondaryIndexes"][0]["ProvisionedThroughput"]["WriteCapacityUnits"] == 2
        assert t["SSEDescription"]["Status"] == "ENABLED"
        assert ddb.query(TableName=table_name, IndexName="gi2", KeyConditionExpression="w = :w",
                         ExpressionAttributeValues={":w": S("y")})["Count"] == 1
    finally:
        ddb.delete_table(TableName=table_name)
    ddb.delete_backup(BackupArn=arn)


@pytest.mark.capability("backups")
def test_restore_override_rules(ddb, ddb_raw, make_table, table_name):
    """Overrides must agree with the effective billing mode; an index
    override must match a source index (by name, or renamed with the same
    key schema and projection); the table class is not restored."""
    keys = [{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "v", "AttributeType": "S"}]
    src = make_table(AttributeDefinitions=keys, TableClass="STANDARD_INFREQUENT_ACCESS", GlobalSecondaryIndexes=[
        {"IndexName": "gi1", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}], "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    ddb.put_item(TableName=src, Item={"pk": S("a"), "v": S("x")})
    arn = ddb.create_backup(TableName=src, BackupName="rules")["BackupDetails"]["BackupArn"]
    wait_backup(ddb, arn)
    pt = {"ReadCapacityUnits": 2, "WriteCapacityUnits": 3}
    for kw, msg in [
        (dict(ProvisionedThroughputOverride=pt),
         "Invalid Request: Cannot override ProvisionedThroughput unless BillingMode is PROVISIONED"),
        (dict(ProvisionedThroughputOverride=pt, BillingModeOverride="PAY_PER_REQUEST"),
         "Invalid Request: Cannot override ProvisionedThroughput if BillingMode is overridden to PAY_PER_REQUEST"),
        (dict(BillingModeOverride="PROVISIONED"),
         "Invalid Request: Must override ProvisionedThroughput if BillingMode is overridden to PROVISIONED"),
        (dict(GlobalSecondaryIndexOverride=[{"IndexName": "other", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}],
                                             "Projection": {"ProjectionType": "ALL"}}]),
         "Invalid Request: Index other does not match a secondary index that existed in the source table and "
         "cannot be created during the restore operation"),
    ]:
        validation(ddb_raw.restore_table_from_backup, TargetTableName=table_name, BackupArn=arn, message=msg, **kw)
    table_arn = ddb.describe_table(TableName=src)["Table"]["TableArn"]
    validation(ddb_raw.restore_table_from_backup, TargetTableName=table_name, BackupArn=table_arn, message="Invalid Backup ARN")
    assert table_name not in ddb.list_tables()["TableNames"]
    ddb.restore_table_from_backup(TargetTableName=table_name, BackupArn=arn, GlobalSecondaryIndexOverride=[
        {"IndexName": "renamed", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}], "Projection": {"ProjectionType": "KEYS_ONLY"}}])
    try:
        t = wait_table(ddb, table_name)
        assert [g["IndexName"] for g in t["GlobalSecondaryIndexes"]] == ["renamed"]
        assert "TableClassSummary" not in t
        assert ddb.query(TableName=table_name, IndexName="renamed", KeyConditionExpression="v = :v",
                         ExpressionAttributeValues={":v": S("x")})["Count"] == 1
    finally:
        ddb.delete_table(TableName=table_name)
    ddb.delete_backup(BackupArn=arn)


@pytest.mark.capability("backups")
def test_restore_errors(ddb, ddb_raw, table):
    expect_error(ddb.restore_table_from_backup, "BackupNotFoundException", TargetTableName="t-restore-x",
                 BackupArn=fake_arn(), message=f"Backup not found: {fake_arn()}")
    validation(ddb_raw.restore_table_from_backup, TargetTableName="ab", BackupArn=fake_arn(),
               match="Value 'ab' at 'targetTableName' failed to satisfy constraint: Member must have length greater than or equal to 3")


@pytest.mark.capability("backups")
def test_restore_refuses_a_damaged_backup(ddb, make_table, table_name, backup_root):
    if not backup_root:
        pytest.skip("needs the suite's filesystem store")
    src = make_table()
    fill(ddb, src, 50)
    arn = ddb.create_backup(TableName=src, BackupName="damaged")["BackupDetails"]["BackupArn"]
    wait_backup(ddb, arn)
    d = Path(backup_root) / ACCOUNT / src / ARN_RE.match(arn).group("id")
    f = d / "data" / "000001.json.zst"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0x01
    f.write_bytes(bytes(data))
    ddb.restore_table_from_backup(TargetTableName=table_name, BackupArn=arn)
    # The restore fails verification and removes the target; it never
    # becomes ACTIVE and never holds an item.
    deadline = time.monotonic() + 30
    while True:
        try:
            t = ddb.describe_table(TableName=table_name)["Table"]
            assert t["TableStatus"] == "CREATING", t
            assert ddb.scan(TableName=table_name)["Count"] == 0
        except ddb.exceptions.ResourceNotFoundException:
            break
        assert time.monotonic() < deadline, "the target of a damaged backup was not removed"
        time.sleep(0.05)
    ddb.delete_backup(BackupArn=arn)


def test_restore_in_progress(tmp_path):
    """While a restore runs: its target is CREATING, cannot be deleted, its
    name answers TableInUseException, and its backup cannot be deleted."""
    hold = tmp_path / "hold"
    hold.write_text("")
    with aux_server(tmp_path, EXTENDDB_TEST_HOLD_AT="restore.before-active", EXTENDDB_TEST_HOLD_FILE=str(hold)) as c:
        c.create_table(TableName="src1", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        c.put_item(TableName="src1", Item={"pk": S("a")})
        arn = c.create_backup(TableName="src1", BackupName="b1x")["BackupDetails"]["BackupArn"]
        wait_backup(c, arn)
        c.restore_table_from_backup(TargetTableName="dst1", BackupArn=arn)
        assert c.describe_table(TableName="dst1")["Table"]["TableStatus"] == "CREATING"
        expect_error(c.restore_table_from_backup, "TableInUseException", TargetTableName="dst1", BackupArn=arn,
                     message="Table is being created: dst1")
        expect_error(c.delete_table, "ResourceInUseException", TableName="dst1")
        expect_error(c.delete_backup, "BackupInUseException", BackupArn=arn, message=f"Backup is being restored: {arn}")
        # A backup feeds one restore at a time.
        expect_error(c.restore_table_from_backup, "BackupInUseException", TargetTableName="dst2", BackupArn=arn,
                     message=f"Backup is being restored: {arn}")
        # The target's settings answer as if it did not exist yet, while
        # DescribeTable shows it with its RestoreSummary.
        t = c.describe_table(TableName="dst1")["Table"]
        assert t["RestoreSummary"]["RestoreInProgress"] is True and t["RestoreSummary"]["SourceBackupArn"] == arn
        dst_arn = t["TableArn"]
        gone = "Requested resource not found: Table: dst1 not found"
        expect_error(c.tag_resource, "ResourceNotFoundException", gone, ResourceArn=dst_arn, Tags=[{"Key": "k", "Value": "v"}])
        expect_error(c.untag_resource, "ResourceNotFoundException", gone, ResourceArn=dst_arn, TagKeys=["k"])
        expect_error(c.list_tags_of_resource, "ResourceNotFoundException", gone, ResourceArn=dst_arn)
        expect_error(c.update_time_to_live, "ResourceNotFoundException", gone, TableName="dst1",
                     TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
        expect_error(c.describe_time_to_live, "ResourceNotFoundException", gone, TableName="dst1")
        expect_error(c.update_table, "ResourceNotFoundException", gone, TableName="dst1", DeletionProtectionEnabled=True)
        expect_error(c.update_table, "ResourceNotFoundException", gone, TableName="dst1",
                     StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
        expect_error(c.create_backup, "TableNotFoundException", "Table not found: dst1", TableName="dst1", BackupName="early")
        expect_error(c.describe_continuous_backups, "TableNotFoundException", "Table not found: dst1", TableName="dst1")
        expect_error(c.update_continuous_backups, "TableNotFoundException", "Table not found: dst1", TableName="dst1",
                     PointInTimeRecoverySpecification={"PointInTimeRecoveryEnabled": False})
        expect_error(c.create_table, "ResourceInUseException", TableName="dst1",
                     KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                     AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        os.remove(hold)
        t = wait_table(c, "dst1")
        # Once ACTIVE the table keeps no RestoreSummary, as on the service,
        # and its settings can be changed.
        assert "RestoreSummary" not in t
        assert "RestoreSummary" not in c.describe_table(TableName="dst1")["Table"]
        c.tag_resource(ResourceArn=dst_arn, Tags=[{"Key": "k", "Value": "v"}])
        assert c.list_tags_of_resource(ResourceArn=dst_arn)["Tags"] == [{"Key": "k", "Value": "v"}]
        c.untag_resource(ResourceArn=dst_arn, TagKeys=["k"])
        c.update_time_to_live(TableName="dst1", TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"})
        assert c.describe_time_to_live(TableName="dst1")["TimeToLiveDescription"]["AttributeName"] == "ttl"
        c.describe_continuous_backups(TableName="dst1")
        assert c.update_table(TableName="dst1", DeletionProtectionEnabled=False)["TableDescription"]["TableName"] == "dst1"
        assert c.get_item(TableName="dst1", Key={"pk": S("a")})["Item"] == {"pk": S("a")}
        c.delete_table(TableName="dst1")
        c.delete_backup(BackupArn=arn)


# ------------------------------------------------------------- crashes

def _pg_dsn_from_serve_args():
    args = shlex.split(os.environ.get("EXTENDDB_SERVE_ARGS", ""))
    if os.environ.get("EXTENDDB_TEST_BACKEND") != "postgres" or "--dsn" not in args:
        return None
    return args[args.index("--dsn") + 1]


@pytest.fixture
def catalog(tmp_path):
    """Where the crash tests' servers keep their catalog, kept across
    restarts: on the suite's PostgreSQL (a fresh database of its own, named
    after the suite's) when the suite runs on PostgreSQL, else a SQLite
    file. Yields the serve arguments."""
    dsn = _pg_dsn_from_serve_args()
    if dsn is None:
        data = tmp_path / "data"
        data.mkdir(mode=0o700)
        yield ["--data-dir", str(data)]
        return
    u = urlparse(dsn)
    name = u.path.lstrip("/") + "_c" + "".join(random.choice("0123456789abcdef") for _ in range(8))
    admin = urlunparse(u._replace(path="/postgres"))
    subprocess.run(["psql", admin, "-qc", f"CREATE DATABASE {name}"], check=True, capture_output=True)
    own = urlunparse(u._replace(path="/" + name))
    subprocess.run([_build_binary(), "migrate", "--backend", "postgres", "--dsn", own], check=True, capture_output=True)
    try:
        yield ["--backend", "postgres", "--dsn", own]
    finally:
        subprocess.run(["psql", admin, "-qc", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"], capture_output=True)


@contextlib.contextmanager
def file_server(tmp_path, catalog_args, store, **env):
    """A server whose catalog (catalog_args) and backup store are kept
    across restarts, claims stale after 1s."""
    env = dict(EXTENDDB__BACKUP__STORE__KIND="filesystem", EXTENDDB__BACKUP__STORE__ROOT=str(store),
               EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="100ms", EXTENDDB__BACKUP__STALE_AFTER="1s",
               EXTENDDB__BACKUP__RECONCILE_INTERVAL="200ms", **env)
    with extra_server(tmp_path, catalog_args, server_env(tmp_path, **env)) as (ep, proc):
        yield _make_client(ep), proc


def objects(store, table):
    d = Path(store) / ACCOUNT / table
    while True:
        try:
            return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file()) if d.exists() else []
        except FileNotFoundError:
            continue  # a directory went away during the walk (the reconciler is deleting): walk again


@pytest.mark.parametrize("point", ["backup.snapshot-open", "backup.mid-data", "backup.before-manifest",
                                   "backup.before-sidecar", "backup.before-available"])
def test_backup_crash_then_reconcile(tmp_path, catalog, point):
    """The server is killed (SIGKILL) at a step of a backup; after a restart
    the reconciler fails the backup and removes its objects: nothing is
    reported AVAILABLE that does not verify, nothing is left behind, and no
    acknowledged item is lost."""
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    with file_server(tmp_path, catalog, store, EXTENDDB_TEST_KILL_AT=point) as (c, proc):
        c.create_table(TableName="crash1", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(c, "crash1", 200)
        try:
            arn = c.create_backup(TableName="crash1", BackupName="dies")["BackupDetails"]["BackupArn"]
        except Exception:
            arn = None  # killed before it answered
        proc.wait(timeout=30)
        assert proc.returncode == -9, proc.returncode
    with file_server(tmp_path, catalog, store) as (c, _):
        deadline = time.monotonic() + 30
        while c.list_backups(TableName="crash1")["BackupSummaries"] or objects(store, "crash1"):
            assert time.monotonic() < deadline, (c.list_backups(TableName="crash1"), objects(store, "crash1"))
            time.sleep(0.1)
        if arn:
            expect_error(c.describe_backup, "BackupNotFoundException", BackupArn=arn)
        assert len(scan_all(c, "crash1")) == 200
        # A new backup works.
        arn2 = c.create_backup(TableName="crash1", BackupName="lives")["BackupDetails"]["BackupArn"]
        assert wait_backup(c, arn2)["SourceTableDetails"]["ItemCount"] == 200


@pytest.mark.parametrize("point", ["delete.after-deleting", "delete.after-manifest-gone"])
def test_delete_crash_then_reconcile(tmp_path, catalog, point):
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    with file_server(tmp_path, catalog, store, EXTENDDB_TEST_KILL_AT=point) as (c, proc):
        c.create_table(TableName="crash2", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(c, "crash2", 30)
        arn = c.create_backup(TableName="crash2", BackupName="gone")["BackupDetails"]["BackupArn"]
        wait_backup(c, arn)
        try:
            c.delete_backup(BackupArn=arn)
        except Exception:
            pass
        proc.wait(timeout=30)
        assert proc.returncode == -9, proc.returncode
    with file_server(tmp_path, catalog, store) as (c, _):
        deadline = time.monotonic() + 30
        while objects(store, "crash2"):
            assert time.monotonic() < deadline, objects(store, "crash2")
            time.sleep(0.1)
        expect_error(c.describe_backup, "BackupNotFoundException", BackupArn=arn)
        assert c.list_backups(TableName="crash2")["BackupSummaries"] == []


# ------------------------------------------------------------- the CLI

def test_backup_cli(tmp_path):
    """extenddb backup create|list|describe|restore|delete against a server
    that verifies signatures (the CLI signs with the configuration's key),
    and verify offline, which names the first bad file."""
    store = tmp_path / "cli-store"
    store.mkdir(mode=0o700)
    cfg = tmp_path / "extenddb.toml"
    cfg.write_text(f'''
[server]
region = "{REGION}"
[[auth.keys]]
access_key_id = "AKIDEXTENDDBCLITEST"
secret_access_key = "cli-secret-0123456789"
[backup.store]
kind = "filesystem"
root = "{store}"
''')
    binary = _build_binary()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXTENDDB__")}
    with extra_server(tmp_path, ["--memory", "--config", str(cfg)], env, "cli-server.log") as (ep, _):
        def cli(*args, check=True):
            # Flags before positional arguments (urfave/cli stops at the first).
            flags = ["--config", str(cfg)] + ([] if args[0] == "verify" else ["--endpoint", ep])
            p = subprocess.run([binary, "backup", args[0], *flags, *args[1:]],
                               capture_output=True, text=True, env=env, timeout=60)
            if check:
                assert p.returncode == 0, p.stdout + p.stderr
            return p
        import boto3
        c = boto3.client("dynamodb", endpoint_url=ep, region_name=REGION,
                         aws_access_key_id="AKIDEXTENDDBCLITEST", aws_secret_access_key="cli-secret-0123456789")
        c.create_table(TableName="clit", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(c, "clit", 40)
        out = cli("create", "--table", "clit", "--name", "cli-bk", "--wait").stdout
        arn = out.split()[0]
        assert ARN_RE.match(arn), out
        assert "ITEMS" in out and " 40 " in out, out
        assert arn in cli("list", "--table", "clit").stdout
        assert json.loads(cli("describe", arn).stdout)["BackupDescription"]["BackupDetails"]["BackupStatus"] == "AVAILABLE"
        assert cli("verify", arn).stdout.startswith("OK " + arn)
        out = cli("restore", "--target", "clit2", "--wait", arn).stdout
        assert "ACTIVE" in out, out
        assert c.scan(TableName="clit2")["Count"] == 40
        # A flipped byte: verify fails and names the file.
        f = store / ACCOUNT / "clit" / ARN_RE.match(arn).group("id") / "data" / "000001.json.zst"
        data = bytearray(f.read_bytes())
        data[len(data) // 2] ^= 0x40
        f.write_bytes(bytes(data))
        p = cli("verify", arn, check=False)
        assert p.returncode != 0 and "data/000001.json.zst" in p.stderr, p.stdout + p.stderr
        cli("delete", arn)
        p = cli("describe", arn, check=False)
        assert p.returncode != 0 and "BackupNotFoundException" in p.stderr, p.stderr


@pytest.mark.capability("backups")
def test_backup_metrics(ddb, table, endpoint):
    from wire_helpers import raw_get
    arn = ddb.create_backup(TableName=table, BackupName="metered")["BackupDetails"]["BackupArn"]
    wait_backup(ddb, arn)
    ddb.delete_backup(BackupArn=arn)
    text = raw_get(endpoint, "/metrics").body.decode()
    ok = [l for l in text.splitlines() if l.startswith('extenddb_backup_jobs_finished_total{kind="backup",result="ok"}')]
    assert ok and float(ok[0].split()[-1]) >= 1, ok
    for name in ("extenddb_backup_jobs_running", "extenddb_backup_items_total", "extenddb_backup_bytes_total",
                 "extenddb_backup_job_duration_seconds", "extenddb_backup_snapshot_open_seconds"):
        assert name in text, name


def _metrics(endpoint):
    """The server's /metrics samples, by series (name and labels)."""
    from wire_helpers import raw_get
    out = {}
    for line in raw_get(endpoint, "/metrics").body.decode().splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


@pytest.mark.parametrize("point", ["restore.before-target", "restore.mid-spool", "restore.mid-load", "restore.before-active"])
def test_restore_crash_then_resume(tmp_path, catalog, point):
    """The server is killed at a step of a restore; after a restart the
    reconciler takes the job over, verifies the backup again and loads the
    items after the job's recorded progress (ADR 0027): it becomes ACTIVE
    with every item, each loaded once across both runs (the killed run had
    loaded and recorded the first batch at mid-load, every batch before
    ACTIVE), and no spool directory is left."""
    store, spool = tmp_path / "store", tmp_path / "spool"
    for d in (store, spool):
        d.mkdir(mode=0o700)
    with file_server(tmp_path, catalog, store, EXTENDDB__BACKUP__SPOOL_DIR=str(spool)) as (c, proc):
        c.create_table(TableName="rsrc", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(c, "rsrc", 350)
        arn = c.create_backup(TableName="rsrc", BackupName="for-crash")["BackupDetails"]["BackupArn"]
        wait_backup(c, arn)
    with file_server(tmp_path, catalog, store, EXTENDDB__BACKUP__SPOOL_DIR=str(spool), EXTENDDB_TEST_KILL_AT=point) as (c, proc):
        try:
            c.restore_table_from_backup(TargetTableName="rdst", BackupArn=arn)
        except Exception:
            pass
        proc.wait(timeout=30)
        assert proc.returncode == -9, proc.returncode
    with file_server(tmp_path, catalog, store, EXTENDDB__BACKUP__SPOOL_DIR=str(spool)) as (c, _):
        if point == "restore.before-target":
            # Killed between the job row and the target: the job is failed,
            # no target appears and the backup is free again.
            deadline = time.monotonic() + 30
            while True:
                try:
                    c.delete_backup(BackupArn=arn)
                    break
                except c.exceptions.BackupInUseException:
                    assert time.monotonic() < deadline, "the dead restore job still holds the backup"
                    time.sleep(0.1)
            expect_error(c.describe_table, "ResourceNotFoundException", TableName="rdst")
            return
        t = wait_table(c, "rdst", timeout=60)
        assert "RestoreSummary" not in t
        assert scan_all(c, "rdst") == scan_all(c, "rsrc")
        # Items the killed run had recorded are skipped, the others loaded
        # once (metrics of the restarted server: the resumed run only).
        skipped = {"restore.mid-spool": 0, "restore.mid-load": 100, "restore.before-active": 350}[point]
        deadline = time.monotonic() + 10
        while True:
            m = _metrics(c.meta.endpoint_url)
            if m.get('extenddb_backup_jobs_finished_total{kind="restore",result="ok"}', 0) >= 1:
                break
            assert time.monotonic() < deadline, m
            time.sleep(0.1)
        assert m.get("extenddb_backup_restore_skipped_items_total") == skipped, m
        assert m.get('extenddb_backup_items_total{kind="restore"}') == 350 - skipped, m
        deadline = time.monotonic() + 10
        while list(spool.iterdir()):
            assert time.monotonic() < deadline, list(spool.iterdir())
            time.sleep(0.1)


# ------------------------------------------------------------- across catalogs

def test_restore_across_catalogs_and_back(tmp_path, catalog):
    """A table backed up by one catalog (SQLite) is restored by another
    (PostgreSQL when the suite runs on it, else another SQLite database)
    after `backup sync --adopt-store`, and back; table-compare finds the
    restored tables identical to the source."""
    binary = _build_binary()
    store = tmp_path / "xstore"
    store.mkdir(mode=0o700)
    a_data = tmp_path / "a-data"
    a_data.mkdir(mode=0o700)
    a_args = ["--data-dir", str(a_data)]
    store_env = {**{k: v for k, v in os.environ.items() if not k.startswith("EXTENDDB__")},
                 "EXTENDDB__BACKUP__STORE__KIND": "filesystem", "EXTENDDB__BACKUP__STORE__ROOT": str(store)}

    def sync(args):
        p = subprocess.run([binary, "backup", "sync", "--adopt-store", *args], env=store_env,
                           capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stdout + p.stderr
        return p.stdout

    def compare(ep_a, ta, ep_b, tb):
        p = subprocess.run([binary, "table-compare", "--endpoint", ep_a, "--endpoint-b", ep_b, ta, tb],
                           env=store_env, capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert p.stdout.startswith("identical"), p.stdout

    with file_server(tmp_path, a_args, store) as (a, _):
        a.create_table(TableName="xsrc", BillingMode="PROVISIONED",
                       ProvisionedThroughput={"ReadCapacityUnits": 7, "WriteCapacityUnits": 3},
                       KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "sk", "AttributeType": "N"},
                                             {"AttributeName": "g", "AttributeType": "B"}],
                       GlobalSecondaryIndexes=[{"IndexName": "byg", "KeySchema": [{"AttributeName": "g", "KeyType": "HASH"}],
                                                "Projection": {"ProjectionType": "INCLUDE", "NonKeyAttributes": ["n"]},
                                                "ProvisionedThroughput": {"ReadCapacityUnits": 2, "WriteCapacityUnits": 2}}],
                       LocalSecondaryIndexes=[{"IndexName": "byn", "KeySchema": [{"AttributeName": "pk", "KeyType": "HASH"},
                                                                                 {"AttributeName": "sk", "KeyType": "RANGE"}],
                                               "Projection": {"ProjectionType": "KEYS_ONLY"}}])
        for start in range(0, 300, 25):
            a.batch_write_item(RequestItems={"xsrc": [{"PutRequest": {"Item": {
                "pk": S(f"p{i % 11}"), "sk": {"N": f"{i - 150}.25"}, "g": {"B": bytes([i % 5, 0xFF])},
                "n": {"N": str(10 ** (i % 30))}, "m": {"M": {"l": {"L": [S("x"), {"BOOL": True}, {"NULL": True}]}}},
                "ns": {"NS": [str(i), "-1e-5"]}, "bs": {"BS": [b"\xfe\xfe", bytes([i % 256])]}}}}
                for i in range(start, start + 25)]})
        arn = a.create_backup(TableName="xsrc", BackupName="cross")["BackupDetails"]["BackupArn"]
        wait_backup(a, arn)
    # The other catalog finds the store owned by the first: unhealthy until adopted.
    with file_server(tmp_path, catalog, store) as (b, _):
        b.create_table(TableName="xb1", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        info = expect_error(b.create_backup, "ServiceUnavailable", status=503, TableName="xb1", BackupName="nope")
        assert "belongs to catalog" in info.message, info.message
    out = sync(catalog)
    assert "1 adopted" in out, out
    with file_server(tmp_path, catalog, store) as (b, _):
        b_ep = b.meta.endpoint_url
        b.restore_table_from_backup(TargetTableName="xdst", BackupArn=arn)
        wait_table(b, "xdst")
        arn2 = b.create_backup(TableName="xdst", BackupName="back")["BackupDetails"]["BackupArn"]
        wait_backup(b, arn2)
        with file_server(tmp_path, a_args, store) as (a, _):
            compare(a.meta.endpoint_url, "xsrc", b_ep, "xdst")
    # And back: the first catalog adopts the store again and restores.
    out = sync(a_args)
    assert "1 adopted" in out and "1 known" in out, out
    with file_server(tmp_path, a_args, store) as (a, _):
        a.restore_table_from_backup(TargetTableName="xback", BackupArn=arn2)
        wait_table(a, "xback")
        compare(a.meta.endpoint_url, "xsrc", a.meta.endpoint_url, "xback")


# ------------------------------------------------------------- S3 stores

def _s3_targets():
    out = ["gofakes3"]
    if os.environ.get("EXTENDDB_TEST_MOTO_ENDPOINT"):
        out.append("moto")
    return out


@pytest.fixture(params=_s3_targets())
def s3_store(request, tmp_path):
    """An S3 store: the in-memory gofakes3 server (every run) or moto (when
    EXTENDDB_TEST_MOTO_ENDPOINT is set, as in make test-all). Yields
    (endpoint, bucket)."""
    import boto3
    bucket = "extenddb-wire-" + "".join(random.choice("0123456789abcdef") for _ in range(10))
    if request.param == "moto":
        ep = os.environ["EXTENDDB_TEST_MOTO_ENDPOINT"].rstrip("/")
        boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="extenddb-test",
                     aws_secret_access_key="extenddb-test-secret").create_bucket(Bucket=bucket)
        yield ep, bucket
        return
    exe = tmp_path / "fakes3"
    subprocess.run(["go", "build", "-o", str(exe), "./internal/blobstore/internal/s3test/fakes3"],
                   cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True)
    proc = subprocess.Popen([str(exe), "-bucket", bucket], stdout=subprocess.PIPE, text=True)
    try:
        ep = proc.stdout.readline().strip()
        assert ep.startswith("http://127.0.0.1:"), ep
        yield ep, bucket
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_backup_and_restore_on_s3(tmp_path, s3_store):
    import boto3
    ep, bucket = s3_store
    s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="extenddb-test",
                      aws_secret_access_key="extenddb-test-secret")
    env = {"EXTENDDB__BACKUP__STORE__KIND": "s3", "EXTENDDB__BACKUP__STORE__BUCKET": bucket,
           "EXTENDDB__BACKUP__STORE__PREFIX": "wire", "EXTENDDB__BACKUP__STORE__REGION": "us-east-1",
           "EXTENDDB__BACKUP__STORE__ENDPOINT": ep, "EXTENDDB__BACKUP__STORE__ACCESS_KEY_ID": "extenddb-test",
           "EXTENDDB__BACKUP__STORE__SECRET_ACCESS_KEY": "extenddb-test-secret"}
    with aux_server(tmp_path, **env) as c:
        c.create_table(TableName="s3t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(c, "s3t", 120)
        arn = c.create_backup(TableName="s3t", BackupName="on-s3")["BackupDetails"]["BackupArn"]
        wait_backup(c, arn)
        bid = ARN_RE.match(arn).group("id")
        keys = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket, Prefix=f"wire/{ACCOUNT}/s3t/{bid}/").get("Contents", [])]
        assert f"wire/{ACCOUNT}/s3t/{bid}/extenddb-manifest.json.sha256" in keys, keys
        assert f"wire/{ACCOUNT}/s3t/{bid}/data/000001.json.zst" in keys, keys
        c.restore_table_from_backup(TargetTableName="s3t-copy", BackupArn=arn)
        wait_table(c, "s3t-copy")
        assert scan_all(c, "s3t-copy") == scan_all(c, "s3t")
        c.delete_backup(BackupArn=arn)
        deadline = time.monotonic() + 30
        while s3.list_objects_v2(Bucket=bucket, Prefix=f"wire/{ACCOUNT}/s3t/{bid}/").get("KeyCount", 0):
            assert time.monotonic() < deadline, "objects of a deleted backup remain in S3"
            time.sleep(0.1)
