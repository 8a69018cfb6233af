package proxy

import (
	"bufio"
	"context"
	"io"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/go-mysql-org/go-mysql/client"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/lockproxy/lockproxy/internal/testbed"

	"github.com/lockproxy/lockproxy/rules"
)

// TestLargeRowsStream: a result row larger than the session's packet
// buffer passes through lockproxy piece by piece: relaying it allocates
// nothing near its size, so sessions reading large rows at once cannot
// make lockproxy hold their size each (the client reads them, MariaDB
// holds them; lockproxy only passes them on).
func TestLargeRowsStream(t *testing.T) {
	p, db := limitsProxy(t, nil)
	c, err := client.Connect(p.addr, p.bed.User, p.bed.Password, db)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const rowSize, queries = 4 << 20, 16
	conn := c.Conn.Conn
	r := bufio.NewReaderSize(conn, 16<<10)
	// query sends COM_QUERY and reads the response without holding any
	// packet over 64 KiB (so the test's own reads allocate nothing large),
	// returning the largest packet's length.
	query := func() int {
		t.Helper()
		q := "SELECT REPEAT('x', " + strconv.Itoa(rowSize) + ")"
		pkt := append([]byte{byte(len(q) + 1), 0, 0, 0, mysql.COM_QUERY}, q...)
		if _, err := conn.Write(pkt); err != nil {
			t.Fatal(err)
		}
		largest, afterRow := 0, false
		var hdr [4]byte
		small := make([]byte, 64<<10)
		for {
			if _, err := io.ReadFull(r, hdr[:]); err != nil {
				t.Fatal(err)
			}
			n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
			largest = max(largest, n)
			if n > len(small) {
				if _, err := io.CopyN(io.Discard, r, int64(n)); err != nil {
					t.Fatal(err)
				}
				afterRow = true
				continue
			}
			if _, err := io.ReadFull(r, small[:n]); err != nil {
				t.Fatal(err)
			}
			if n > 0 && small[0] == mysql.ERR_HEADER {
				t.Fatalf("error: %q", small[:n])
			}
			if afterRow && n > 0 && n < 9 && small[0] == mysql.EOF_HEADER {
				return largest
			}
		}
	}
	if n := query(); n != rowSize+4 { // the length prefix 0xfd + 3 bytes
		t.Fatalf("row of %d bytes, want %d", n, rowSize+4)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range queries {
		if n := query(); n != rowSize+4 {
			t.Fatalf("row of %d bytes, want %d", n, rowSize+4)
		}
	}
	runtime.ReadMemStats(&after)
	// Holding each row whole would allocate queries*rowSize (64 MiB).
	if got := after.TotalAlloc - before.TotalAlloc; got > queries*rowSize/4 {
		t.Errorf("relaying %d rows of %d MiB allocated %d MiB; want them streamed", queries, rowSize>>20, got>>20)
	}
}

// TestLargeRowCaptured: a row over the packet buffer is still held whole
// when a rewrite needs its value and the session's memory budget has room
// (the next write is paired), and streamed when it has not (the value is
// forgotten and the next write is unpaired); the client gets the same row
// either way.
func TestLargeRowCaptured(t *testing.T) {
	const noteSize = 1 << 20
	for _, c := range []struct {
		name   string
		budget int // proxy.session_memory; 0: the default
		stock  int // 4: paired (5 + (9 - 10)); 9: unpaired, written as sent
		result string
	}{
		{"budget holds it", 0, 4, "applied"},
		{"budget too small", 512 << 10, 9, "unpaired"},
	} {
		t.Run(c.name, func(t *testing.T) {
			base := startProxy(t, nil)
			db := freshDB(t, base)
			direct := base.direct(t, db, "")
			testbed.MustExec(t, direct, "CREATE TABLE sku (sku_id BIGINT PRIMARY KEY, stock INT NOT NULL, note LONGTEXT)",
				"INSERT INTO sku VALUES (1, 10, REPEAT('n', "+strconv.Itoa(noteSize)+"))")
			rw := rules.Rewrite{Column: "stock", Mode: "delta", Scope: rules.ScopeSession}
			p := startProxy(t, func(cfg *rules.Config) {
				cfg.Rules = []rules.Rule{{Name: "stock", Table: db + ".sku", Key: []string{"sku_id"}, Lock: []string{}, Rewrite: &rw}}
				if c.budget > 0 {
					cfg.Proxy.MaxAllowedPacket = 256 << 10
					cfg.Proxy.SessionMemory = rules.Size(c.budget)
					cfg.Proxy.MemoryBudget = 8 << 20
				}
			})
			ctx := context.Background()
			conn, err := p.db(t, db, "").Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var stock int
			var note string
			if err := conn.QueryRowContext(ctx, "SELECT stock, note FROM sku WHERE sku_id = 1").Scan(&stock, &note); err != nil {
				t.Fatal(err)
			}
			if stock != 10 || note != strings.Repeat("n", noteSize) {
				t.Fatalf("read stock %d and a note of %d bytes; want 10 and %d bytes of n", stock, len(note), noteSize)
			}
			testbed.MustExec(t, direct, "UPDATE sku SET stock = 5 WHERE sku_id = 1")
			mustConnExec(t, conn, "UPDATE sku SET stock = 9 WHERE sku_id = 1")
			var got int
			if err := direct.QueryRow("SELECT stock FROM sku").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.stock {
				t.Errorf("stock %d, want %d", got, c.stock)
			}
			if v := value(t, p.reg, "lockproxy_rewrites_total", "mode=delta,result="+c.result+",rule=stock"); v != 1 {
				t.Errorf("lockproxy_rewrites_total{result=%q} = %v, want 1", c.result, v)
			}
			if v := value(t, p.reg, "lockproxy_memory_budget_used_bytes", ""); v != 0 {
				t.Errorf("memory budget used after the commands: %v bytes, want 0", v)
			}
		})
	}
}
