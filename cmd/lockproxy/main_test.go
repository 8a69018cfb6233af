package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const goodConfig = `
users:
  - user: app
    password: secret
backends:
  primary: 127.0.0.1:3306
  replicas: [127.0.0.1:3316]
locks:
  backend: memory
rules:
  - name: sku-stock
    table: shop.sku_stock
    key: [sku_id]
    rewrite: {column: stock, mode: delta, min: 0}
`

func TestCLI(t *testing.T) {
	good := writeConfig(t, goodConfig)
	bad := writeConfig(t, "users: []\nbackends: {}\nbogus: 1\nrules:\n  - name: r\n    table: t\n    key: []\n")
	cases := []struct {
		name     string
		args     []string
		code     int
		out, err []string // substrings that must appear
		notOut   []string
	}{
		{"version", []string{"--version"}, 0, []string{"lockproxy "}, nil, nil},
		{"check ok", []string{"--check", "--config", good}, 0, []string{"ok"}, nil, []string{"secret"}},
		{"check reports every problem with its line", []string{"--check", "--config", bad}, 1, nil,
			[]string{"lockproxy: ", "rules.yaml:3", "bogus", "rules.yaml:7", "key", "primary"}, nil},
		{"check of a missing file is a lockproxy error", []string{"--check", "--config", "/nonexistent/rules.yaml"}, 1, nil,
			[]string{"lockproxy: rules: open /nonexistent/rules.yaml"}, nil},
		{"explain of a missing file is a lockproxy error", []string{"explain", "--config", "/nonexistent/rules.yaml", "SELECT 1"}, 1, nil,
			[]string{"lockproxy: rules: open"}, nil},
		{"explain keyed update", []string{"explain", "--config", good, "--db", "shop",
			"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id IN (7, '8')"}, 0,
			[]string{"rule:       sku-stock", "shop.sku_stock/7", "shop.sku_stock/8", "route:      primary"}, nil, nil},
		{"explain plain read goes to a replica", []string{"explain", "--config", good, "SELECT stock FROM shop.sku_stock WHERE sku_id = 7"}, 0,
			[]string{"locks:      none", "route:      replica"}, nil, nil},
		{"explain read in a transaction locks", []string{"explain", "--config", good, "--in-txn", "SELECT stock FROM shop.sku_stock WHERE sku_id = 7"}, 0,
			[]string{"shop.sku_stock/7", "route:      primary"}, nil, nil},
		{"explain unkeyed write is rejected", []string{"explain", "--config", good, "DELETE FROM shop.sku_stock"}, 0,
			[]string{"rejected:   ERROR 1105", "lockproxy: rule sku-stock"}, nil, nil},
		{"explain FOR UPDATE", []string{"explain", "--config", good, "SELECT * FROM shop.sku_stock WHERE sku_id = ? FOR UPDATE"}, 0,
			[]string{"from the parameters", "route:      primary (locking read)"}, nil, nil},
		{"explain rewrite delta", []string{"explain", "--config", good, "--db", "shop", "--old", "17",
			"UPDATE sku_stock SET stock = 16 WHERE sku_id = 7"}, 0,
			[]string{"rewritten:  UPDATE `sku_stock` SET `stock`=`stock` - 1 WHERE (`sku_id` = 7) AND `stock` - 1 >= 0"}, nil, nil},
		{"explain rewrite needs a read", []string{"explain", "--config", good, "--db", "shop",
			"UPDATE sku_stock SET stock = 16 WHERE sku_id = 7"}, 0, []string{"rewritten:  no (nothing remembered)"}, nil, nil},
		{"explain needs SQL", []string{"explain", "--config", good}, 2, nil, []string{"usage"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(c.args, &out, &errb)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out.String(), errb.String())
			}
			for _, s := range c.out {
				if !strings.Contains(out.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, out.String())
				}
			}
			for _, s := range c.err {
				if !strings.Contains(errb.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, errb.String())
				}
			}
			for _, s := range c.notOut {
				if strings.Contains(out.String()+errb.String(), s) {
					t.Errorf("output shows %q", s)
				}
			}
		})
	}
}
