package rules_test

import (
	"fmt"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// ExampleCompile: a rule guards shop.sku_stock by sku_id. An UPDATE of one row names that
// row's lock key, whatever the spelling of its value; one whose rows
// cannot be keyed is refused.
func ExampleCompile() {
	cfg, err := rules.LoadBytes("rules.yaml", []byte(`
users: [{user: app, password: secret}]
backends: {primary: 127.0.0.1:3306}
rules:
  - name: sku-stock
    table: shop.sku_stock
    key: [sku_id]
`))
	if err != nil {
		panic(err)
	}
	rs, err := rules.Compile(cfg, rules.Schema{})
	if err != nil {
		panic(err)
	}
	for _, sql := range []string{
		"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id = 1001",
		"UPDATE sku_stock SET stock = stock - 1 WHERE sku_id IN ('1001', 1002.0)",
		"UPDATE sku_stock SET stock = 0",
	} {
		an, err := parser.Analyze(sql, "shop")
		if err != nil {
			panic(err)
		}
		d := rs.Match(an.Stmts[0], "shop", false)
		var keys []string
		for _, k := range d.Keys {
			keys = append(keys, k.Name)
		}
		fmt.Println(keys, d.Reject)
	}
	// Output:
	// [shop.sku_stock/1001] false
	// [shop.sku_stock/1001 shop.sku_stock/1002] false
	// [] true
}

// ExampleParseSize: sizes in rules.yaml take binary units.
func ExampleParseSize() {
	for _, s := range []string{"67108864", "64MiB", "1G"} {
		n, _ := rules.ParseSize(s)
		fmt.Println(n)
	}
	_, err := rules.ParseSize("64MB")
	fmt.Println(err != nil)
	// Output:
	// 67108864
	// 67108864
	// 1073741824
	// true
}
