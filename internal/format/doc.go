// Package format is the on-store format of extenddb backups (it writes
// version FormatVersion and reads every version up to it), as specified
// in docs/backup-design.md section 1: zstd line-delimited DynamoDB-JSON
// data files, the extenddb manifest, its sha256sum-form sidecar, the AWS
// export manifests (manifest-summary.json, manifest-files.json), backup ids,
// ARNs and object key names.
//
// The package is standalone: bytes in and out through io.Reader/io.Writer
// shaped interfaces (FileSink for writing, FileSource for reading), no
// store, no database. It imports only internal/attr, the standard library
// and klauspost/compress.
//
// # Writing
//
// NewWriter takes a FileSink and a WriterConfig. Items go in either as
// canonical attribute-map bytes plus their key (Writer.Append, the fast
// path: the storage layer already holds canonical bytes) or as attr.Item
// (Writer.AppendItem). Data files are closed on an item boundary at
// WriterConfig.TargetFileBytes uncompressed bytes and handed to the sink as
// they close. Writer.Finish writes manifest-files.json,
// manifest-summary.json, extenddb-manifest.json and, last, the sidecar.
//
// # Reading
//
// Open reads and checks the sidecar and the manifest (hash, version gate,
// ARN and prefix consistency, totals). Backup.Verify then checks every data
// file completely (presence and size, sha256, md5, item count, uncompressed
// size, line cap, line shape, key order and key ranges) before the caller
// writes anything; Backup.Items streams the items, verifying each file as it
// goes. Every failure is a *FileError naming the object and wrapping one of
// the Err* sentinels, so callers test with errors.Is.
//
// # Key order
//
// Order is (partition key bytes, sort key bytes) compared bytewise, where
// the bytes are attr.KeyBytes of the normalized values: the same encoding
// every storage backend uses.
package format
