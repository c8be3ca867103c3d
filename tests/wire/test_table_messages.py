"""The exact ValidationException texts of CreateTable, UpdateTable and the
table-level calls around them, for requests DynamoDB refuses: the
attribute-definition rules, index rules, stream and encryption settings,
the one-change-at-a-time rule of UpdateTable, and resource ARNs."""

import pytest

from wire_helpers import validation

INVALID = "One or more parameter values were invalid: "
PPR = dict(BillingMode="PAY_PER_REQUEST")
PT = {"ReadCapacityUnits": 1, "WriteCapacityUnits": 1}


def attr(name, typ="S"):
    return {"AttributeName": name, "AttributeType": typ}


def key(name, kind="HASH"):
    return {"AttributeName": name, "KeyType": kind}


def gsi(name, *keys, **extra):
    return {"IndexName": name, "KeySchema": list(keys), "Projection": {"ProjectionType": "ALL"}, **extra}


def lsi(name, *keys):
    return {"IndexName": name, "KeySchema": list(keys), "Projection": {"ProjectionType": "ALL"}}


CREATE_CASES = [
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("pk", "N")], KeySchema=[key("pk")], **PPR),
                 "Attribute Name is duplicated: pk", id="duplicate-definition"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("x")], KeySchema=[key("pk")], **PPR),
                 INVALID + "Number of attributes in KeySchema does not exactly match number of attributes "
                           "defined in AttributeDefinitions", id="unused-definition-no-index"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("x"), attr("g")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g"))], **PPR),
                 INVALID + "Some AttributeDefinitions are not used. AttributeDefinitions: [pk, x, g], keys used: [pk, g]",
                 id="unused-definition-with-index"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk"), key("sk", "RANGE")], **PPR),
                 "Invalid KeySchema: Some index key attribute have no definition", id="undefined-key-no-index"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g"))], **PPR),
                 INVALID + "Some index key attributes are not defined in AttributeDefinitions. Keys: [g], "
                           "AttributeDefinitions: [pk]", id="undefined-index-key"),
    # An index's key schema has its own words for key types in conflict.
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("g"), attr("h")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g"), key("h"))], **PPR),
                 INVALID + "The KeySchema exceeds the maximum allowed number of HASH key attributes", id="gsi-two-hash-keys"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("g"), attr("h")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g", "RANGE"), key("h", "RANGE"))], **PPR),
                 INVALID + "The KeySchema exceeds the maximum allowed number of RANGE key attributes", id="gsi-two-range-keys"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("g"), attr("h")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g", "RANGE"), key("h"))], **PPR),
                 INVALID + "All HASH key attributes must precede RANGE key attributes in the KeySchema", id="gsi-range-first"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("g")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g"), key("g", "RANGE"))], **PPR),
                 "The KeySchema contains multiple key attributes with the same name", id="gsi-one-attribute-twice"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("sk"), attr("l")], KeySchema=[key("pk"), key("sk", "RANGE")],
                      LocalSecondaryIndexes=[lsi("byl", key("l", "RANGE"), key("pk"))], **PPR),
                 INVALID + "All HASH key attributes must precede RANGE key attributes in the KeySchema", id="lsi-range-first"),
    # The table's own key schema keeps the table's words.
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("sk")], KeySchema=[key("sk", "RANGE"), key("pk")], **PPR),
                 "Invalid KeySchema: The first KeySchemaElement is not a HASH key type", id="table-range-first"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("sk"), attr("other")],
                      KeySchema=[key("pk"), key("sk", "RANGE")], LocalSecondaryIndexes=[lsi("byo", key("pk"))], **PPR),
                 INVALID + "Some AttributeDefinitions are not used. AttributeDefinitions: [pk, sk, other], keys used: [pk, sk]",
                 id="lsi-definition-unused"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("sk")],
                      KeySchema=[key("pk"), key("sk", "RANGE")], LocalSecondaryIndexes=[lsi("byo", key("pk"))], **PPR),
                 INVALID + "Index KeySchema does not have a range key for index: byo", id="lsi-without-range"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("g")], KeySchema=[key("pk")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g"), Projection={"ProjectionType": "INCLUDE",
                                                                             "NonKeyAttributes": ["a", "a"]})], **PPR),
                 INVALID + "Duplicate element in NonKeyAttributes: a", id="duplicate-non-key-attribute"),
    pytest.param(dict(AttributeDefinitions=[attr("pk"), attr("g")], KeySchema=[key("pk")], ProvisionedThroughput=PT,
                      GlobalSecondaryIndexes=[gsi("byg", key("g"))]),
                 INVALID + "ProvisionedThroughput is not specified for index: byg", id="index-without-throughput"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")], StreamSpecification={"StreamEnabled": True}, **PPR),
                 INVALID + "Table is being created with a stream enabled, UpdateViewType is required", id="stream-without-view"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")],
                      StreamSpecification={"StreamEnabled": False, "StreamViewType": "KEYS_ONLY"}, **PPR),
                 INVALID + "Table is being created with a stream disabled, UpdateViewType should not be specified",
                 id="disabled-stream-with-view"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")],
                      SSESpecification={"Enabled": False, "SSEType": "KMS"}, **PPR),
                 INVALID + "SSEType can not be specified if Enabled is false", id="sse-type-when-disabled"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")],
                      SSESpecification={"Enabled": False, "KMSMasterKeyId": "alias/k"}, **PPR),
                 INVALID + "KMSMasterKeyId can not be specified if Enabled is false", id="kms-key-when-disabled"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")],
                      SSESpecification={"Enabled": True, "SSEType": "AES256"}, **PPR),
                 INVALID + "SSEType AES256 is not supported", id="sse-aes256"),
    pytest.param(dict(AttributeDefinitions=[attr("pk")], KeySchema=[key("pk")],
                      SSESpecification={"Enabled": True, "KMSMasterKeyId": "alias/k"}, **PPR),
                 INVALID + "SSEType KMS is required if KMSMasterKeyId is specified", id="kms-key-without-type"),
]


