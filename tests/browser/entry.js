// Bundled by esbuild into sdk.bundle.js (an IIFE that sets window.ExtenddbSDK):
// the AWS SDK for JavaScript v3 as a web page would ship it.
import { DynamoDBClient, ListTablesCommand, CreateTableCommand, ExecuteStatementCommand, waitUntilTableExists } from "@aws-sdk/client-dynamodb";
import { DynamoDBDocumentClient, PutCommand, GetCommand, ExecuteStatementCommand as DocExecuteStatementCommand } from "@aws-sdk/lib-dynamodb";

export { DynamoDBClient, ListTablesCommand, CreateTableCommand, ExecuteStatementCommand, waitUntilTableExists, DynamoDBDocumentClient, PutCommand, GetCommand, DocExecuteStatementCommand };
