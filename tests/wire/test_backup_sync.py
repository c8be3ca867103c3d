"""`extenddb backup sync` end to end, on every store (filesystem, the
in-process gofakes3 S3, moto when EXTENDDB_TEST_MOTO_ENDPOINT is set) and
on the suite's catalog backend (SQLite, or PostgreSQL when the suite runs
on it): a lost catalog rebuilt from the store and restored (table-compare
finds the table identical), a store owned by another catalog refused until
--adopt-store, a copied store re-pointed with --move-store after a
file-by-file check (one flipped byte re-points nothing), partial prefixes
never adopted, a vanished backup pruned only with --prune-missing, and
--dry-run changing nothing (catalog and store compared before and after).
"""

import contextlib
import hashlib
import json
import os
import random
import re
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from conftest import _build_binary, _make_client, extra_server, server_env
from test_backups import ACCOUNT, ARN_RE, catalog, fill, scan_all, wait_backup, wait_table  # noqa: F401
from wire_helpers import expect_error, raw_get

S3_KEYS = {"EXTENDDB__BACKUP__STORE__REGION": "us-east-1", "EXTENDDB__BACKUP__STORE__ACCESS_KEY_ID": "extenddb-test",
           "EXTENDDB__BACKUP__STORE__SECRET_ACCESS_KEY": "extenddb-test-secret"}


class FSStore:
    """A filesystem store root."""

    def __init__(self, root):
        self.root = Path(root)
        self.root.mkdir(mode=0o700, exist_ok=True)
        self.spec = str(self.root)

    def env(self):
        return {"EXTENDDB__BACKUP__STORE__KIND": "filesystem", "EXTENDDB__BACKUP__STORE__ROOT": str(self.root)}

    def objects(self):
        """The store's objects and their hashes. A write in flight (the FS
        store's temporary file, renamed into place when complete: a live
        server's heartbeat, for one) is not an object yet, and may vanish
        while the tree is read."""
        out = {}
        for p in sorted(self.root.rglob("*")):
            if p.name.startswith(".extenddb-tmp\\") or not p.is_file():
                continue
            try:
                out[str(p.relative_to(self.root))] = hashlib.sha256(p.read_bytes()).hexdigest()
            except FileNotFoundError:
                continue
        return out

    def read(self, key):
        return (self.root / key).read_bytes()

    def write(self, key, data):
        p = self.root / key
        p.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        p.write_bytes(data)
        p.chmod(0o600)

    def delete(self, key):
        (self.root / key).unlink()

    def sibling(self, name):
        return FSStore(self.root.parent / name)


class S3Store:
    """A bucket and prefix on an S3 server."""

    def __init__(self, ep, bucket, prefix):
        import boto3
        self.ep, self.bucket, self.prefix = ep, bucket, prefix
        self.s3 = boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="extenddb-test",
                               aws_secret_access_key="extenddb-test-secret")
        self.spec = f"s3://{bucket}/{prefix}"

    def env(self):
        return {"EXTENDDB__BACKUP__STORE__KIND": "s3", "EXTENDDB__BACKUP__STORE__BUCKET": self.bucket,
                "EXTENDDB__BACKUP__STORE__PREFIX": self.prefix, "EXTENDDB__BACKUP__STORE__ENDPOINT": self.ep, **S3_KEYS}

    def objects(self):
        out, token = {}, None
        while True:
            kw = {"Bucket": self.bucket, "Prefix": self.prefix + "/"}
            if token:
                kw["ContinuationToken"] = token
            r = self.s3.list_objects_v2(**kw)
            for o in r.get("Contents", []):
                out[o["Key"][len(self.prefix) + 1:]] = hashlib.sha256(self.read(o["Key"][len(self.prefix) + 1:])).hexdigest()
            if not r.get("IsTruncated"):
                return out
            token = r["NextContinuationToken"]

    def read(self, key):
        return self.s3.get_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")["Body"].read()

    def write(self, key, data):
        self.s3.put_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}", Body=data)

    def delete(self, key):
        self.s3.delete_object(Bucket=self.bucket, Key=f"{self.prefix}/{key}")

    def sibling(self, name):
        return S3Store(self.ep, self.bucket, name)


def _targets():
    out = ["fs", "gofakes3"]
    if os.environ.get("EXTENDDB_TEST_MOTO_ENDPOINT"):
        out.append("moto")
    return out


@pytest.fixture(params=_targets())
def sync_store(request, tmp_path):
    if request.param == "fs":
        yield FSStore(tmp_path / "store")
        return
    yield request.getfixturevalue("s3_" + request.param)


