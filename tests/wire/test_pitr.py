"""Point-in-time recovery: UpdateContinuousBackups, DescribeContinuousBackups,
the history shipped to the backup store and RestoreTableToPointInTime.

The suite's server keeps backups in a filesystem store (conftest.server_env),
so point-in-time recovery can be turned on; its history (head, base,
chained segments) appears under <account>/<table>/pitr/ in the store
(docs/backup-design.md section 7). A server without a store refuses it.
"""

import re
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import _make_client, extra_server, server_env
from wire_helpers import expect_error, raw_get, validation

ACCOUNT = "000000000000"


def spec(enabled, days=None):
    s = {"PointInTimeRecoveryEnabled": enabled}
    if days is not None:
        s["RecoveryPeriodInDays"] = days
    return s


def pitr_desc(ddb, table):
    return ddb.describe_continuous_backups(TableName=table)["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]


def test_recovery_period_bounds(ddb_raw, table):
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(True, 0),
               message="1 validation error detected: Value '0' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' "
                       "failed to satisfy constraint: Member must have value greater than or equal to 1")
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(True, 36),
               message="1 validation error detected: Value '36' at 'pointInTimeRecoverySpecification.recoveryPeriodInDays' "
                       "failed to satisfy constraint: Member must have value less than or equal to 35")
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification={},
               match="pointInTimeRecoverySpecification.pointInTimeRecoveryEnabled' failed to satisfy constraint: Member must not be null")


def test_disable_when_off_is_a_no_op(ddb, ddb_raw, table):
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(False))
    assert res["ContinuousBackupsDescription"] == {"ContinuousBackupsStatus": "ENABLED",
                                                   "PointInTimeRecoveryDescription": {"PointInTimeRecoveryStatus": "DISABLED"}}
    # A recovery period belongs to enabling only.
    validation(ddb_raw.update_continuous_backups, TableName=table, PointInTimeRecoverySpecification=spec(False, 5),
               message="Invalid Request: Cannot specify RecoveryPeriodInDays when disabling point-in-time recovery.")


@pytest.mark.capability("backups")
def test_enable_ships_and_describes_the_window(ddb, table, backup_root):
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
    d = res["ContinuousBackupsDescription"]
    assert d["ContinuousBackupsStatus"] == "ENABLED"
    assert d["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"] == "ENABLED"
    assert d["PointInTimeRecoveryDescription"]["RecoveryPeriodInDays"] == 35
    # The history starts with its first base (within a ship interval);
    # what is written after it goes to segments.
    deadline = time.monotonic() + 30
    while "LatestRestorableDateTime" not in pitr_desc(ddb, table):
        assert time.monotonic() < deadline, "no base shipped"
        time.sleep(0.2)
    for i in range(20):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"N": str(i)}})
    written = datetime.now(timezone.utc)
    ddb.transact_write_items(TransactItems=[
        {"Put": {"TableName": table, "Item": {"pk": {"S": "t1"}}}},
        {"Delete": {"TableName": table, "Key": {"pk": {"S": "absent"}}}}])
    deadline = time.monotonic() + 30
    while True:
        p = pitr_desc(ddb, table)
        latest = p.get("LatestRestorableDateTime")
        if latest is not None and latest >= written:
            break
        assert time.monotonic() < deadline, f"window never reached the writes: {p}"
        time.sleep(0.2)
    assert p["EarliestRestorableDateTime"] <= p["LatestRestorableDateTime"] <= datetime.now(timezone.utc)
    hist = list((Path(backup_root) / ACCOUNT / table / "pitr").iterdir())
    assert len(hist) == 1, hist
    assert (hist[0] / "pitr.json").is_file()
    segs = sorted((hist[0] / "segments").glob("*.jsonl.zst"))
    assert segs and all(Path(str(s) + ".sha256").is_file() for s in segs)
    assert list((hist[0] / "bases").glob("*/extenddb-base.json"))
    lag = [l for l in raw_get(ddb.meta.endpoint_url, "/metrics").body.decode().splitlines()
           if l.startswith("extenddb_pitr_lag_seconds{") and f'table="{table}"' in l]
    assert len(lag) == 1 and 0 <= float(lag[0].split()[-1]) < 60, lag

    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True, 7))
    assert res["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]["RecoveryPeriodInDays"] == 7
    res = ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(False))
    assert res["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"] == {"PointInTimeRecoveryStatus": "DISABLED"}


