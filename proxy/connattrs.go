package proxy

import (
	"sort"
	"strings"
)

// Connection attributes. A client's attributes (CLIENT_CONNECT_ATTRS:
// program_name, _client_name, _pid ...) are forwarded to its backend
// connections, where MariaDB shows them in
// performance_schema.session_connect_attrs, with lockproxy's own added:
// proxy_name=lockproxy, and program_name=lockproxy when the client gave
// none. A pooled backend connection carries the attributes it was opened
// with, so it is reused only by sessions whose client sent the same ones
// (poolKey.attrs).

// connAttrs are a client's connection attributes, encoded canonically
// (sorted by name, each name and value NUL-terminated) so that equal sets
// compare equal in a poolKey. "" is none.
type connAttrs string

// maxConnAttrs bounds how many attributes are kept; MariaDB's own bound
// is the size of the handshake packet.
const maxConnAttrs = 128

// parseConnAttrs decodes the attributes at the end of a handshake
// response: a length-encoded total, then length-encoded names and values.
// What does not decode is dropped: attributes never fail a login.
func parseConnAttrs(p []byte) connAttrs {
	total, pos, _, err := readLenEncInt(p, 0)
	if err != nil || total > uint64(len(p)-pos) {
		return ""
	}
	p = p[pos : pos+int(total)]
	m := map[string]string{}
	for pos = 0; pos < len(p) && len(m) < maxConnAttrs; {
		k, next, err := readLenEncBytes(p, pos)
		if err != nil {
			break
		}
		v, next, err := readLenEncBytes(p, next)
		if err != nil {
			break
		}
		m[string(k)], pos = string(v), next
	}
	return encodeConnAttrs(m)
}

func encodeConnAttrs(m map[string]string) connAttrs {
	names := make([]string, 0, len(m))
	for k := range m {
		if !strings.ContainsRune(k, 0) && !strings.ContainsRune(m[k], 0) {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, k := range names {
		b.WriteString(k + "\x00" + m[k] + "\x00")
	}
	return connAttrs(b.String())
}

// backend returns the attributes a backend connection opened for a
// client with a is given: a's, with lockproxy's own.
func (a connAttrs) backend() map[string]string {
	m := map[string]string{}
	parts := strings.Split(string(a), "\x00")
	for i := 0; i+1 < len(parts); i += 2 {
		m[parts[i]] = parts[i+1]
	}
	if _, ok := m["program_name"]; !ok {
		m["program_name"] = "lockproxy"
	}
	m["proxy_name"] = "lockproxy"
	return m
}