@pytest.fixture
def s3_gofakes3(tmp_path):
    exe = tmp_path / "fakes3"
    subprocess.run(["go", "build", "-o", str(exe), "./internal/blobstore/internal/s3test/fakes3"],
                   cwd=Path(__file__).resolve().parents[2], check=True, capture_output=True)
    bucket = "extenddb-sync-" + "".join(random.choice("0123456789abcdef") for _ in range(10))
    proc = subprocess.Popen([str(exe), "-bucket", bucket], stdout=subprocess.PIPE, text=True)
    try:
        ep = proc.stdout.readline().strip()
        assert ep.startswith("http://127.0.0.1:"), ep
        yield S3Store(ep, bucket, "sync")
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture
def s3_moto():
    import boto3
    ep = os.environ["EXTENDDB_TEST_MOTO_ENDPOINT"].rstrip("/")
    bucket = "extenddb-sync-" + "".join(random.choice("0123456789abcdef") for _ in range(10))
    boto3.client("s3", endpoint_url=ep, region_name="us-east-1", aws_access_key_id="extenddb-test",
                 aws_secret_access_key="extenddb-test-secret").create_bucket(Bucket=bucket)
    yield S3Store(ep, bucket, "sync")


def _clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXTENDDB__")}
    env.update(extra)
    return env


@contextlib.contextmanager
def store_server(tmp_path, catalog_args, st, **env):
    """A server on catalog_args with backups in st."""
    # A spool directory of its own: the reconciler of any other server
    # with the default spool directory (the system's temporary directory)
    # removes spool directories of owners its catalog does not know.
    env.setdefault("EXTENDDB__BACKUP__SPOOL_DIR", tempfile.mkdtemp(prefix="spool-", dir=tmp_path))
    settings = {"EXTENDDB__BACKUP__RECONCILE_INTERVAL": "200ms", "EXTENDDB__BACKUP__HEARTBEAT_INTERVAL": "100ms",
                "EXTENDDB__BACKUP__STALE_AFTER": "1s"}
    settings.update(env)
    full = server_env(tmp_path, **st.env(), **settings)
    with extra_server(tmp_path, catalog_args, full) as (ep, _):
        yield _make_client(ep)


def sync(catalog_args, st, *flags, ok=True):
    """Runs `extenddb backup sync` (the server stopped) and answers the
    completed process; ok: the exit status must be 0 (True), non-zero
    (False) or anything (None)."""
    p = subprocess.run([_build_binary(), "backup", "sync", *flags, *catalog_args], env=_clean_env(**st.env()),
                       capture_output=True, text=True, timeout=120)
    if ok is not None:
        assert (p.returncode == 0) == ok, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    return p


