"""The AWS CLI (v1, installed into the suite's virtualenv from
requirements.txt) pointed at the endpoint with --endpoint-url.

The tests run the CLI's own driver in the test process (what the `aws`
script calls: argument parsing, the request, the output and the error
text are the same), since a process per command costs about 0.6 s of CPU
in imports alone; test_cli_binary runs the installed `aws` command itself."""

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from wire_helpers import ACCESS_KEY, REGION, SECRET_KEY


def _aws_binary():
    local = Path(sys.executable).parent / "aws"
    if local.exists():
        return str(local)
    found = shutil.which("aws")
    assert found, "aws CLI not found: run the suite through tests/wire/run.sh (awscli is in requirements.txt)"
    return found


@pytest.fixture(scope="module")
def aws_env(tmp_path_factory):
    """The CLI's environment: the suite's credentials and region, no
    config files, pager or retries."""
    home = tmp_path_factory.mktemp("awshome")
    return dict(AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY,
                AWS_DEFAULT_REGION=REGION, AWS_CONFIG_FILE=str(home / "config"),
                AWS_SHARED_CREDENTIALS_FILE=str(home / "credentials"), AWS_PAGER="",
                AWS_MAX_ATTEMPTS="1")


@pytest.fixture(scope="module")
def aws(endpoint, aws_env):
    """aws(*args, check=True): `aws --endpoint-url ENDPOINT --output json
    dynamodb *args` by the CLI's driver in this process; its parsed JSON
    output, or (check=False) a CompletedProcess with returncode, stdout
    and stderr."""
    from awscli.clidriver import create_clidriver

    drivers = []

    def run(*args, check=True):
        argv = ["--endpoint-url", endpoint, "--output", "json", "dynamodb", *args]
        out, err = io.StringIO(), io.StringIO()
        with mock.patch.dict(os.environ, aws_env), contextlib.redirect_stdout(out), \
                contextlib.redirect_stderr(err):
            # One driver (and botocore session) for the module, made in
            # the CLI's environment, as one shell runs many commands.
            if not drivers:
                drivers.append(create_clidriver())
            rc = drivers[0].main(argv)
        p = subprocess.CompletedProcess(["aws", *argv], rc, out.getvalue(), err.getvalue())
        if check:
            assert p.returncode == 0, f"{p.args} failed ({p.returncode}): {p.stderr}"
            return json.loads(p.stdout) if p.stdout.strip() else {}
        return p

    return run


def test_cli_binary(endpoint, aws_env, table_name):
    """The installed `aws` command, as a user runs it: a success and a
    service error (its exit status and the error's name on stderr)."""
    base = [_aws_binary(), "--endpoint-url", endpoint, "--output", "json", "dynamodb"]
    env = dict(os.environ, **aws_env)
    p = subprocess.run([*base, "list-tables"], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert isinstance(json.loads(p.stdout)["TableNames"], list)
    p = subprocess.run([*base, "describe-table", "--table-name", table_name], env=env,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    assert "ResourceNotFoundException" in p.stderr


@pytest.fixture
def cli_table(aws, ddb, table_name):
    aws("create-table", "--table-name", table_name,
        "--attribute-definitions", "AttributeName=pk,AttributeType=S", "AttributeName=sk,AttributeType=N",
        "--key-schema", "AttributeName=pk,KeyType=HASH", "AttributeName=sk,KeyType=RANGE",
        "--billing-mode", "PAY_PER_REQUEST")
    from conftest import wait_active
    wait_active(ddb, table_name)
    yield table_name
    try:
        ddb.delete_table(TableName=table_name)
    except ddb.exceptions.ResourceNotFoundException:
        pass


def test_cli_create_and_describe_table(aws, cli_table):
    d = aws("describe-table", "--table-name", cli_table)["Table"]
    assert d["TableName"] == cli_table
    assert d["TableStatus"] == "ACTIVE"
    assert d["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"},
                              {"AttributeName": "sk", "KeyType": "RANGE"}]


def test_cli_put_and_get_item(aws, cli_table):
    item = {"pk": {"S": "a"}, "sk": {"N": "1"}, "v": {"S": "h\u00e9llo"}, "l": {"L": [{"BOOL": True}]}}
    aws("put-item", "--table-name", cli_table, "--item", json.dumps(item))
    got = aws("get-item", "--table-name", cli_table, "--key", json.dumps({"pk": {"S": "a"}, "sk": {"N": "1"}}),
              "--consistent-read")
    assert got["Item"] == item


def test_cli_query(aws, cli_table):
    for i in (3, 1, 2):
        aws("put-item", "--table-name", cli_table, "--item", json.dumps({"pk": {"S": "q"}, "sk": {"N": str(i)}}))
    res = aws("query", "--table-name", cli_table, "--key-condition-expression", "pk = :p AND sk >= :m",
              "--expression-attribute-values", json.dumps({":p": {"S": "q"}, ":m": {"N": "2"}}))
    assert [i["sk"]["N"] for i in res["Items"]] == ["2", "3"]
    assert res["Count"] == 2


def test_cli_scan_with_pagination(aws, cli_table):
    for i in range(7):
        aws("put-item", "--table-name", cli_table, "--item", json.dumps({"pk": {"S": f"s{i}"}, "sk": {"N": "0"}}))
    # --page-size makes the CLI follow LastEvaluatedKey itself
    res = aws("scan", "--table-name", cli_table, "--page-size", "2")
    assert sorted(i["pk"]["S"] for i in res["Items"]) == [f"s{i}" for i in range(7)]
    assert res["Count"] == 7


def test_cli_error_reported(aws, table_name):
    p = aws("describe-table", "--table-name", table_name, check=False)
    assert p.returncode != 0
    assert "ResourceNotFoundException" in p.stderr


def test_cli_conditional_failure(aws, cli_table):
    item = json.dumps({"pk": {"S": "c"}, "sk": {"N": "1"}})
    aws("put-item", "--table-name", cli_table, "--item", item, "--condition-expression", "attribute_not_exists(pk)")
    p = aws("put-item", "--table-name", cli_table, "--item", item,
            "--condition-expression", "attribute_not_exists(pk)", check=False)
    assert p.returncode != 0 and "ConditionalCheckFailedException" in p.stderr


def test_cli_execute_statement(aws, cli_table):
    aws("execute-statement", "--statement", f"INSERT INTO \"{cli_table}\" VALUE {{'pk': 'x', 'sk': 1, 'v': 'one'}}")
    for i in range(2, 6):
        aws("execute-statement", "--statement", f"INSERT INTO \"{cli_table}\" VALUE {{'pk': 'x', 'sk': ?}}",
            "--parameters", json.dumps([{"N": str(i)}]))
    res = aws("execute-statement", "--statement", f"SELECT * FROM \"{cli_table}\" WHERE pk = ? AND sk = 1",
              "--parameters", json.dumps([{"S": "x"}]))
    assert res["Items"] == [{"pk": {"S": "x"}, "sk": {"N": "1"}, "v": {"S": "one"}}]
    # The CLI follows NextToken itself.
    res = aws("execute-statement", "--statement", f"SELECT sk FROM \"{cli_table}\" WHERE pk = 'x' ORDER BY sk DESC",
              "--limit", "2")
    assert [i["sk"]["N"] for i in res["Items"]][:2] == ["5", "4"]
    p = aws("execute-statement", "--statement", f"INSERT INTO \"{cli_table}\" VALUE {{'pk': 'x', 'sk': 1}}", check=False)
    assert p.returncode != 0 and "DuplicateItemException" in p.stderr
