package rules

import (
	"testing"

	"github.com/lockproxy/lockproxy/parser"
)

func BenchmarkMatch(b *testing.B) {
	cfg, err := load("match.yaml", []byte(matchYAML), testEnv, "")
	if err != nil {
		b.Fatal(err)
	}
	rs, err := Compile(cfg, Schema{})
	if err != nil {
		b.Fatal(err)
	}
	a, err := parser.Analyze("UPDATE sku_stock SET stock = stock - 1 WHERE sku_id IN (1001, '1002', 1003) AND stock >= 1", "shop")
	if err != nil || len(a.Stmts) != 1 {
		b.Fatal(err)
	}
	f := a.Stmts[0]
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := rs.Match(f, "shop", true); len(d.Keys) != 3 {
			b.Fatalf("keys: %v", d.Keys)
		}
	}
}

func BenchmarkEncodeKey(b *testing.B) {
	vals := [][]byte{[]byte("1001"), []byte("some value/with % odd bytes\x00")}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = EncodeKey("shop", "orders", vals)
	}
}

func BenchmarkNormalizeCI(b *testing.B) {
	v := parser.Value{Kind: parser.ValueString, Str: "Straße Ærø café  "}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := Normalize(colCI, v, Compare); err != nil {
			b.Fatal(err)
		}
	}
}