@pytest.mark.parametrize("kwargs,message", CREATE_CASES)
def test_create_table_refusals(ddb_raw, table_name, kwargs, message):
    validation(ddb_raw.create_table, TableName=table_name, message=message, **kwargs)
    assert table_name not in ddb_raw.list_tables()["TableNames"]


def test_sse_specification_forms(ddb, make_table):
    # An empty specification keeps the default encryption; SSEType KMS
    # alone turns KMS on.
    plain = make_table(SSESpecification={})
    assert "SSEDescription" not in ddb.describe_table(TableName=plain)["Table"]
    kms = make_table(SSESpecification={"SSEType": "KMS"})
    sse = ddb.describe_table(TableName=kms)["Table"]["SSEDescription"]
    assert (sse["Status"], sse["SSEType"]) == ("ENABLED", "KMS")


UPDATE_CASES = [
    pytest.param(dict(SSESpecification={"Enabled": True}, DeletionProtectionEnabled=True),
                 INVALID + "Server-Side Encryption modification must be the only operation in the request", id="sse-and-more"),
    pytest.param(dict(TableClass="STANDARD_INFREQUENT_ACCESS", DeletionProtectionEnabled=True),
                 INVALID + "TableClass modification must be the only operation in the request", id="class-and-more"),
    pytest.param(dict(DeletionProtectionEnabled=True, BillingMode="PAY_PER_REQUEST"),
                 INVALID + "DeletionProtection modification must be the only operation in the request", id="protection-and-more"),
    pytest.param(dict(StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
                      BillingMode="PROVISIONED", ProvisionedThroughput=PT),
                 INVALID + "You cannot modify stream status while updating table IOPS", id="stream-and-throughput"),
    pytest.param(dict(AttributeDefinitions=[attr("g")], ProvisionedThroughput=PT, BillingMode="PROVISIONED",
                      GlobalSecondaryIndexUpdates=[{"Create": gsi("byg", key("g"), ProvisionedThroughput=PT)}]),
                 INVALID + "You cannot create or delete index while updating table IOPS", id="index-and-throughput"),
    pytest.param(dict(AttributeDefinitions=[attr("g")], StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
                      GlobalSecondaryIndexUpdates=[{"Create": gsi("byg", key("g"))}]),
                 INVALID + "You cannot create or delete index while changing stream status", id="index-and-stream"),
    pytest.param(dict(GlobalSecondaryIndexUpdates=[{"Create": gsi("byg", key("g"))}]),
                 INVALID + "AttributeDefinitions is not specified for index: byg", id="index-without-definitions"),
    pytest.param(dict(AttributeDefinitions=[attr("g"), attr("h")],
                      GlobalSecondaryIndexUpdates=[{"Create": gsi("byg", key("g"), key("h"))}]),
                 INVALID + "The KeySchema exceeds the maximum allowed number of HASH key attributes", id="index-two-hash-keys"),
    pytest.param(dict(GlobalSecondaryIndexUpdates=[{"Delete": {"IndexName": "byg"},
                                                    "Update": {"IndexName": "byg", "ProvisionedThroughput": PT}}]),
                 INVALID + "Only one global secondary index action is allowed per GlobalSecondaryIndexUpdate object",
                 id="two-index-actions"),
    pytest.param(dict(GlobalSecondaryIndexUpdates=[{}]),
                 INVALID + "One of GlobalSecondaryIndexUpdate.Update, GlobalSecondaryIndexUpdate.Create, "
                           "GlobalSecondaryIndexUpdate.Delete must not be null", id="empty-index-update"),
    pytest.param(dict(StreamSpecification={"StreamEnabled": True}),
                 INVALID + "If stream is being enabled then UpdateViewType is required", id="stream-without-view"),
    pytest.param(dict(StreamSpecification={"StreamEnabled": False, "StreamViewType": "KEYS_ONLY"}),
                 INVALID + "If stream is being disabled, then UpdateViewType must not be specified", id="disable-with-view"),
]