def test_enable_without_a_store(tmp_path):
    with extra_server(tmp_path, ["--memory"], server_env(tmp_path, EXTENDDB__BACKUP__STORE__KIND="disabled"), "nostore.log") as (ep, _):
        c = _make_client(ep)
        c.create_table(TableName="pitr_nostore", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        info = expect_error(c.update_continuous_backups, "ContinuousBackupsUnavailableException", TableName="pitr_nostore",
                            PointInTimeRecoverySpecification=spec(True))
        assert info.message == ("Point-in-time recovery is unavailable on this server: "
                                "no backup store is configured ([backup.store])")
        assert pitr_desc(c, "pitr_nostore") == {"PointInTimeRecoveryStatus": "DISABLED"}


# ------------------------------------------------------------- crashes

def history_check(store, table):
    """Checks a table's history in a filesystem store as a reader would:
    every segment with its sidecar, the sidecar's hash of the segment, the
    chain of sidecar hashes, ascending disjoint ranges. Returns the number
    of records and the head."""
    import hashlib
    import json
    hists = list((Path(store) / ACCOUNT / table / "pitr").iterdir())
    assert len(hists) == 1, hists
    head = json.loads((hists[0] / "pitr.json").read_text())
    prev, last, total = "0" * 64, head["start"], 0
    for seg in sorted((hists[0] / "segments").glob("*.jsonl.zst")):
        side = Path(str(seg) + ".sha256").read_bytes()
        lines = side.decode().split("\n")
        assert lines[0] == hashlib.sha256(seg.read_bytes()).hexdigest() + "  " + seg.name, seg
        assert lines[1] == "# prev " + prev, f"{seg}: chain broken"
        first, end = map(int, lines[2].split()[2:4])
        assert first == int(seg.name.split(".")[0]) and first > last, (seg, first, last)
        total += int(lines[3].split()[2])
        prev, last = hashlib.sha256(side).hexdigest(), end
    return total, head


def wait_latest_after(c, table, when, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        latest = pitr_desc(c, table).get("LatestRestorableDateTime")
        if latest is not None and latest >= when:
            return
        assert time.monotonic() < deadline, f"latest restorable {latest} never reached {when}"
        time.sleep(0.2)


@pytest.mark.capability("backups")
@pytest.mark.parametrize("point", ["pitr.after-segment", "pitr.after-base"])
def test_ship_crash_loses_and_duplicates_nothing(tmp_path, point):
    """The server is killed (SIGKILL) between a segment and its sidecar, or
    between a base's backup and its position; after a restart the history
    holds every write after its start exactly once, in an unbroken chain."""
    from test_backups import file_server, scan_all
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    catalog = ["--data-dir", str(data)]
    table = "pitr_crash"
    writes = 0
    with file_server(tmp_path, catalog, store, EXTENDDB_TEST_KILL_AT=point) as (c, proc):
        c.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        c.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
        if point == "pitr.after-segment":
            deadline = time.monotonic() + 30
            while "LatestRestorableDateTime" not in pitr_desc(c, table):
                assert time.monotonic() < deadline, "no base shipped"
                time.sleep(0.1)
            try:
                for i in range(50):
                    c.put_item(TableName=table, Item={"pk": {"S": f"a{i}"}})
                    writes += 1
            except Exception:
                pass  # killed meanwhile: the writes acknowledged before count
        proc.wait(timeout=30)
        assert proc.returncode == -9, proc.returncode
    with file_server(tmp_path, catalog, store) as (c, _):
        for i in range(20):
            c.put_item(TableName=table, Item={"pk": {"S": f"b{i}"}})
            writes += 1
        wait_latest_after(c, table, datetime.now(timezone.utc))
        total, head = history_check(store, table)
        # Every put wrote a new key: the items are the writes that
        # committed (a put in flight at the kill may have committed
        # without its answer), each one record.
        items = len(scan_all(c, table))
        assert writes <= items <= writes + 1 and total == items, (total, items, writes, head["start"])


# ------------------------------------------------------------- restore

def wait_base(c, table, timeout=30):
    deadline = time.monotonic() + timeout
    while "LatestRestorableDateTime" not in pitr_desc(c, table):
        assert time.monotonic() < deadline, "no base shipped"
        time.sleep(0.1)


def items_of(c, table):
    from test_backups import scan_all
    return {i["pk"]["S"]: i.get("v", {}).get("S") for i in scan_all(c, table)}


@pytest.fixture
def restored(ddb):
    """Names of restore targets to delete after the test (once ACTIVE)."""
    from test_backups import wait_table
    names = []
    yield names
    for n in names:
        try:
            wait_table(ddb, n, timeout=60)
            ddb.delete_table(TableName=n)
        except Exception:
            pass


def gsi_source(make_table):
    return make_table(
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}, {"AttributeName": "v", "AttributeType": "S"}],
        GlobalSecondaryIndexes=[{"IndexName": "byv", "KeySchema": [{"AttributeName": "v", "KeyType": "HASH"}],
                                 "Projection": {"ProjectionType": "ALL"}}])