def compare(a_ep, ta, b_ep, tb):
    p = subprocess.run([_build_binary(), "table-compare", "--endpoint", a_ep, "--endpoint-b", b_ep, ta, tb],
                       env=_clean_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("identical"), p.stdout + p.stderr


def rows(c, table):
    """The catalog as the server shows it: (arn, status) of every backup."""
    return sorted((b["BackupArn"], b["BackupStatus"]) for b in c.list_backups(TableName=table)["BackupSummaries"])


def prefix_of(arn):
    m = ARN_RE.match(arn)
    return f"{ACCOUNT}/{m.group('table')}/{m.group('id')}"


def test_sync_scenarios(tmp_path, catalog, sync_store):
    st = sync_store
    a_data = tmp_path / "a-data"
    a_data.mkdir(mode=0o700)
    a_args = ["--data-dir", str(a_data)]
    # Catalog A takes two backups.
    with store_server(tmp_path, a_args, st) as a:
        a.create_table(TableName="src", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(a, "src", 150)
        arns = []
        for name in ("one", "two"):
            arn = a.create_backup(TableName="src", BackupName=name)["BackupDetails"]["BackupArn"]
            wait_backup(a, arn)
            arns.append(arn)

    # Catalog A is lost: catalog B (the suite's backend) is pointed at the
    # store. It belongs to A: refused until --adopt-store.
    p = sync(catalog, st, ok=False)
    assert "--adopt-store" in p.stderr and "belongs to catalog" in p.stderr, p.stderr

    # A partial prefix (a backup job that died before its manifests): data
    # files only, under an id of its own.
    partial = f"{ACCOUNT}/src/01700000000000-0badc0de"
    for k in st.objects():
        if k.startswith(prefix_of(arns[0]) + "/data/"):
            st.write(partial + k[len(prefix_of(arns[0])):], st.read(k))

    # --dry-run changes nothing: not the store, not the catalog.
    with store_server(tmp_path, catalog, st) as b:
        before_rows = rows(b, "src")
    before = st.objects()
    p = sync(catalog, st, "--adopt-store", "--dry-run", ok=False)
    assert "2 adoptable" in p.stdout and "1 incomplete" in p.stdout and "0 adopted" in p.stdout, p.stdout
    assert "verifying backups" in p.stderr, p.stderr
    assert st.objects() == before
    with store_server(tmp_path, catalog, st) as b:
        assert rows(b, "src") == before_rows == []

    # Adopted; the partial prefix is reported (exit status 1) and never adopted.
    p = sync(catalog, st, "--adopt-store", ok=False)
    assert "2 adopted" in p.stdout and "1 incomplete" in p.stdout and partial in p.stdout, p.stdout
    assert "SUMMARY" in p.stdout and "already known" in p.stdout, p.stdout
    for k in [k for k in st.objects() if k.startswith(partial + "/")]:
        st.delete(k)
    p = sync(catalog, st)
    assert "2 known" in p.stdout and "0 adopted" in p.stdout, p.stdout

    # A restore from a rebuilt row yields the identical table.
    with store_server(tmp_path, catalog, st) as b:
        assert rows(b, "src") == sorted((arn, "AVAILABLE") for arn in arns)
        b.restore_table_from_backup(TargetTableName="dst", BackupArn=arns[0])
        wait_table(b, "dst")
        with store_server(tmp_path, a_args, st) as a:
            compare(a.meta.endpoint_url, "src", b.meta.endpoint_url, "dst")

    # A backup vanishes from the store: reported, pruned only with --prune-missing.
    for k in [k for k in st.objects() if k.startswith(prefix_of(arns[1]) + "/")]:
        st.delete(k)
    p = sync(catalog, st, ok=False)
    assert "1 missing" in p.stdout and "0 pruned" in p.stdout, p.stdout
    p = sync(catalog, st, "--prune-missing", "--dry-run", ok=False)
    assert "1 missing" in p.stdout and "0 pruned" in p.stdout, p.stdout
    with store_server(tmp_path, catalog, st) as b:
        assert rows(b, "src") == sorted((arn, "AVAILABLE") for arn in arns)
    p = sync(catalog, st, "--prune-missing")
    assert "1 pruned" in p.stdout, p.stdout
    with store_server(tmp_path, catalog, st) as b:
        deadline = time.monotonic() + 30
        while rows(b, "src") != [(arns[0], "AVAILABLE")]:
            assert time.monotonic() < deadline, rows(b, "src")
            time.sleep(0.1)
        expect_error(b.describe_backup, "BackupNotFoundException", BackupArn=arns[1])

    # The store is copied (without its identity file) to another root; one
    # flipped byte in the copy: --move-store re-points nothing.
    new = st.sibling("copy")
    for k in st.objects():
        if k != "extenddb-store.json":
            new.write(k, st.read(k))
    data_key = prefix_of(arns[0]) + "/data/000001.json.zst"
    good = new.read(data_key)
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0x01
    new.write(data_key, bytes(bad))
    p = sync(catalog, new, "--move-store", st.spec, ok=False)
    assert "nothing was re-pointed" in p.stderr and "damaged" in p.stdout and "data/000001.json.zst" in p.stdout, p.stdout + p.stderr
    # The rows still name the old store: a sync of it knows them.
    assert "1 known" in sync(catalog, st).stdout
    new.write(data_key, good)
    before = new.objects()
    # (The pruned row moves with it, unverified, if the reconciler has
    # not finished its delete yet: DELETING rows are not listed.)
    p = sync(catalog, new, "--move-store", st.spec, "--dry-run")
    assert re.search(r"movable +arn:\S+/" + ARN_RE.match(arns[0]).group("id") + " +AVAILABLE", p.stdout), p.stdout
    assert re.search(r"\b[12] movable", p.stdout) and "0 moved" in p.stdout, p.stdout
    assert new.objects() == before
    assert "1 known" in sync(catalog, st).stdout
    p = sync(catalog, new, "--move-store", st.spec)
    assert re.search(r"\b[12] moved", p.stdout), p.stdout
    p = sync(catalog, new)
    assert "1 known" in p.stdout, p.stdout
    # The old store is no longer the catalog's: its row names the copy.
    p = sync(catalog, st, ok=False)
    assert re.search(r"\b[12] other-store", p.stdout), p.stdout
    with store_server(tmp_path, catalog, new) as b:
        b.restore_table_from_backup(TargetTableName="dst2", BackupArn=arns[0])
        wait_table(b, "dst2")
        assert scan_all(b, "dst2") == scan_all(b, "dst")


@pytest.mark.parametrize("point", ["backup.mid-data", "backup.before-manifest", "backup.before-sidecar"])
def test_sync_never_adopts_a_crashed_backup(tmp_path, catalog, s3_gofakes3, point):
    """The server is killed at a step of a backup to S3 before its sidecar:
    a sync (this catalog, or a new one adopting the store) reports the
    prefix incomplete and adopts nothing."""
    st = s3_gofakes3
    with store_server(tmp_path, catalog, st, EXTENDDB_TEST_KILL_AT=point) as c:
        c.create_table(TableName="crash", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(c, "crash", 200, value="x" * 100)
        try:
            c.create_backup(TableName="crash", BackupName="dies")
        except Exception:
            pass
        deadline = time.monotonic() + 30
        while _alive(c):
            assert time.monotonic() < deadline, "the server was not killed"
            time.sleep(0.1)
    left = [k for k in st.objects() if "/crash/" in k]
    if point != "backup.mid-data":  # mid-data: the data file's upload never completed
        assert left, st.objects()
    fresh = tmp_path / "fresh"
    fresh.mkdir(mode=0o700)
    # The killed server's heartbeat (100 ms interval) is stale after 300 ms:
    # until then a new catalog's --adopt-store is refused.
    time.sleep(0.5)
    for args in (catalog, ["--data-dir", str(fresh)]):
        before = st.objects()
        p = sync(args, st, "--adopt-store", "--dry-run", ok=None)
        assert "adoptable" not in p.stdout and "0 adopted" in p.stdout, p.stdout
        assert f"{len(left) and 1} incomplete" in p.stdout and (p.returncode != 0) == bool(left), p.stdout
        assert st.objects() == before
        p = sync(args, st, "--adopt-store", ok=None)
        assert "0 adopted" in p.stdout and f"{len(left) and 1} incomplete" in p.stdout, p.stdout


def test_adopt_store_refuses_a_live_owner(tmp_path, catalog):
    """Two catalogs on one store: --adopt-store is refused while the
    owner's server runs (its heartbeat is live), naming it and --force;
    --force takes the store over and says so; the server that lost it then
    refuses backups and is not ready, saying why. Once the new owner's
    server stops cleanly, the first catalog adopts the store back without
    --force."""
    st = FSStore(tmp_path / "store")
    a_data = tmp_path / "a-data"
    a_data.mkdir(mode=0o700)
    a_args = ["--data-dir", str(a_data)]
    host = os.uname().nodename
    # The owner is live while its heartbeat is younger than 3 intervals: a
    # 1 s interval keeps it live on a loaded host (at 100 ms a late tick
    # made it look stale).
    with store_server(tmp_path, a_args, st, EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="1s",
                      EXTENDDB__BACKUP__STALE_AFTER="5s") as a:
        a.create_table(TableName="src", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST")
        fill(a, "src", 50)
        arn = a.create_backup(TableName="src", BackupName="one")["BackupDetails"]["BackupArn"]
        wait_backup(a, arn)
        # The owner's store heartbeat rewrites its file meanwhile (through a
        # temporary file on a filesystem store): not what is compared.
        def unchanged():
            return {k: v for k, v in st.objects().items()
                    if k != "extenddb-heartbeat.json" and not k.startswith(".extenddb-tmp")}
        before = unchanged()
        p = sync(catalog, st, "--adopt-store", ok=False)
        assert "heartbeat" in p.stderr and host in p.stderr and "--force" in p.stderr and "live" in p.stderr, p.stderr
        p = sync(catalog, st, "--adopt-store", "--dry-run", ok=False)
        assert "store-takeover-refused" in p.stdout and "1 adoptable" in p.stdout, p.stdout
        assert unchanged() == before
        p = sync(catalog, st, "--adopt-store", "--force")
        assert "store-taken-over" in p.stdout and "a live owner was overridden" in p.stdout and "1 adopted" in p.stdout, p.stdout
        info = expect_error(a.create_backup, "ServiceUnavailable", status=503, TableName="src", BackupName="late")
        assert "taken over from this catalog" in info.message and "--adopt-store" in info.message, info.message
        ready = raw_get(a.meta.endpoint_url, "/ready")
        assert ready.status == 503
        reason = json.loads(ready.body)["reason"]
        assert "taken over from this catalog" in reason and "--adopt-store" in reason, reason
    with store_server(tmp_path, catalog, st, EXTENDDB__BACKUP__HEARTBEAT_INTERVAL="1s",
                      EXTENDDB__BACKUP__STALE_AFTER="5s") as b:
        assert rows(b, "src") == [(arn, "AVAILABLE")]
        p = sync(a_args, st, "--adopt-store", ok=False)
        assert "whose servers look alive" in p.stderr, p.stderr
    p = sync(a_args, st, "--adopt-store")
    assert "store-taken-over" in p.stdout and "stopped cleanly" in p.stdout and "overridden" not in p.stdout, p.stdout
    assert "1 known" in p.stdout, p.stdout


def _alive(c):
    try:
        c.list_tables()
        return True
    except Exception:
        return False
