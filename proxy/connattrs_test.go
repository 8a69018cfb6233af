package proxy

import (
	"fmt"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"
)

// TestConnAttrsForwarded: the attributes a client sends reach MariaDB
// through lockproxy as they do directly (performance_schema shows them
// alike), with lockproxy's own added; a client that sends none shows
// lockproxy's.
func TestConnAttrsForwarded(t *testing.T) {
	bed := testbed.PrivateWith(t, testbed.Options{PerformanceSchema: true})
	p := startProxyOn(t, bed, nil, nil)
	const q = "SELECT ATTR_NAME, ATTR_VALUE FROM performance_schema.session_connect_attrs " +
		"WHERE PROCESSLIST_ID = (SELECT PROCESSLIST_ID FROM performance_schema.session_connect_attrs " +
		"WHERE ATTR_NAME = 'conn_tag' AND ATTR_VALUE = '%s')"
	shown := func(addr, tag string, attrs map[string]string) map[string]string {
		t.Helper()
		c, err := client.Connect(addr, bed.User, bed.Password, "", func(c *client.Conn) error {
			if attrs != nil {
				m := map[string]string{"conn_tag": tag}
				for k, v := range attrs {
					m[k] = v
				}
				c.SetAttributes(m)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if attrs == nil {
			// No attributes to find the connection by: its own id.
			r, err := c.Execute("SELECT ATTR_NAME, ATTR_VALUE FROM performance_schema.session_connect_attrs " +
				"WHERE PROCESSLIST_ID = (SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT ATTR_NAME%')")
			if err != nil {
				t.Fatal(err)
			}
			return rowsMap(t, r.Values)
		}
		r, err := c.Execute(fmt.Sprintf(q, tag))
		if err != nil {
			t.Fatal(err)
		}
		return rowsMap(t, r.Values)
	}
	attrs := map[string]string{"program_name": "shopd", "_client_name": "libshop", "_pid": "4242", "empty": ""}
	direct := shown(bed.PrimaryAddr, "direct", attrs)
	proxied := shown(p.addr, "proxied", attrs)
	if direct["program_name"] != "shopd" || direct["_pid"] != "4242" {
		t.Fatalf("directly MariaDB shows %v", direct)
	}
	for k, v := range direct {
		if k == "conn_tag" {
			continue
		}
		if got, ok := proxied[k]; !ok || got != v {
			t.Errorf("attribute %s: %q directly, %q (shown %v) through lockproxy", k, v, got, ok)
		}
	}
	if proxied["proxy_name"] != "lockproxy" || len(proxied) != len(direct)+1 {
		t.Errorf("through lockproxy MariaDB shows %v, want the client's and proxy_name=lockproxy", proxied)
	}
	none := shown(p.addr, "", nil)
	if none["program_name"] != "lockproxy" || none["proxy_name"] != "lockproxy" {
		t.Errorf("a client without attributes: MariaDB shows %v", none)
	}
}

func rowsMap(t *testing.T, rows [][]mysql.FieldValue) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, r := range rows {
		m[string(r[0].AsString())] = string(r[1].AsString())
	}
	return m
}

// FuzzHandshakeResponse: any handshake response, connection attributes
// included, decodes or is refused, never panics; attributes decode to a
// canonical set that encodes to itself.
func FuzzHandshakeResponse(f *testing.F) {
	attrs := []byte{0x0b, 3, 'a', 'b', 'c', 1, 'x', 4, '_', 'p', 'i', 'd'}
	base := make([]byte, 32)
	base[0], base[1], base[2], base[3] = 0x0d, 0xa2, 0x1a, 0x00 // PROTOCOL_41, SECURE, PLUGIN_AUTH, CONNECT_ATTRS
	ok := append(append(append([]byte(nil), base...), "app\x00\x00mysql_native_password\x00"...), attrs...)
	f.Add(ok)
	f.Add(attrs)
	f.Fuzz(func(t *testing.T, p []byte) {
		_, _ = parseHandshakeResponse(p)
		a := parseConnAttrs(p)
		if got := encodeConnAttrs(a.backend()); len(a) > 0 && len(got) < len(a) {
			t.Fatalf("attributes %q lost on the way to the backend: %q", a, got)
		}
	})
}
