package main

import (
	"fmt"
	"strings"
)

// report renders the two sales side by side.
func report(o options, s [2]sale) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Flash sale: %d buyers, %d units in stock, each buyer running\n", o.buyers, o.stock)
	b.WriteString("  BEGIN; SELECT stock FROM sku_stock WHERE sku_id = 1;\n")
	b.WriteString("  UPDATE sku_stock SET stock = <stock read - 1> WHERE sku_id = 1;\n")
	b.WriteString("  INSERT INTO orders ...; COMMIT\n\n")
	rows := [][3]string{
		{"", "directly to MariaDB", "through 2 lockproxy instances"},
		{"orders taken", num(s[0].state.Orders), num(s[1].state.Orders)},
		{"stock left", num(s[0].state.Stock), num(s[1].state.Stock)},
		{"oversold units", num(s[0].oversold()), num(s[1].oversold())},
		{"lost updates", num(s[0].lost()), num(s[1].lost())},
		{"retried (1205/1213)", num(int64(s[0].run.Retries)), num(int64(s[1].run.Retries))},
		{"lock waits (metrics)", waits(s[0]), waits(s[1])},
		{"errors", errs(s[0]), errs(s[1])},
		{"took", secs(s[0]), secs(s[1])},
	}
	for _, r := range rows {
		fmt.Fprintf(&b, "%-22s %-22s %s\n", r[0], r[1], r[2])
	}
	b.WriteString("\n")
	b.WriteString(verdict(s))
	return b.String()
}

func num(n int64) string { return fmt.Sprint(n) }

func secs(s sale) string { return fmt.Sprintf("%.2f s", s.run.Seconds) }

func errs(s sale) string {
	if s.run.Errors == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%s)", s.run.Errors, s.run.ErrorMsg)
}

// waits is the lock acquisitions and their mean wait, from the metrics.
func waits(s sale) string {
	if !s.proxied {
		return "none (no locks)"
	}
	if s.locks.WaitCount == 0 {
		return "0"
	}
	return fmt.Sprintf("%.0f, mean %.1f ms", s.locks.WaitCount, 1000*s.locks.WaitSum/s.locks.WaitCount)
}

func verdict(s [2]sale) string {
	var b strings.Builder
	d, v := s[0], s[1]
	switch {
	case d.oversold() > 0 || d.lost() > 0:
		fmt.Fprintf(&b, "Directly, %d buyers read the same stock and wrote over each other: %d units oversold, %d updates lost.\n",
			d.state.Orders, d.oversold(), d.lost())
	default:
		b.WriteString("Directly, this run happened to interleave without harm; run it again or with more -buyers.\n")
	}
	if v.oversold() == 0 && v.lost() == 0 {
		fmt.Fprintf(&b, "Through lockproxy, the same code sold exactly %d: every read in the transaction took the row's lock.\n", v.state.Orders)
	} else {
		fmt.Fprintf(&b, "Through lockproxy: %d oversold, %d lost: a bug, please report it.\n", v.oversold(), v.lost())
	}
	return b.String()
}
