package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestBackupsUnavailable: a server whose backend cannot take backups
// (e.g. Cassandra, without the snapshot capability) answers every backup
// operation with a ValidationException that names the reason, never a
// 5xx or the "configure a backup store" hint.
func TestBackupsUnavailable(t *testing.T) {
	e := newEngine(t)
	e.SetBackupsUnavailable("the cassandra backend cannot read a table as of one instant (no snapshot capability)")
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		var ee *Error
		if !errors.As(err, &ee) || ee.Code != CodeValidation {
			t.Fatalf("%s: want ValidationException, got %v", op, err)
		}
		if !strings.Contains(ee.Message, "cassandra backend") || !strings.Contains(ee.Message, "snapshot") {
			t.Fatalf("%s: message does not name the reason: %q", op, ee.Message)
		}
	}
	_, err := e.CreateBackup(ctx, "000000000000", &CreateBackupInput{TableName: ptr("t"), BackupName: ptr("backup1")})
	check("CreateBackup", err)
	_, err = e.ListBackups(ctx, "000000000000", &ListBackupsInput{})
	check("ListBackups", err)
	_, err = e.DescribeBackup(ctx, "000000000000", &BackupArnInput{BackupArn: ptr("arn:aws:dynamodb:us-east-1:000000000000:table/t/backup/01234567890123-abcdefgh")})
	check("DescribeBackup", err)
}
