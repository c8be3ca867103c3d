package api

import (
	"net/http"
	"strings"
)

// dynamoOperations lists the operations of DynamoDB's 2012-08-10 API, so
// that a request for one extenddb does not serve is told so by name.
var dynamoOperations = map[string]bool{}

func init() {
	for _, op := range strings.Fields(`BatchExecuteStatement BatchGetItem BatchWriteItem CreateBackup
		CreateGlobalTable CreateTable DeleteBackup DeleteItem DeleteResourcePolicy DeleteTable
		DescribeBackup DescribeContinuousBackups DescribeContributorInsights DescribeEndpoints
		DescribeExport DescribeGlobalTable DescribeGlobalTableSettings DescribeImport
		DescribeKinesisStreamingDestination DescribeLimits DescribeTable DescribeTableReplicaAutoScaling
		DescribeTimeToLive DisableKinesisStreamingDestination EnableKinesisStreamingDestination
		ExecuteStatement ExecuteTransaction ExportTableToPointInTime GetItem GetResourcePolicy
		ImportTable ListBackups ListContributorInsights ListExports ListGlobalTables ListImports
		ListTables ListTagsOfResource PutItem PutResourcePolicy Query RestoreTableFromBackup
		RestoreTableToPointInTime Scan TagResource TransactGetItems TransactWriteItems UntagResource
		UpdateContinuousBackups UpdateContributorInsights UpdateGlobalTable UpdateGlobalTableSettings
		UpdateItem UpdateKinesisStreamingDestination UpdateTable UpdateTableReplicaAutoScaling
		UpdateTimeToLive`) {
		dynamoOperations[op] = true
	}
}

// unknownOperationMessage says which operation was asked for and why
// extenddb does not serve it. DynamoDB's own text for an unknown
// operation, "An unknown operation was requested.", is the model; the
// detail after it names the operation.
func unknownOperationMessage(method, target string) string {
	const lead = "An unknown operation was requested"
	shown := target
	if len(shown) > 128 {
		shown = shown[:128] + "..."
	}
	shown = strings.ToValidUTF8(shown, "?")
	switch {
	case method != http.MethodPost && target != "":
		return lead + ": DynamoDB operations are sent with POST, not " + method
	case target == "":
		return lead + ": the request has no X-Amz-Target header naming a DynamoDB operation"
	case strings.HasPrefix(target, streamsTargetPrefix):
		return lead + ": extenddb does not support the DynamoDB Streams operation " + strings.TrimPrefix(shown, streamsTargetPrefix)
	case !strings.HasPrefix(target, targetPrefix):
		return lead + ": X-Amz-Target '" + shown + "' is not an operation of " +
			strings.TrimSuffix(targetPrefix, ".") + ", the DynamoDB API version extenddb supports"
	}
	op := strings.TrimPrefix(shown, targetPrefix)
	if dynamoOperations[op] {
		return lead + ": " + op + " is a DynamoDB operation that extenddb does not support"
	}
	return lead + ": extenddb does not support the operation " + op + " (operation names are case-sensitive)"
}
