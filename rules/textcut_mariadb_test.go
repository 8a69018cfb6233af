package rules

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/parser"
)

// TestTextKeysCut stores values longer than their CHAR or VARCHAR column
// under an empty sql_mode, where MariaDB keeps their first characters,
// and wants the row stored to have the key lockproxy gives the statement:
// printable ASCII (keyed in process) and other characters (keyed by the
// primary), in utf8mb4 and latin1 columns of several collations, PAD
// SPACE and NO PAD, from utf8mb4 and latin1 clients.
func TestTextKeysCut(t *testing.T) {
	bed := testbed.Get(t)
	dbName := bed.TempDatabase(t)
	db := bed.Open(t, bed.PrimaryAddr, dbName)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tables := map[string]string{
		"vu": "VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
		"vn": "VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
		"va": "VARCHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_uca1400_ai_ci",
		"vl": "VARCHAR(6) CHARACTER SET latin1 COLLATE latin1_german2_ci",
		"cu": "CHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_general_ci",
		"cl": "CHAR(6) CHARACTER SET latin1 COLLATE latin1_swedish_ci",
		"cn": "CHAR(6) CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin",
	}
	var ruleList strings.Builder
	for name, typ := range tables {
		if _, err := db.ExecContext(ctx, "CREATE TABLE "+name+" (k "+typ+" PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		ruleList.WriteString("  - {name: " + name + ", table: " + dbName + "." + name + ", key: [k]}\n")
	}
	cfg, err := load("cut.yaml", []byte("users: [{user: a}]\nbackends: {primary: 127.0.0.1:1}\nrules:\n"+ruleList.String()), testEnv, "")
	if err != nil {
		t.Fatal(err)
	}
	schema, problems, err := LoadSchema(ctx, db, cfg)
	if err != nil || len(problems) > 0 {
		t.Fatalf("LoadSchema: %v %v", err, problems)
	}
	schema = schema.WithTextServer(NewTextServer(db))
	values := []string{"abcdefgh", "abcde  x", "abcdef   ", "ABCDE fg", "abc   xyz", "josé müller", "äöüßäöüß", "ééééé  é", "abcde\u0301f", "١٠٠١٠٠١٠", "aaaaa ä", "      x"}
	keyed := 0
	for _, client := range []string{"utf8mb4", "latin1"} {
		conn, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range []string{"SET sql_mode = ''", "SET NAMES " + client} {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		for name := range tables {
			col := schema.Table(dbName, name).Column("k")
			for _, s := range values {
				sent := s
				if client == "latin1" {
					var ok bool
					if sent, ok = latin1Bytes(s); !ok {
						continue
					}
				}
				if cutKeyAgrees(t, ctx, conn, col, name, client, sent) {
					keyed++
				}
			}
		}
		conn.Close()
	}
	if keyed < 80 {
		t.Errorf("only %d values cut and keyed", keyed)
	}
}

// latin1Bytes is s (UTF-8) in latin1, when it has only latin1 characters.
func latin1Bytes(s string) (string, bool) {
	var b []byte
	for _, r := range s {
		if r > 0xff {
			return "", false
		}
		b = append(b, byte(r))
	}
	return string(b), true
}

// cutKeyAgrees stores s (in the client's character set) into table name
// and reports whether lockproxy keyed it, failing t when the stored row's
// key is not the statement's.
func cutKeyAgrees(t *testing.T, ctx context.Context, conn *sql.Conn, col *Column, name, client, s string) bool {
	t.Helper()
	v := parser.Value{Kind: parser.ValueString, Str: s, Text: "'" + s + "'"}
	key, kerr := NormalizeIn(col, v, Assign, TextCharsets{Client: client})
	if _, err := conn.ExecContext(ctx, "INSERT INTO "+name+" VALUES (_"+client+" X'"+hex.EncodeToString([]byte(s))+"')"); err != nil {
		t.Fatalf("store %q into %s: %v", s, name, err)
	}
	var h string
	if err := conn.QueryRowContext(ctx, "SELECT HEX(CONVERT(k USING utf8mb4)) FROM "+name).Scan(&h); err != nil {
		t.Fatal(err)
	}
	stored, err := hex.DecodeString(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "DELETE FROM "+name); err != nil {
		t.Fatal(err)
	}
	if kerr != nil {
		if !errors.Is(kerr, ErrUnkeyable) {
			t.Fatalf("%q into %s: %v", s, name, kerr)
		}
		t.Logf("%q into %s from %s: refused (%v)", s, name, client, kerr)
		return false
	}
	rowKey, err := Normalize(col, parser.Value{Kind: parser.ValueString, Str: string(stored), Text: string(stored)}, Assign)
	if err != nil || string(rowKey) != string(key) {
		t.Errorf("%q stored into %s from a %s client: the row holds %q, keyed %q (%v), but the statement is keyed %q",
			s, name, client, stored, rowKey, err, key)
	}
	return true
}
