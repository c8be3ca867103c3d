// Package sqlutil holds what the SQL backends (SQLite, PostgreSQL) share
// below the storage contract: the planning of a Query or Scan page into
// one ordered range read, the cursor seek rules, and the row buffers that
// assemble a page's rows in one allocation. No other backend uses it, so
// it is not part of the contract package.
package sqlutil
