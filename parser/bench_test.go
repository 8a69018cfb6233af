package parser

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkAnalyzeKeyedUpdate is the uncached cost of the statement a
// guarded row sees most.
func BenchmarkAnalyzeKeyedUpdate(b *testing.B) {
	benchAnalyze(b, "UPDATE sku_stock SET stock = 9 WHERE sku_id = 1001")
}

// BenchmarkAnalyzeORMSelect is a Hibernate-style locking read with a
// placeholder.
func BenchmarkAnalyzeORMSelect(b *testing.B) {
	benchAnalyze(b, "select s1_0.sku_id,s1_0.stock,s1_0.version from sku_stock s1_0 where s1_0.sku_id=? for update")
}

// BenchmarkAnalyzeINList500 is a locking read of 500 keys.
func BenchmarkAnalyzeINList500(b *testing.B) {
	sql := "SELECT * FROM sku_stock WHERE sku_id IN (1"
	for i := 2; i <= 500; i++ {
		sql += "," + strconv.Itoa(i)
	}
	benchAnalyze(b, sql+") FOR UPDATE")
}

// BenchmarkCacheHit is the cost of a statement already analysed.
func BenchmarkCacheHit(b *testing.B) {
	const sql = "UPDATE sku_stock SET stock = 9 WHERE sku_id = 1001"
	c := NewCache(1024)
	if _, err := c.Analyze(sql, "shop"); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Analyze(sql, "shop"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCacheHitParallel is BenchmarkCacheHit from all cores at once.
func BenchmarkCacheHitParallel(b *testing.B) {
	const sql = "UPDATE sku_stock SET stock = 9 WHERE sku_id = 1001"
	c := NewCache(1024)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Analyze(sql, "shop"); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkShapeHit is the cost of a keyed UPDATE whose literals are new
// but whose shape was analysed before (AnalyzeShaped): the scan, the
// cache lookup and the bound parameters, no parse.
func BenchmarkShapeHit(b *testing.B) {
	benchShapeHit(b, func(i int) string { return "UPDATE sku_stock SET stock = " + strconv.Itoa(i) + " WHERE sku_id = 1001" })
}

// BenchmarkShapeHitString: a keyed UPDATE whose key is a string, with a
// new key in each text, answered by its shape.
func BenchmarkShapeHitString(b *testing.B) {
	benchShapeHit(b, func(i int) string {
		return "UPDATE inventory SET stock = stock - 1 WHERE sku = 'A-" + strconv.Itoa(i) + "'"
	})
}

// BenchmarkShapeHitRange: a range read (sysbench oltp_read_write's
// simple range) with new BETWEEN bounds in each text, answered by its
// shape; BenchmarkAnalyzeRange is the same text analysed from scratch.
func BenchmarkShapeHitRange(b *testing.B) {
	benchShapeHit(b, func(i int) string {
		return "SELECT c FROM sbtest1 WHERE id BETWEEN " + strconv.Itoa(i) + " AND " + strconv.Itoa(i+99)
	})
}

// BenchmarkShapeHitInsert: sysbench oltp_read_write's INSERT, new values
// in each text, answered by its shape; BenchmarkAnalyzeInsert is the same
// text analysed from scratch.
func BenchmarkShapeHitInsert(b *testing.B) {
	benchShapeHit(b, func(i int) string {
		return "INSERT INTO sbtest1 (id, k, c, pad) VALUES (" + strconv.Itoa(i) + ", " + strconv.Itoa(i*7) +
			", '68487932199-96439406143-93774651418-41631865787-96406072701', '22195207048-70116052123-74140395089-76317954521')"
	})
}

// BenchmarkAnalyzeInsert is sysbench's INSERT analysed from its text.
func BenchmarkAnalyzeInsert(b *testing.B) {
	benchAnalyze(b, "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5012, 4993, "+
		"'68487932199-96439406143-93774651418-41631865787-96406072701', '22195207048-70116052123-74140395089-76317954521')")
}

// BenchmarkAsCurrentRead: a point read's shape made a current read for a
// text of that shape, as every plain read in a transaction under
// read_in_txn is (the proof is made once, outside the loop).
func BenchmarkAsCurrentRead(b *testing.B) {
	an, err := Analyze("SELECT c FROM sbtest1 WHERE id=?", "shop")
	if err != nil || !an.Stmts[0].CurrentReadOK() {
		b.Fatalf("not a current read: %v", err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := an.Stmts[0].AsCurrentRead("SELECT c FROM sbtest1 WHERE id=5012"); !ok {
			b.Fatal("not applied")
		}
	}
}

// BenchmarkAnalyzeRange is a range read analysed from its text.
func BenchmarkAnalyzeRange(b *testing.B) {
	benchAnalyze(b, "SELECT c FROM sbtest1 WHERE id BETWEEN 5012 AND 5111")
}

// benchAnalyze times the uncached analysis of sql.
func benchAnalyze(b *testing.B, sql string) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Analyze(sql, "shop"); err != nil {
			b.Fatal(err)
		}
	}
}

// benchShapeHit times AnalyzeShaped over 1000 texts of one shape, text(i),
// once the shape was analysed from another text of it.
func benchShapeHit(b *testing.B, text func(i int) string) {
	c := NewCache(1024)
	texts := make([]string, 1000)
	if _, params, err := c.AnalyzeShaped(text(len(texts)), "shop", DefaultOptions); err != nil || params == nil {
		b.Fatal("no shape", err)
	}
	for i := range texts {
		texts[i] = text(i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, params, err := c.AnalyzeShaped(texts[i%len(texts)], "shop", DefaultOptions); err != nil || params == nil {
			b.Fatal("shape not used", err)
		}
		i++
	}
}

// BenchmarkAnalyzeStringKeyedUpdate: the same UPDATE analysed from its
// text (what each new key cost before string literals were shaped).
func BenchmarkAnalyzeStringKeyedUpdate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Analyze("UPDATE inventory SET stock = stock - 1 WHERE sku = 'A-1001'", "shop"); err != nil {
			b.Fatal(err)
		}
	}
}

// blobInsert is the INSERT a driver that inlines parameters sends for a
// 16 MiB BLOB: the value as a hex literal (X'...') or a quoted string.
func blobInsert(hex bool) string {
	const n = 16 << 20
	var b strings.Builder
	b.Grow(2*n + 100)
	b.WriteString("INSERT INTO blobs (id, body) VALUES (42, ")
	if hex {
		b.WriteString("X'")
		b.WriteString(strings.Repeat("0123456789abcdef", n/8))
	} else {
		b.WriteString("'")
		b.WriteString(strings.Repeat(`abc\'\\def`, n/10))
	}
	b.WriteString("')")
	return b.String()
}

// BenchmarkAnalyzeBlobHex is the analysis of a 16 MiB BLOB inlined as a
// hex literal (32 MiB of text).
func BenchmarkAnalyzeBlobHex(b *testing.B) { benchAnalyzeBlob(b, true) }

// BenchmarkAnalyzeBlobQuoted is the analysis of a 16 MiB BLOB inlined as
// a quoted string with escapes (mysqlclient, PyMySQL).
func BenchmarkAnalyzeBlobQuoted(b *testing.B) { benchAnalyzeBlob(b, false) }

func benchAnalyzeBlob(b *testing.B, hex bool) {
	sql := blobInsert(hex)
	b.SetBytes(int64(len(sql)))
	b.ReportAllocs()
	for b.Loop() {
		an, err := Analyze(sql, "shop")
		if err != nil {
			b.Fatal(err)
		}
		if len(an.Stmts) != 1 || an.Unparsed {
			b.Fatal("no table")
		}
	}
}
