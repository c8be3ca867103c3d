package engine

// checkUpdateConcerns refuses an UpdateTable request that combines changes
// DynamoDB makes one at a time. Server-side encryption, table class and
// deletion protection must each be the only change of their request
// (checked in that order, so the message names the first); a stream
// toggle or an index creation or deletion cannot ride along with a
// throughput change, and an index cannot be created or deleted while the
// stream is toggled. Billing mode with throughput, with index throughput
// updates, or a switch to PAY_PER_REQUEST with a stream toggle, are one
// change.
func checkUpdateConcerns(in *UpdateTableInput) error {
	present := 0
	for _, p := range []bool{in.BillingMode != "", in.ProvisionedThroughput != nil, len(in.GlobalSecondaryIndexUpdates) > 0,
		in.StreamSpecification != nil, in.SSESpecification != nil, in.TableClass != "", in.DeletionProtectionEnabled != nil} {
		if p {
			present++
		}
	}
	switch {
	case in.SSESpecification != nil && present > 1:
		return invalidParam("Server-Side Encryption modification must be the only operation in the request")
	case in.TableClass != "" && present > 1:
		return invalidParam("TableClass modification must be the only operation in the request")
	case in.DeletionProtectionEnabled != nil && present > 1:
		return invalidParam("DeletionProtection modification must be the only operation in the request")
	}
	iops := in.ProvisionedThroughput != nil || in.BillingMode == "PROVISIONED"
	indexes := false
	for _, u := range in.GlobalSecondaryIndexUpdates {
		indexes = indexes || u.Create != nil || u.Delete != nil
	}
	switch {
	case in.StreamSpecification != nil && iops:
		return invalidParam("You cannot modify stream status while updating table IOPS")
	case indexes && iops:
		return invalidParam("You cannot create or delete index while updating table IOPS")
	case indexes && in.StreamSpecification != nil:
		return invalidParam("You cannot create or delete index while changing stream status")
	}
	return nil
}

// checkSSE checks an SSESpecification of CreateTable or UpdateTable and
// tells whether it turns KMS encryption on: Enabled true, or SSEType KMS
// without Enabled. An empty specification, or Enabled false, leaves the
// table on the default encryption.
func checkSSE(s *SSESpecification) (bool, error) {
	if s == nil {
		return false, nil
	}
	if s.Enabled != nil && !*s.Enabled {
		switch {
		case s.SSEType != "":
			return false, invalidParam("SSEType can not be specified if Enabled is false")
		case s.KMSMasterKeyId != "":
			return false, invalidParam("KMSMasterKeyId can not be specified if Enabled is false")
		}
		return false, nil
	}
	switch {
	case s.SSEType == "AES256":
		return false, invalidParam("SSEType AES256 is not supported")
	case s.KMSMasterKeyId != "" && s.SSEType != "KMS":
		return false, invalidParam("SSEType KMS is required if KMSMasterKeyId is specified")
	}
	return (s.Enabled != nil && *s.Enabled) || s.SSEType == "KMS", nil
}
