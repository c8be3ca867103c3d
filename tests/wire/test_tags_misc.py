"""TagResource / UntagResource / ListTagsOfResource, DescribeLimits,
DescribeEndpoints."""

import pytest

from wire_helpers import expect_error, validation


def arn_of(ddb, table):
    return ddb.describe_table(TableName=table)["Table"]["TableArn"]


def tags(ddb, arn):
    return {t["Key"]: t["Value"] for t in ddb.list_tags_of_resource(ResourceArn=arn)["Tags"]}


def test_list_tags_empty(ddb, table):
    res = ddb.list_tags_of_resource(ResourceArn=arn_of(ddb, table))
    assert res.get("Tags", []) == []
    assert "NextToken" not in res


def test_tag_and_list(ddb, table):
    arn = arn_of(ddb, table)
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "test"},
                                             {"Key": "team", "Value": "db"}])
    assert tags(ddb, arn) == {"env": "test", "team": "db"}


def test_tag_replaces_existing_key(ddb, table):
    arn = arn_of(ddb, table)
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "test"}, {"Key": "k", "Value": "v"}])
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "env", "Value": "prod"}])
    assert tags(ddb, arn) == {"env": "prod", "k": "v"}


def test_tag_empty_value_allowed(ddb, table):
    arn = arn_of(ddb, table)
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "flag", "Value": ""}])
    assert tags(ddb, arn) == {"flag": ""}


def test_untag(ddb, table):
    arn = arn_of(ddb, table)
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "a", "Value": "1"}, {"Key": "b", "Value": "2"},
                                             {"Key": "c", "Value": "3"}])
    ddb.untag_resource(ResourceArn=arn, TagKeys=["a", "c", "not-there"])
    assert tags(ddb, arn) == {"b": "2"}


def test_tags_at_create_table(ddb, make_table):
    t = make_table(Tags=[{"Key": "created", "Value": "yes"}])
    assert tags(ddb, arn_of(ddb, t)) == {"created": "yes"}


def test_tags_are_per_table(ddb, make_table):
    a, b = make_table(), make_table()
    ddb.tag_resource(ResourceArn=arn_of(ddb, a), Tags=[{"Key": "only", "Value": "a"}])
    assert tags(ddb, arn_of(ddb, b)) == {}


def test_tags_of_recreated_table_are_gone(ddb, make_table):
    t = make_table()
    arn = arn_of(ddb, t)
    ddb.tag_resource(ResourceArn=arn, Tags=[{"Key": "old", "Value": "1"}])
    ddb.delete_table(TableName=t)
    from conftest import wait_deleted
    wait_deleted(ddb, t)
    make_table(name=t)
    assert tags(ddb, arn_of(ddb, t)) == {}


@pytest.mark.parametrize("arn", ["not-an-arn", "arn:aws:s3:::bucket",
                                 "arn:aws:dynamodb:us-east-1:000000000000:nottable/x"])
def test_invalid_arn_rejected(ddb, arn):
    validation(ddb.list_tags_of_resource, ResourceArn=arn)
    validation(ddb.tag_resource, ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}])
    validation(ddb.untag_resource, ResourceArn=arn, TagKeys=["k"])


def test_unknown_table_arn(ddb, table, table_name):
    arn = arn_of(ddb, table).rsplit("/", 1)[0] + "/" + table_name
    expect_error(ddb.list_tags_of_resource, "ResourceNotFoundException", ResourceArn=arn)
    expect_error(ddb.tag_resource, "ResourceNotFoundException", ResourceArn=arn,
                 Tags=[{"Key": "k", "Value": "v"}])
    expect_error(ddb.untag_resource, "ResourceNotFoundException", ResourceArn=arn, TagKeys=["k"])


def test_tag_key_too_long_rejected(ddb_raw, table):
    arn = arn_of(ddb_raw, table)
    validation(ddb_raw.tag_resource, ResourceArn=arn, Tags=[{"Key": "k" * 129, "Value": "v"}])
    assert tags(ddb_raw, arn) == {}


def test_tag_value_too_long_rejected(ddb_raw, table):
    arn = arn_of(ddb_raw, table)
    validation(ddb_raw.tag_resource, ResourceArn=arn, Tags=[{"Key": "k", "Value": "v" * 257}])


# ------------------------------------------------------------- limits/endpoints

def test_describe_limits(ddb):
    res = ddb.describe_limits()
    for k in ("AccountMaxReadCapacityUnits", "AccountMaxWriteCapacityUnits",
              "TableMaxReadCapacityUnits", "TableMaxWriteCapacityUnits"):
        assert isinstance(res[k], int) and res[k] > 0, (k, res)
    assert res["TableMaxReadCapacityUnits"] <= res["AccountMaxReadCapacityUnits"]
    assert res["TableMaxWriteCapacityUnits"] <= res["AccountMaxWriteCapacityUnits"]


def test_describe_endpoints(ddb):
    res = ddb.describe_endpoints()
    eps = res["Endpoints"]
    assert len(eps) >= 1
    for ep in eps:
        assert isinstance(ep["Address"], str) and ep["Address"]
        assert isinstance(ep["CachePeriodInMinutes"], int) and ep["CachePeriodInMinutes"] > 0