@pytest.mark.capability("backups")
def test_restore_to_a_point_in_time(ddb, make_table, table_name, restored):
    """A restore to an instant between writes holds the items as they were
    then (several writes of a key, a delete, items of the base changed
    after it); a restore to the latest restorable time holds them all; the
    GSI is restored and built; RestoreSummary is DynamoDB's."""
    from test_backups import wait_table
    src = gsi_source(make_table)
    put = lambda k, v: ddb.put_item(TableName=src, Item={"pk": {"S": k}, "v": {"S": v}})
    put("b0", "base")
    put("b1", "base")
    put("b2", "base")
    ddb.update_continuous_backups(TableName=src, PointInTimeRecoverySpecification=spec(True))
    wait_base(ddb, src)
    put("a1", "x")
    put("a2", "x")
    put("a3", "x")
    put("a1", "y")
    ddb.delete_item(TableName=src, Key={"pk": {"S": "a2"}})
    put("b0", "changed")
    ddb.delete_item(TableName=src, Key={"pk": {"S": "b1"}})
    time.sleep(0.05)
    t1 = datetime.now(timezone.utc)
    time.sleep(0.05)
    put("a4", "late")
    put("a1", "z")
    ddb.delete_item(TableName=src, Key={"pk": {"S": "a3"}})
    ddb.delete_item(TableName=src, Key={"pk": {"S": "b2"}})
    wait_latest_after(ddb, src, datetime.now(timezone.utc))

    at_t1 = {"b0": "changed", "b2": "base", "a1": "y", "a3": "x"}
    latest = {"b0": "changed", "a1": "z", "a4": "late"}
    src_arn = ddb.describe_table(TableName=src)["Table"]["TableArn"]
    t_mid, t_last = table_name + "-mid", table_name + "-last"
    out = ddb.restore_table_to_point_in_time(SourceTableName=src, TargetTableName=t_mid, RestoreDateTime=t1)["TableDescription"]
    restored.append(t_mid)
    assert out["TableName"] == t_mid and out["TableStatus"] == "CREATING"
    rs = out["RestoreSummary"]
    assert rs["SourceTableArn"] == src_arn and rs["RestoreInProgress"] is True and "SourceBackupArn" not in rs
    assert abs((rs["RestoreDateTime"] - t1).total_seconds()) < 0.002, (rs["RestoreDateTime"], t1)
    t = wait_table(ddb, t_mid, timeout=60)
    assert "RestoreSummary" not in t
    assert [g["IndexName"] for g in t["GlobalSecondaryIndexes"]] == ["byv"]
    assert items_of(ddb, t_mid) == at_t1
    q = ddb.query(TableName=t_mid, IndexName="byv", KeyConditionExpression="v = :v", ExpressionAttributeValues={":v": {"S": "y"}})
    assert [i["pk"]["S"] for i in q["Items"]] == ["a1"]
    q = ddb.query(TableName=t_mid, IndexName="byv", KeyConditionExpression="v = :v", ExpressionAttributeValues={":v": {"S": "base"}})
    assert [i["pk"]["S"] for i in q["Items"]] == ["b2"]
    # Neither the PITR setting nor TTL nor a stream is restored.
    assert pitr_desc(ddb, t_mid) == {"PointInTimeRecoveryStatus": "DISABLED"}
    assert "StreamSpecification" not in t

    out = ddb.restore_table_to_point_in_time(SourceTableArn=src_arn, TargetTableName=t_last, UseLatestRestorableTime=True,
                                             BillingModeOverride="PROVISIONED",
                                             ProvisionedThroughputOverride={"ReadCapacityUnits": 3, "WriteCapacityUnits": 4},
                                             GlobalSecondaryIndexOverride=[])["TableDescription"]
    restored.append(t_last)
    t = wait_table(ddb, t_last, timeout=60)
    assert items_of(ddb, t_last) == latest
    assert t["BillingModeSummary"]["BillingMode"] == "PROVISIONED"
    assert t["ProvisionedThroughput"]["ReadCapacityUnits"] == 3 and t["ProvisionedThroughput"]["WriteCapacityUnits"] == 4
    assert "GlobalSecondaryIndexes" not in t
    assert items_of(ddb, src) == latest


