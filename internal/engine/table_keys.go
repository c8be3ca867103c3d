package engine

import "strings"

// checkAttributeDefinitions answers CreateTable's ValidationException when
// AttributeDefinitions and the key schemas of the table and its indexes do
// not name exactly the same attributes, or nil. DynamoDB types key
// attributes only, so a definition no key uses is refused as firmly as a
// key without a definition. Its wording depends on which set is larger and
// on whether the request declares indexes:
//
//	more definitions than keys:  "Some AttributeDefinitions are not used"
//	                             (with indexes), the KeySchema count
//	                             message (without)
//	fewer definitions than keys: "Some index key attributes are not
//	                             defined" (with indexes), "Invalid
//	                             KeySchema: Some index key attribute have
//	                             no definition" (without)
//	as many, other names:        "Some index key attributes are not
//	                             defined", naming the undefined keys (with
//	                             indexes) or every key (without)
//
// Lists are written "[a, b]": definitions in request order, keys in the
// order the table's and then each index's key schema name them.
func checkAttributeDefinitions(in *CreateTableInput) error {
	var defined []string
	isDefined := map[string]bool{}
	for _, ad := range in.AttributeDefinitions {
		if isDefined[ad.AttributeName] {
			return validationf("Attribute Name is duplicated: %s", ad.AttributeName)
		}
		isDefined[ad.AttributeName] = true
		defined = append(defined, ad.AttributeName)
	}
	var used []string
	isUsed := map[string]bool{}
	addKeys := func(ks []KeySchemaElement) {
		for _, k := range ks {
			if !isUsed[k.AttributeName] {
				isUsed[k.AttributeName] = true
				used = append(used, k.AttributeName)
			}
		}
	}
	addKeys(in.KeySchema)
	for _, g := range in.GlobalSecondaryIndexes {
		addKeys(g.KeySchema)
	}
	for _, l := range in.LocalSecondaryIndexes {
		addKeys(l.KeySchema)
	}
	var missing []string
	for _, n := range used {
		if !isDefined[n] {
			missing = append(missing, n)
		}
	}
	unused := false
	for _, n := range defined {
		unused = unused || !isUsed[n]
	}
	if len(missing) == 0 && !unused {
		return nil
	}
	indexes := len(in.GlobalSecondaryIndexes) > 0 || len(in.LocalSecondaryIndexes) > 0
	switch {
	case len(defined) > len(used) && indexes:
		return invalidParam("Some AttributeDefinitions are not used. AttributeDefinitions: %s, keys used: %s", nameList(defined), nameList(used))
	case len(defined) > len(used):
		return invalidParam("Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	case len(defined) < len(used) && !indexes:
		return validationf("Invalid KeySchema: Some index key attribute have no definition")
	case len(defined) == len(used) && !indexes:
		missing = used
	}
	return invalidParam("Some index key attributes are not defined in AttributeDefinitions. Keys: %s, AttributeDefinitions: %s", nameList(missing), nameList(defined))
}

// nameList writes names the way DynamoDB's messages list them: "[a, b]".
func nameList(names []string) string { return "[" + strings.Join(names, ", ") + "]" }
