package engine

import "strings"

// param is one request parameter and whether the request set it.
type param struct {
	name string
	set  bool
}

func setNames(ps []param) []string {
	var out []string
	for _, p := range ps {
		if p.set {
			out = append(out, p.name)
		}
	}
	return out
}

// checkExprParams applies DynamoDB's rules on mixing expression parameters
// (exprs) with their legacy counterparts (legacy) in one request, and on
// placeholder maps without expressions. Parameters are listed in the order
// the service names them in its messages.
//
//   - Any legacy parameter beside any expression parameter is refused,
//     naming both sets, except KeyConditions, which may be used with a
//     FilterExpression or ProjectionExpression as long as no
//     KeyConditionExpression is given.
//   - ExpressionAttributeNames needs some expression.
//   - ExpressionAttributeValues needs an expression other than
//     ProjectionExpression (which takes no values).
func checkExprParams(exprs, legacy []param, names, values bool) error {
	usedExpr := setNames(exprs)
	if len(usedExpr) > 0 {
		keyCondExpr := false
		for _, p := range exprs {
			if p.name == "KeyConditionExpression" && p.set {
				keyCondExpr = true
			}
		}
		var usedLegacy []string
		for _, p := range legacy {
			if p.set && (p.name != "KeyConditions" || keyCondExpr) {
				usedLegacy = append(usedLegacy, p.name)
			}
		}
		if len(usedLegacy) > 0 {
			return validationf("Can not use both expression and non-expression parameters in the same request: Non-expression parameters: {%s} Expression parameters: {%s}",
				strings.Join(usedLegacy, ", "), strings.Join(usedExpr, ", "))
		}
	}
	if names && len(usedExpr) == 0 {
		return validationf("ExpressionAttributeNames can only be specified when using expressions")
	}
	if values {
		var valueExprs []string
		used := false
		for _, p := range exprs {
			if p.name == "ProjectionExpression" {
				continue
			}
			valueExprs = append(valueExprs, p.name)
			used = used || p.set
		}
		if len(valueExprs) > 0 && !used {
			verb := "is"
			if len(valueExprs) > 1 {
				verb = "are"
			}
			return validationf("ExpressionAttributeValues can only be specified when using expressions: %s %s null",
				strings.Join(valueExprs, " and "), verb)
		}
	}
	return nil
}
