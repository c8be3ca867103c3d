package format

import (
	"errors"
	"fmt"
	"strings"
)

// ErrARN: a malformed backup or table ARN.
var ErrARN = errors.New("malformed ARN")

// Partitions accepted in ARNs.
var Partitions = []string{"aws", "aws-cn", "aws-us-gov"}

// ARN identifies a backup:
// arn:<partition>:dynamodb:<region>:<account>:table/<table>/backup/<id>.
type ARN struct {
	Partition string
	Region    string
	Account   string
	Table     string
	BackupID  string
}

// String formats the backup ARN.
func (a ARN) String() string {
	return a.TableARN() + "/backup/" + a.BackupID
}

// TableARN formats the ARN of the backup's source table.
func (a ARN) TableARN() string {
	return "arn:" + a.Partition + ":dynamodb:" + a.Region + ":" + a.Account + ":table/" + a.Table
}

// Validate checks every component.
func (a ARN) Validate() error {
	if err := checkPartition(a.Partition); err != nil {
		return err
	}
	if err := checkRegion(a.Region); err != nil {
		return err
	}
	if err := checkAccount(a.Account); err != nil {
		return err
	}
	if err := CheckTableName(a.Table); err != nil {
		return err
	}
	if _, _, err := ParseBackupID(a.BackupID); err != nil {
		return fmt.Errorf("%w: %w", ErrARN, err)
	}
	return nil
}

// ParseARN parses a backup ARN. It is the one parser: anything String does
// not produce is refused.
func ParseARN(s string) (ARN, error) {
	rest, ok := strings.CutPrefix(s, "arn:")
	if !ok {
		return ARN{}, fmt.Errorf("%w: %q does not start with %q", ErrARN, s, "arn:")
	}
	parts := strings.SplitN(rest, ":", 5)
	if len(parts) != 5 || parts[1] != "dynamodb" {
		return ARN{}, fmt.Errorf("%w: %q is not a DynamoDB ARN", ErrARN, s)
	}
	res := strings.Split(parts[4], "/")
	if len(res) != 4 || res[0] != "table" || res[2] != "backup" {
		return ARN{}, fmt.Errorf("%w: %q is not a backup ARN (table/<table>/backup/<id>)", ErrARN, s)
	}
	a := ARN{Partition: parts[0], Region: parts[2], Account: parts[3], Table: res[1], BackupID: res[3]}
	if err := a.Validate(); err != nil {
		return ARN{}, fmt.Errorf("%w (in %q)", err, s)
	}
	return a, nil
}

func checkPartition(p string) error {
	for _, q := range Partitions {
		if p == q {
			return nil
		}
	}
	return fmt.Errorf("%w: partition %q is not one of aws, aws-cn, aws-us-gov", ErrARN, p)
}

func checkRegion(r string) error {
	if r == "" || len(r) > 64 {
		return fmt.Errorf("%w: region %q", ErrARN, r)
	}
	for i := 0; i < len(r); i++ {
		c := r[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: region %q", ErrARN, r)
		}
	}
	return nil
}

// checkAccount accepts 1..64 characters of [0-9A-Za-z_-] (AWS account ids
// are 12 digits; extenddb accounts are not restricted further, but an
// account is a key component, so nothing else is allowed).
func checkAccount(a string) error {
	if a == "" || len(a) > 64 {
		return fmt.Errorf("%w: account %q", ErrARN, a)
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return fmt.Errorf("%w: account %q", ErrARN, a)
		}
	}
	return nil
}

// CheckTableName applies DynamoDB's table name rule: 3..255 characters of
// [A-Za-z0-9_.-].
func CheckTableName(t string) error {
	if len(t) < 3 || len(t) > 255 {
		return fmt.Errorf("%w: table name %q must be 3 to 255 characters", ErrARN, t)
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return fmt.Errorf("%w: table name %q", ErrARN, t)
		}
	}
	return nil
}