@pytest.mark.parametrize("kwargs,message", UPDATE_CASES)
def test_update_table_refusals(ddb_raw, table, kwargs, message):
    before = ddb_raw.describe_table(TableName=table)["Table"]
    validation(ddb_raw.update_table, TableName=table, message=message, **kwargs)
    after = ddb_raw.describe_table(TableName=table)["Table"]
    assert after.get("GlobalSecondaryIndexes") == before.get("GlobalSecondaryIndexes")
    assert after.get("StreamSpecification") == before.get("StreamSpecification")
    assert after.get("DeletionProtectionEnabled") == before.get("DeletionProtectionEnabled")


def test_update_table_nothing_to_change(ddb_raw, table):
    validation(ddb_raw.update_table, TableName=table,
               message="At least one of ProvisionedThroughput, BillingMode, UpdateStreamEnabled, GlobalSecondaryIndexUpdates, "
                       "SSESpecification, ReplicaUpdates, MultiAccountReplicaReady, ReplicaTransitRoleArn, MultiRegionConsistency, "
                       "DeletionProtectionEnabled, OnDemandThroughput, WarmThroughput or TableClass is required")


def test_stream_toggles_name_the_table(ddb, ddb_raw, table):
    validation(ddb_raw.update_table, TableName=table, StreamSpecification={"StreamEnabled": False},
               message=f"Table has no stream to disable: TableName: {table}")
    ddb.update_table(TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"})
    validation(ddb_raw.update_table, TableName=table, StreamSpecification={"StreamEnabled": True, "StreamViewType": "KEYS_ONLY"},
               message=f"Table already has an enabled stream: TableName: {table}")


def test_creating_an_existing_index(ddb, ddb_raw, make_table):
    name = make_table(AttributeDefinitions=[attr("pk"), attr("g")],
                      GlobalSecondaryIndexes=[gsi("byg", key("g"))])
    validation(ddb_raw.update_table, TableName=name, AttributeDefinitions=[attr("g")],
               GlobalSecondaryIndexUpdates=[{"Create": gsi("byg", key("g"))}],
               message="Attempting to create an index which already exists")


@pytest.mark.parametrize("arn,message", [
    pytest.param("table/orders", INVALID + "ARNs must start with 'arn:': table/orders", id="not-an-arn"),
    pytest.param("arn:aws:s3:::bucket", INVALID + "Provided Arn is not a DynamoDB resource arn: arn:aws:s3:::bucket",
                 id="other-service"),
])
def test_resource_arn_refusals(ddb_raw, arn, message):
    validation(ddb_raw.list_tags_of_resource, ResourceArn=arn, message=message)


def test_index_arn_is_not_a_tag_resource(ddb, ddb_raw, table):
    arn = ddb.describe_table(TableName=table)["Table"]["TableArn"] + "/index/byg"
    validation(ddb_raw.list_tags_of_resource, ResourceArn=arn,
               message=INVALID + "Invalid resource arn provided, only table or stream is accepted. "
                                 f"Provided resource arn: {arn}")
    validation(ddb_raw.tag_resource, ResourceArn=arn, Tags=[{"Key": "k", "Value": "v"}],
               message=INVALID + "Invalid resource arn provided, only table or stream is accepted. "
                                 f"Provided resource arn: {arn}")


def test_list_backups_time_range(ddb_raw):
    validation(ddb_raw.list_backups, TimeRangeLowerBound=100, TimeRangeUpperBound=50,
               message=INVALID + "Time range lower bound must be less than or equal to upper bound")
