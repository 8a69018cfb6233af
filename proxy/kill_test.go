package proxy

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-mysql-org/go-mysql/client"
)

// TestKillQuery: KILL QUERY with the connection id of lockproxy's greeting
// (what clients know, e.g. the mariadb CLI on Ctrl-C) stops that session's
// query.
func TestKillQuery(t *testing.T) {
	p := startProxy(t, nil)
	victim, err := client.Connect(p.addr, p.bed.User, p.bed.Password, "")
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close()
	done := make(chan time.Duration, 1)
	go func() {
		begin := time.Now()
		_, _ = victim.Execute("SELECT SLEEP(30)")
		done <- time.Since(begin)
	}()
	killer := p.db(t, "", "")
	time.Sleep(300 * time.Millisecond) // let the SLEEP start
	if _, err := killer.Exec("KILL QUERY " + strconv.FormatUint(uint64(victim.GetConnectionID()), 10)); err != nil {
		t.Fatalf("KILL QUERY: %v", err)
	}
	select {
	case d := <-done:
		t.Logf("the victim's query ended after %v", d.Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("KILL QUERY did not stop the victim's query")
	}
	if _, err := victim.Execute("SELECT 1"); err != nil {
		t.Errorf("KILL QUERY ended the victim's connection: %v", err)
	}
	_, err = killer.Exec("KILL QUERY 4000000000")
	if me := mysqlErr(t, err); me.Number != 1094 || !strings.HasPrefix(me.Message, "lockproxy:") {
		t.Errorf("unknown id: want lockproxy's 1094, got %v", me)
	}
}
