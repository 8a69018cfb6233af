package proxy

import (
	"strings"
	"testing"
)

func TestIsShowProcesslist(t *testing.T) {
	for q, want := range map[string]bool{
		"SHOW PROCESSLIST":                           true,
		"show full processlist":                      true,
		" Show\tFull\nProcessList ;":                 true,
		"SHOW PROCESSLIST;":                          true,
		"SHOW PROCESSLISTS":                          false,
		"SHOW FULL PROCESSLIST x":                    false,
		"SELECT * FROM processlist":                  false,
		"UPDATE t SET a = 1 WHERE id = 1":            false,
		"SHOW PROCESSLIST" + strings.Repeat(" ", 60): false, // past 64 bytes
		"SHOW PROCESSL\u0130ST":                      false, // MariaDB reads no PROCESSLIST here
	} {
		if got := isShowProcesslist([]byte(q)); got != want {
			t.Errorf("isShowProcesslist(%q) = %v, want %v", q, got, want)
		}
	}
}

func TestContainsFolded(t *testing.T) {
	for _, tc := range []struct {
		q    string
		want bool
	}{
		{"SET SQL_MODE = ''", true}, {"set @@session.sql_mode=''", true}, {"sql_mod", false},
		{"SQL-MODE", false}, {"", false}, {"xsql_modex", true},
	} {
		if got := containsFolded(tc.q, "sql_mode"); got != tc.want {
			t.Errorf("containsFolded(%q) = %v, want %v", tc.q, got, tc.want)
		}
		if got := containsFolded([]byte(tc.q), "sql_mode"); got != tc.want {
			t.Errorf("containsFolded([]byte(%q)) = %v, want %v", tc.q, got, tc.want)
		}
	}
}