@pytest.mark.capability("backups")
def test_restore_a_transaction_whole(ddb, table, table_name, restored):
    """A restore to the latest time after a TransactWriteItems shows all of it."""
    from test_backups import wait_table
    ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
    wait_base(ddb, table)
    ddb.transact_write_items(TransactItems=[{"Put": {"TableName": table, "Item": {"pk": {"S": f"t{i}"}, "v": {"S": "t"}}}}
                                            for i in range(5)] +
                             [{"Delete": {"TableName": table, "Key": {"pk": {"S": "absent"}}}}])
    wait_latest_after(ddb, table, datetime.now(timezone.utc))
    ddb.restore_table_to_point_in_time(SourceTableName=table, TargetTableName=table_name, UseLatestRestorableTime=True)
    restored.append(table_name)
    wait_table(ddb, table_name, timeout=60)
    assert items_of(ddb, table_name) == {f"t{i}": "t" for i in range(5)}


@pytest.mark.capability("backups")
def test_restore_refuses_a_damaged_history(ddb, table, table_name, backup_root, restored):
    """A flipped byte in a segment, a missing segment and a missing base
    data file each make the restore fail before it writes an item: the
    target never turns ACTIVE, holds no item and is removed. Repaired,
    the history restores."""
    from test_backups import wait_table
    if not backup_root:
        pytest.skip("needs the suite's filesystem store")
    ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
    wait_base(ddb, table)
    for i in range(20):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"S": "x" * 500}})
        if i % 5 == 4:
            time.sleep(1.2)  # several ship intervals: several segments
    wait_latest_after(ddb, table, datetime.now(timezone.utc))
    hist = next((Path(backup_root) / ACCOUNT / table / "pitr").iterdir())
    segs = sorted((hist / "segments").glob("*.jsonl.zst"))
    assert len(segs) >= 2, segs
    # The restore loads the newest base (base ids sort by time); two
    # servers sharing one database may each have taken one.
    data_file = sorted((hist / "bases").glob("*/data/000001.json.zst"))[-1]

    def refused(name):
        ddb.restore_table_to_point_in_time(SourceTableName=table, TargetTableName=name, UseLatestRestorableTime=True)
        deadline = time.monotonic() + 30
        while True:
            try:
                t = ddb.describe_table(TableName=name)["Table"]
                assert t["TableStatus"] == "CREATING", t
                assert ddb.scan(TableName=name)["Count"] == 0
            except ddb.exceptions.ResourceNotFoundException:
                return
            assert time.monotonic() < deadline, "the target of a damaged history was not removed"
            time.sleep(0.05)

    def flipped(f):
        data = f.read_bytes()
        bad = bytearray(data)
        bad[len(bad) // 2] ^= 0x01
        f.write_bytes(bytes(bad))
        return lambda: f.write_bytes(data)

    def removed(*fs):
        saved = [(f, f.read_bytes()) for f in fs]
        for f in fs:
            f.unlink()
        return lambda: [f.write_bytes(d) for f, d in saved]

    for n, damage in enumerate([lambda: flipped(segs[0]),
                                lambda: removed(segs[0], Path(str(segs[0]) + ".sha256")),
                                lambda: removed(data_file)]):
        repair = damage()
        refused(f"{table_name}-{n}")
        repair()
    ddb.restore_table_to_point_in_time(SourceTableName=table, TargetTableName=table_name, UseLatestRestorableTime=True)
    restored.append(table_name)
    wait_table(ddb, table_name, timeout=60)
    assert len(items_of(ddb, table_name)) == 20


@pytest.mark.capability("backups")
def test_restore_errors(ddb, ddb_raw, make_table, table_name):
    src = make_table()
    plain = make_table()
    ddb.update_continuous_backups(TableName=src, PointInTimeRecoverySpecification=spec(True))
    wait_base(ddb, src)
    now = datetime.now(timezone.utc)
    expect_error(ddb.restore_table_to_point_in_time, "TableNotFoundException", SourceTableName="no-such-table-xyz",
                 TargetTableName=table_name, UseLatestRestorableTime=True, message="Table not found: no-such-table-xyz")
    arn = ddb.describe_table(TableName=src)["Table"]["TableArn"]
    missing_arn = arn.rsplit("/", 1)[0] + "/no-such-table-xyz"
    expect_error(ddb.restore_table_to_point_in_time, "TableNotFoundException", SourceTableArn=missing_arn,
                 TargetTableName=table_name, UseLatestRestorableTime=True)
    expect_error(ddb.restore_table_to_point_in_time, "PointInTimeRecoveryUnavailableException", SourceTableName=plain,
                 TargetTableName=table_name, UseLatestRestorableTime=True,
                 message=f"Point in time recovery has not yet been enabled for this source table: {plain}")
    for when in (datetime(2001, 1, 1, tzinfo=timezone.utc), datetime.fromtimestamp(now.timestamp() + 3600, timezone.utc)):
        expect_error(ddb.restore_table_to_point_in_time, "InvalidRestoreTimeException", SourceTableName=src,
                     TargetTableName=table_name, RestoreDateTime=when,
                     match="^An invalid restore time was specified. RestoreDateTime must be between "
                           "EarliestRestorableDateTime and LatestRestorableDateTime")
    expect_error(ddb.restore_table_to_point_in_time, "TableAlreadyExistsException", SourceTableName=src,
                 TargetTableName=plain, UseLatestRestorableTime=True, message=f"Table already exists: {plain}")
    bad = [
        (dict(SourceTableName=src, SourceTableArn=arn, UseLatestRestorableTime=True),
         "Must provide exactly one of: sourceTableArn, sourceTableName"),
        (dict(UseLatestRestorableTime=True),
         "Must provide exactly one of: sourceTableArn, sourceTableName"),
        (dict(SourceTableName=src, UseLatestRestorableTime=True, RestoreDateTime=now),
         "Invalid Request: Either one of RestoreDateTime or UseLatestRestorableTime must be specified, but not both"),
        (dict(SourceTableName=src),
         "Invalid Request: Either one of RestoreDateTime or UseLatestRestorableTime must be specified, but not both"),
        (dict(SourceTableName=src, UseLatestRestorableTime=False),
         "Invalid Request: Either one of RestoreDateTime or UseLatestRestorableTime must be specified, but not both"),
    ]
    for kw, msg in bad:
        validation(ddb_raw.restore_table_to_point_in_time, TargetTableName=table_name, message=msg, **kw)
    validation(ddb_raw.restore_table_to_point_in_time, TargetTableName="ab", SourceTableName=src, UseLatestRestorableTime=True,
               match="targetTableName' failed to satisfy constraint: Member must have length greater than or equal to 3")
    # Nothing was created by a refused restore.
    expect_error(ddb.describe_table, "ResourceNotFoundException", TableName=table_name)


@pytest.mark.capability("backups")
def test_restore_from_the_store_alone(tmp_path):
    """The server and its database are lost: a new server with a fresh
    catalog adopts the store (`backup sync --adopt-store`) and restores the
    table by its ARN, to the latest restorable time through the API and to
    an earlier instant with `extenddb backup restore-pitr`; by name it is
    not found (the catalog does not know it)."""
    import shutil
    import subprocess
    from conftest import _build_binary
    from test_backup_sync import FSStore, _clean_env, store_server, sync
    from test_backups import scan_all, wait_table
    st = FSStore(tmp_path / "store")
    a_data = tmp_path / "a-data"
    a_data.mkdir(mode=0o700)
    a_args = ["--data-dir", str(a_data)]
    table = "pitr_lost"
    with store_server(tmp_path, a_args, st) as a:
        a.create_table(TableName=table, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        a.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True))
        wait_base(a, table)
        for i in range(30):
            a.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"S": "one"}})
        time.sleep(0.05)
        t1 = datetime.now(timezone.utc)
        time.sleep(0.05)
        for i in range(10):
            a.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"S": "two"}})
        a.delete_item(TableName=table, Key={"pk": {"S": "k29"}})
        wait_latest_after(a, table, datetime.now(timezone.utc))
        arn = a.describe_table(TableName=table)["Table"]["TableArn"]
        want = {i["pk"]["S"]: i["v"]["S"] for i in scan_all(a, table)}
    shutil.rmtree(a_data)  # the database is lost

    b_data = tmp_path / "b-data"
    b_data.mkdir(mode=0o700)
    b_args = ["--data-dir", str(b_data)]
    sync(b_args, st, "--adopt-store")
    # `backup pitr-tables` lists the history with its window, from the store alone.
    p = subprocess.run([_build_binary(), "backup", "pitr-tables"], env=_clean_env(**st.env()),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:4] == ["TABLE", "EARLIEST", "LATEST", "DAYS"], p.stdout
    row = [l.split() for l in lines[1:] if l.split()[0] == table]
    assert len(row) == 1 and row[0][4] == arn and row[0][3] == "35", p.stdout
    earliest = datetime.fromisoformat(row[0][1].replace("Z", "+00:00"))
    latest = datetime.fromisoformat(row[0][2].replace("Z", "+00:00"))
    assert earliest <= t1 <= latest, (earliest, t1, latest)
    with store_server(tmp_path, b_args, st) as b:
        expect_error(b.restore_table_to_point_in_time, "TableNotFoundException", SourceTableName=table,
                     TargetTableName="copy_latest", UseLatestRestorableTime=True)
        out = b.restore_table_to_point_in_time(SourceTableArn=arn, TargetTableName="copy_latest",
                                               UseLatestRestorableTime=True)["TableDescription"]
        assert out["RestoreSummary"]["SourceTableArn"] == arn
        wait_table(b, "copy_latest", timeout=60)
        assert {i["pk"]["S"]: i["v"]["S"] for i in scan_all(b, "copy_latest")} == want
        ep = b.meta.endpoint_url
        p = subprocess.run([_build_binary(), "backup", "restore-pitr", "--endpoint", ep, "--target", "copy_t1",
                            "--at", t1.isoformat(timespec="milliseconds").replace("+00:00", "Z"), "--wait", arn],
                           env=_clean_env(), capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stdout + p.stderr
        assert "copy_t1" in p.stdout and "ACTIVE" in p.stdout, p.stdout
        assert {i["pk"]["S"]: i["v"]["S"] for i in scan_all(b, "copy_t1")} == {f"k{i}": "one" for i in range(30)}


@pytest.mark.capability("backups")
def test_delete_keeps_a_system_backup(ddb, ddb_raw, table, table_name, restored):
    """Deleting a table with point-in-time recovery on keeps a SYSTEM
    backup of it, as the service does: "<table>$DeletedTableBackup",
    expiring after the recovery period, listed only with BackupType
    SYSTEM or ALL, restorable, and not deletable by a client."""
    for i in range(30):
        ddb.put_item(TableName=table, Item={"pk": {"S": f"k{i}"}, "v": {"N": str(i)}})
    ddb.update_continuous_backups(TableName=table, PointInTimeRecoverySpecification=spec(True, 7))
    ddb.put_item(TableName=table, Item={"pk": {"S": "last"}})
    before = time.time()
    ddb.delete_table(TableName=table)
    system = [b for b in ddb.list_backups(BackupType="SYSTEM", TableName=table)["BackupSummaries"]]
    assert len(system) == 1, system
    b = system[0]
    assert b["BackupName"] == f"{table}$DeletedTableBackup" and b["BackupType"] == "SYSTEM" and b["BackupStatus"] == "AVAILABLE"
    expiry = b["BackupExpiryDateTime"].timestamp()
    assert before + 7 * 86400 - 60 < expiry < time.time() + 7 * 86400 + 60, b
    assert not ddb.list_backups(TableName=table)["BackupSummaries"]  # USER by default
    assert [x["BackupArn"] for x in ddb.list_backups(BackupType="ALL", TableName=table)["BackupSummaries"]] == [b["BackupArn"]]
    d = ddb.describe_backup(BackupArn=b["BackupArn"])["BackupDescription"]["BackupDetails"]
    assert d["BackupType"] == "SYSTEM" and d["BackupExpiryDateTime"] == b["BackupExpiryDateTime"]
    info = validation(ddb_raw.delete_backup, BackupArn=b["BackupArn"],
                      match=r"^Invalid Request: User is not allowed to delete the system backup with arn " + re.escape(b["BackupArn"]) +
                            r"\. It will automatically expire on ")
    assert info.message
    from test_backups import wait_table
    restored.append(table_name)
    ddb.restore_table_from_backup(TargetTableName=table_name, BackupArn=b["BackupArn"])
    wait_table(ddb, table_name)
    got = items_of(ddb, table_name)
    assert len(got) == 31 and "last" in got
