package rules

import (
	"fmt"
	"strings"
)

// expandEnv replaces ${NAME} and ${NAME:-default} in s. A variable that is
// set (even to "") expands to its value; ${NAME:-default} also uses the
// default when NAME is set but empty, as the shell does. "$$" stands for a
// literal "$". Any other "${" is an error, so a typo never passes silently.
func expandEnv(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
			continue
		case '{':
		default:
			b.WriteByte(c)
			i++
			continue
		}
		end := strings.IndexByte(s[i+2:], '}')
		if end < 0 {
			return "", fmt.Errorf("unterminated ${ in %q", s)
		}
		ref := s[i+2 : i+2+end]
		val, err := lookupRef(ref, lookup)
		if err != nil {
			return "", err
		}
		b.WriteString(val)
		i += end + 3
	}
	return b.String(), nil
}

func lookupRef(ref string, lookup func(string) (string, bool)) (string, error) {
	name, def, hasDef := strings.Cut(ref, ":-")
	if !validVarName(name) {
		return "", fmt.Errorf("bad variable reference ${%s}: want ${NAME} or ${NAME:-default}", ref)
	}
	val, set := lookup(name)
	if hasDef && val == "" {
		return def, nil
	}
	if !set {
		return "", fmt.Errorf("environment variable ${%s} is not set (set it or write ${%s:-default})", name, name)
	}
	return val, nil
}

func validVarName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
