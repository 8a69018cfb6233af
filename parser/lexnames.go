package parser

import "strings"

// LexNames returns every word of sql outside string literals and comments
// (keywords and identifiers, back-quoted or not), lowercased, in order,
// without duplicates. A dotted name gives each of its parts and each pair
// of adjacent parts ("shop.sku_stock.stock" gives "shop", "sku_stock",
// "stock", "shop.sku_stock", "sku_stock.stock"). It is a deliberately
// coarse scan for text lockproxy cannot analyse, such as the body of a
// stored routine or trigger: a table or routine name that appears anywhere
// in it is found, along with many words of no interest. A word counts
// when any reading of the text has it outside a literal (EveryReading):
// the sql_mode and character set the text was written under are not
// known here. Safe for concurrent use.
func LexNames(sql string) []string {
	var out []string
	seen := map[string]bool{}
	for _, o := range EveryReading(sql) {
		out = lexNamesIn(sql, o, seen, out)
	}
	return out
}

// lexNamesIn adds to out the names of sql read under o not in seen.
func lexNamesIn(sql string, o ScanOptions, seen map[string]bool, out []string) []string {
	l := lexer{s: sql, mode: o.Mode, charset: o.Charset}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	var parts []string // the dotted name being read
	flush := func() {
		for i, p := range parts {
			add(p)
			if i > 0 {
				add(parts[i-1] + "." + p)
			}
		}
		parts = parts[:0]
	}
	dot := false // the last token was a '.' after a word
	for {
		t, ok := l.next()
		switch {
		case !ok:
			flush()
			return out
		case t.punct && t.text == "." && len(parts) > 0:
			dot = true
		case !t.punct && dot:
			parts = append(parts, strings.ToLower(t.text))
			dot = false
		case !t.punct:
			flush()
			parts = append(parts, strings.ToLower(t.text))
		default:
			flush()
			dot = false
		}
	}
}
