package rules

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// collate returns the form of s under which strings equal in the named
// collation are byte-equal (as far as lockproxy can tell; where it cannot,
// it merges more, never less):
//
//   - "binary", "*_bin": bytes as they are (the _bin collations of text
//     columns still ignore trailing spaces);
//   - "*_cs": case and accents matter: bytes as they are;
//   - anything else ("" for unknown, the "*_ci" collations, "*_ai_*"):
//     compatibility decomposition, accents dropped, case folded, ignorable
//     format characters dropped, æ and œ expanded; general_ci's ß is s,
//     and characters beyond the BMP (which utf8mb4_general_ci and the UCA
//     4.0 collations weigh alike) all become U+FFFD;
//   - PAD SPACE (every collation but "binary" and the *_nopad_* ones, and
//     the unknown one): trailing spaces ignored. charCol trims them always (CHAR
//     columns drop them on storage).
//
// An empty collation means "not known" and is treated as _ci, PAD SPACE.
func collate(collation, s string, charCol bool) string {
	c := strings.ToLower(collation)
	padSpace := c != "binary" && !strings.Contains(c, "_nopad")
	if c == "" || (c != "binary" && !strings.HasSuffix(c, "_bin") && !strings.Contains(c, "_cs")) {
		s = foldCI(s, strings.Contains(c, "general"))
	}
	if padSpace || charCol {
		s = strings.TrimRight(s, " ")
	}
	return s
}

var folder = cases.Fold()

// foldCI maps s to a case- and accent-insensitive form.
func foldCI(s string, general bool) string {
	if isPlainLower(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range norm.NFKD.String(toValidUTF8(s)) {
		switch {
		case unicode.Is(unicode.Mn, r), unicode.Is(unicode.Cf, r):
			continue // accents, zero-width and other ignorables
		case r > 0xFFFF:
			r = utf8.RuneError
		case r == 'ß' && general, r == 'ẞ' && general:
			r = 's'
		case r == 'æ' || r == 'Æ':
			b.WriteString("ae")
			continue
		case r == 'œ' || r == 'Œ':
			b.WriteString("oe")
			continue
		}
		b.WriteRune(r)
	}
	return folder.String(b.String())
}

// isPlainLower reports whether s is printable ASCII without upper case
// letters: the common case, which folding leaves unchanged.
func isPlainLower(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || (c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// toValidUTF8 replaces invalid bytes by U+FFFD (merging distinct invalid
// byte strings, which only ever merges keys).
func toValidUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
