package proxy

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/internal/testbed"
	"github.com/lockproxy/lockproxy/rules"
)

func TestLocksAreVisible(t *testing.T) {
	base := startProxy(t, nil)
	db := freshDB(t, base)
	testbed.MustExec(t, base.direct(t, db, ""), "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL)",
		"INSERT INTO sku VALUES (42, 1)")
	p := guardedProxy(t, db, func(r *rules.Rule) { r.WaitTimeout = rules.Duration(10 * time.Second) })
	holder, err := p.db(t, db, "").Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	mustConnExec(t, holder, "BEGIN", "UPDATE sku SET stock = stock - 1 WHERE sku_id = 42")

	t.Run("SHOW LOCKPROXY LOCKS", func(t *testing.T) {
		rows, err := p.db(t, db, "").Query("SHOW LOCKPROXY LOCKS")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		cols, _ := rows.Columns()
		if strings.Join(cols, ",") != "key,rule,state,session,user,client,age_seconds,statement,owner,holder,position" {
			t.Fatalf("columns %v", cols)
		}
		found := false
		for _, v := range showLocks(t, p.db(t, db, "")) {
			if strings.HasSuffix(v[0], "/42") && v[1] == "sku-stock" && v[2] == "held" && v[4] == p.bed.User &&
				strings.Contains(v[7], "sku_id = 42") && v[9] == "NULL" && v[10] == "NULL" {
				found = true
			}
		}
		if !found {
			t.Fatal("the held lock is not listed with its rule, user and statement")
		}
	})
	t.Run("/debug/locks", func(t *testing.T) {
		rec := httptest.NewRecorder()
		p.srv.DebugLocks().ServeHTTP(rec, httptest.NewRequest("GET", "/debug/locks", nil))
		var body struct {
			Locks []LockInfo `json:"locks"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Locks) != 1 || !strings.HasSuffix(body.Locks[0].Key, "/42") || body.Locks[0].Rule != "sku-stock" ||
			body.Locks[0].State != "held" || body.Locks[0].Session == 0 {
			t.Fatalf("/debug/locks: %s", rec.Body.String())
		}
	})
	t.Run("SHOW LOCKPROXY STATUS and RULES", func(t *testing.T) {
		var name, value string
		found := false
		rows, err := p.db(t, db, "").Query("show lockproxy status")
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			if err := rows.Scan(&name, &value); err != nil {
				t.Fatal(err)
			}
			if name == "locks_held" && value == "1" {
				found = true
			}
		}
		rows.Close()
		if !found {
			t.Error("STATUS does not say one lock is held")
		}
		var r [9]string
		if err := p.db(t, db, "").QueryRow("SHOW LOCKPROXY RULES").Scan(&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &r[8]); err != nil {
			t.Fatal(err)
		}
		if r[0] != "sku-stock" || r[2] != "sku_id" {
			t.Errorf("RULES row %v", r)
		}
		// Behind comments MariaDB skips, still lockproxy's statement.
		r = [9]string{}
		if err := p.db(t, db, "").QueryRow("/* a comment */ -- and another\nSHOW LOCKPROXY RULES").Scan(&r[0], &r[1], &r[2], &r[3], &r[4], &r[5], &r[6], &r[7], &r[8]); err != nil {
			t.Fatal(err)
		}
		if r[0] != "sku-stock" {
			t.Errorf("RULES row behind comments %v", r)
		}
	})
	t.Run("a waiter shows its holder and place in the queue", func(t *testing.T) {
		waited := make(chan error, 1)
		go func() {
			_, err := p.db(t, db, "").Exec("UPDATE sku SET stock = stock - 1 WHERE sku_id = 42")
			waited <- err
		}()
		var held, waiting []string
		testbed.Eventually(t, 5*time.Second, "SHOW LOCKPROXY LOCKS lists the waiter", func() bool {
			held, waiting = nil, nil
			for _, v := range showLocks(t, p.db(t, db, "")) {
				switch v[2] {
				case "held":
					held = v
				case "waiting":
					waiting = v
				}
			}
			return held != nil && waiting != nil
		})
		if waiting[9] != held[8] || waiting[10] != "1" {
			t.Errorf("waiting row: holder %s position %s; want %s (the held row's owner) and 1", waiting[9], waiting[10], held[8])
		}
		mustConnExec(t, holder, "COMMIT")
		if err := <-waited; err != nil {
			t.Fatalf("the waiter after COMMIT: %v", err)
		}
	})
	// The release follows the backend's answer to COMMIT, which the client
	// may see a moment before the lock list does.
	testbed.Eventually(t, 5*time.Second, "no lock listed after COMMIT", func() bool { return len(p.srv.Locks()) == 0 })
}

// showLocks runs SHOW LOCKPROXY LOCKS and returns its rows, NULL as "NULL".
func showLocks(t *testing.T, db *sql.DB) [][]string {
	t.Helper()
	rows, err := db.Query("SHOW LOCKPROXY LOCKS")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for rows.Next() {
		v := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range v {
			ptrs[i] = &v[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		row := make([]string, len(v))
		for i, s := range v {
			row[i] = "NULL"
			if s.Valid {
				row[i] = s.String
			}
		}
		out = append(out, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
