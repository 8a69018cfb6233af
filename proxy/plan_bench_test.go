package proxy

import (
	"testing"

	"github.com/lockproxy/lockproxy/parser"
	"github.com/lockproxy/lockproxy/rules"
)

// BenchmarkMakePlan plans a keyed UPDATE in a transaction under one rule,
// enforcing and observing: what planning costs per statement, and that an
// enforce-only rule set pays nothing for observe mode.
func BenchmarkMakePlan(b *testing.B) {
	for _, mode := range []string{"enforce", "observe"} {
		b.Run(mode, func(b *testing.B) {
			cfg, err := rules.LoadBytes("bench.yaml", []byte(`users: [{user: app, password: x}]
backends: {primary: "127.0.0.1:1"}
locks: {backend: memory}
rules:
  - name: sku-stock
    table: shop.sku_stock
    key: [sku_id]
    mode: `+mode+"\n"))
			if err != nil {
				b.Fatal(err)
			}
			rs, err := rules.Compile(cfg, rules.Schema{})
			if err != nil {
				b.Fatal(err)
			}
			an, err := parser.Analyze("UPDATE sku_stock SET stock = 9 WHERE sku_id = 1", "shop")
			if err != nil {
				b.Fatal(err)
			}
			env := planEnv{rs: rs, db: "shop", inTxn: true, autocommit: true}
			b.ReportAllocs()
			for b.Loop() {
				if p := makePlan(env, an, nil); len(p.guard.keys)+len(p.guardSeenKeys()) != 1 {
					b.Fatal("no key planned")
				}
			}
		})
	}
}

func (p plan) guardSeenKeys() []int {
	if p.guard.seen == nil {
		return nil
	}
	return make([]int, len(p.guard.seen.keys))
}
