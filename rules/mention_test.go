package rules

import "testing"

func TestMentions(t *testing.T) {
	cfg := &Config{Rules: []Rule{
		{Name: "nolock", Table: "shop.audit", Key: []string{"id"}},
		{Name: "sku-stock", Table: "shop.sku_stock", Key: []string{"sku_id"}, Lock: []string{LockWrite}},
	}}
	rs, err := Compile(cfg, Schema{})
	if err != nil {
		t.Fatal(err)
	}
	if r := rs.Locking(); r == nil || r.Name != "sku-stock" {
		t.Fatalf("Locking() = %v", r)
	}
	tests := []struct {
		text string
		want bool
	}{
		{"EXECUTE IMMEDIATE 'UPDATE SKU_STOCK SET stock = 0'", true},
		{"/*M!100000 UPDATE `sku_stock` SET stock = 0 */", true},
		{"UPDATE shop.sku_stock SET stock = 0", true},
		{"UPDATE sku_stock_log SET n = 0", false},
		{"UPDATE xsku_stock SET n = 0", false},
		{"UPDATE audit SET n = 0", false},
		{"sku_stock", true},
	}
	for _, tt := range tests {
		if got := rs.Mentions(tt.text) != nil; got != tt.want {
			t.Errorf("Mentions(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
