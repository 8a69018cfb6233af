package rules

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// ErrBadKey is returned by DecodeKey for a string EncodeKey cannot have
// produced.
var ErrBadKey = errors.New("rules: malformed lock key")

// EncodeKey names one row as a lock key: "schema.table/v1/v2...", each
// part escaped so that the result is unambiguous whatever bytes the values
// hold (separators, quotes, NUL, invalid UTF-8) and stays printable ASCII
// for /debug/locks: bytes outside '!'..'~', and '%' and '/' (and '.' in
// schema and table) become %XX with upper-case hex. Every part is escaped
// by an injective map that never emits an unescaped separator, so splitting
// on the separators recovers the parts exactly: no two different rows share
// a key and DecodeKey inverts EncodeKey (FuzzEncodeKey checks both).
//
// values are the normalised key column values (see Normalize), in the
// rule's key column order. The rule's name is not part of the key: a row is
// one lock whichever rule guards it, so two rules on one table exclude each
// other. schema and table should be lowercased by the caller (Match does).
func EncodeKey(schema, table string, values [][]byte) string {
	n := len(schema) + len(table) + 1
	for _, v := range values {
		n += len(v) + 1
	}
	var b strings.Builder
	b.Grow(n + n/4)
	escapeTo(&b, schema, true)
	b.WriteByte('.')
	escapeTo(&b, table, true)
	for _, v := range values {
		b.WriteByte('/')
		escapeTo(&b, string(v), false)
	}
	return b.String()
}

const hexDigits = "0123456789ABCDEF"

func mustEscape(c byte, ident bool) bool {
	return c <= ' ' || c > '~' || c == '%' || c == '/' || (ident && c == '.')
}

func escapeTo(b *strings.Builder, s string, ident bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if mustEscape(c, ident) {
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
			continue
		}
		b.WriteByte(c)
	}
}

// DecodeKey splits a key made by EncodeKey back into its parts. It accepts
// exactly the strings EncodeKey produces (canonical escapes only).
func DecodeKey(key string) (schema, table string, values [][]byte, err error) {
	parts := strings.Split(key, "/")
	ident := strings.Split(parts[0], ".")
	if len(ident) != 2 {
		return "", "", nil, ErrBadKey
	}
	s, err := unescape(ident[0], true)
	if err != nil {
		return "", "", nil, err
	}
	t, err := unescape(ident[1], true)
	if err != nil {
		return "", "", nil, err
	}
	for _, p := range parts[1:] {
		v, err := unescape(p, false)
		if err != nil {
			return "", "", nil, err
		}
		values = append(values, []byte(v))
	}
	return s, t, values, nil
}

func unescape(s string, ident bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' {
			if mustEscape(c, ident) {
				return "", ErrBadKey
			}
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", ErrBadKey
		}
		hi, lo := strings.IndexByte(hexDigits, s[i+1]), strings.IndexByte(hexDigits, s[i+2])
		if hi < 0 || lo < 0 {
			return "", ErrBadKey
		}
		d := byte(hi<<4 | lo)
		if !mustEscape(d, ident) {
			return "", ErrBadKey // not canonical
		}
		b.WriteByte(d)
		i += 2
	}
	return b.String(), nil
}

// HideValue is what a normalised value of a sensitive column becomes in
// a lock key: "sha256:" and the base64url (unpadded) SHA-256 of the value.
// Every instance computes the same, so the row is still one lock; the
// value itself appears nowhere lockproxy writes. A low-entropy value (a
// phone number, a PIN) can be found again by hashing every candidate:
// treat lock keys of such columns as pseudonymous, not secret.
func HideValue(v []byte) []byte {
	sum := sha256.Sum256(v)
	out := make([]byte, 0, 7+base64.RawURLEncoding.EncodedLen(len(sum)))
	out = append(out, "sha256:"...)
	return base64.RawURLEncoding.AppendEncode(out, sum[:])
}
