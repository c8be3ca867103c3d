package partiql

import (
	"strings"

	"github.com/extenddb/extenddb/internal/attr"
)

type tokKind uint8

const (
	tEOF     tokKind = iota
	tIdent           // a bare identifier or keyword
	tQIdent          // "a quoted identifier"
	tString          // 'a string'
	tNumber          // 12, -3.5, 1e10 (the sign is an operator)
	tParam           // ?
	tPunct           // ( ) [ ] { } , . * = <> != < <= > >= << >> + - : ;
	tInvalid         // a character that starts no token
)

type token struct {
	kind tokKind
	text string // identifier (unquoted, unescaped), string contents, number text or punctuation
	pos  int
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isIdentPart(c byte) bool { return isIdentStart(c) || isDigit(c) }

// lex splits src into tokens in one pass. An unterminated quote is a
// syntax error.
func lex(src string) ([]token, error) {
	toks := make([]token, 0, len(src)/3+2)
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case c == '-' && i+1 < len(src) && src[i+1] == '-':
			// A line comment.
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			j := i + 1
			for j < len(src) && isIdentPart(src[j]) {
				j++
			}
			toks = append(toks, token{kind: tIdent, text: src[i:j], pos: i})
			i = j
		case isDigit(c) || c == '.' && i+1 < len(src) && isDigit(src[i+1]):
			j := i
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			if j < len(src) && src[j] == '.' {
				j++
				for j < len(src) && isDigit(src[j]) {
					j++
				}
			}
			if j < len(src) && (src[j] == 'e' || src[j] == 'E') {
				k := j + 1
				if k < len(src) && (src[k] == '+' || src[k] == '-') {
					k++
				}
				if k < len(src) && isDigit(src[k]) {
					for k < len(src) && isDigit(src[k]) {
						k++
					}
					j = k
				}
			}
			toks = append(toks, token{kind: tNumber, text: src[i:j], pos: i})
			i = j
		case c == '\'' || c == '"':
			s, j, ok := quoted(src, i)
			if !ok {
				what := "string"
				if c == '"' {
					what = "quoted identifier"
				}
				return nil, malformed("unterminated " + what + " at position " + itoa(i))
			}
			k := tString
			if c == '"' {
				k = tQIdent
			}
			toks = append(toks, token{kind: k, text: s, pos: i})
			i = j
		case c == '?':
			toks = append(toks, token{kind: tParam, text: "?", pos: i})
			i++
		default:
			n := punctLen(src, i)
			if n == 0 {
				toks = append(toks, token{kind: tInvalid, text: src[i : i+1], pos: i})
				i++
				continue
			}
			toks = append(toks, token{kind: tPunct, text: src[i : i+n], pos: i})
			i += n
		}
	}
	return append(toks, token{kind: tEOF, pos: len(src)}), nil
}

// quoted reads the quoted text starting at src[i] (a doubled quote stands
// for itself) and returns it with the index after the closing quote.
func quoted(src string, i int) (string, int, bool) {
	q := src[i]
	var b strings.Builder
	j := i + 1
	start := j
	for j < len(src) {
		if src[j] == q {
			if j+1 < len(src) && src[j+1] == q {
				b.WriteString(src[start : j+1])
				j += 2
				start = j
				continue
			}
			b.WriteString(src[start:j])
			return b.String(), j + 1, true
		}
		j++
	}
	return "", j, false
}

func punctLen(src string, i int) int {
	if i+1 < len(src) {
		switch src[i : i+2] {
		case "<>", "!=", "<=", ">=", "<<", ">>":
			return 2
		}
	}
	switch src[i] {
	case '(', ')', '[', ']', '{', '}', ',', '.', '*', '=', '<', '>', '+', '-', ':', ';':
		return 1
	}
	return 0
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	return string(b[i:])
}

// malformed is DynamoDB's ValidationException for a statement that does
// not parse, with what went wrong.
func malformed(detail string) error {
	return attr.Validation("Statement wasn't well formed, can't be processed: " + detail)
}

// keywords cannot be used as bare identifiers (quote them instead).
var keywords = map[string]bool{}

func init() {
	for _, k := range strings.Fields(`SELECT FROM WHERE AND OR NOT BETWEEN IN IS MISSING NULL TRUE FALSE
		INSERT INTO VALUE VALUES UPDATE SET REMOVE DELETE RETURNING ORDER BY ASC DESC EXISTS
		LIMIT OFFSET GROUP HAVING JOIN UNION AS AT DISTINCT CASE WHEN THEN ELSE END`) {
		keywords[k] = true
	}
}

func isKeyword(t token, kw string) bool {
	return t.kind == tIdent && len(t.text) == len(kw) && strings.EqualFold(t.text, kw)
}
