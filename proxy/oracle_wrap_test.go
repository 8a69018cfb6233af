package proxy

import (
	"fmt"
	"strings"
)

// What the plan oracle wraps a statement in: comments, dynamic SQL,
// views and stored procedures.

// commentKinds are comments MariaDB treats differently: some run their text,
// some do not.
var commentKinds = []string{"/*!", "/*!50700 ", "/*!100000 ", "/*!999999 ", "/*M! ", "/*M!100000 ", "/*M!999999 ", "/*T! ", "/* "}

// decorate puts comments into a statement: between tokens, around
// fragments that change its meaning when run, or around all of it.
func (g *gen) decorate(s string) string {
	if !g.chance(45) {
		return s
	}
	switch g.ch.intn(8) {
	case 0, 1: // separators
		words := strings.Split(s, " ")
		for i := 1; i < len(words); i++ {
			if g.chance(25) {
				c := g.pick("/* c */", "/**/", "-- c\n", "#c\n", "/*!*/", "/*M!*/", "/*!50700 */")
				words[i-1] += " " + c
				g.mark("comment between tokens")
			}
		}
		return strings.Join(words, " ")
	case 2, 3: // an extra condition in a comment
		k := g.pick(commentKinds...)
		g.mark("comment " + strings.TrimSpace(k) + " adding a condition")
		extra := g.pick("OR 1=1", "OR TRUE", "+ 1", "OR sku_id > 0")
		if strings.Contains(s, " WHERE ") {
			return s + " " + k + extra + " */"
		}
		return s + " " + k + "WHERE 1=1 */"
	case 4: // the whole statement
		k := g.pick(commentKinds...)
		g.mark("comment " + strings.TrimSpace(k) + " around the statement")
		return k + s + " */"
	case 5: // the statement's head in a comment, the rest outside
		k := g.pick(commentKinds...)
		if i := strings.Index(s, " WHERE "); i > 0 {
			g.mark("comment " + strings.TrimSpace(k) + " around the statement's head")
			return k + s[:i] + " */" + s[i:]
		}
		return s
	case 6: // a comment splitting a keyword or a value
		for _, w := range []string{"UPDATE", "DELETE", "WHERE", "1001", "alice"} {
			if i := strings.Index(s, w); i >= 0 {
				g.mark("comment splitting a token")
				return s[:i+2] + "/**/" + s[i+2:]
			}
		}
		return s
	}
	g.mark("trailing comment")
	return s + g.pick(" -- trailing", " #trailing", " /* trailing */", " --trailing")
}

// dynamic is a write through PREPARE/EXECUTE or EXECUTE IMMEDIATE.
func (g *gen) dynamic() string {
	g.mark("dynamic SQL")
	inner := g.statement()
	quoted := "'" + strings.ReplaceAll(strings.ReplaceAll(inner, `\`, `\\`), "'", "''") + "'"
	switch g.ch.intn(5) {
	case 0:
		return "PREPARE oracle_p FROM " + quoted + "; EXECUTE oracle_p; DEALLOCATE PREPARE oracle_p"
	case 1:
		return "EXECUTE IMMEDIATE " + quoted
	case 2:
		return "SET @oracle_k = " + g.intLit(skuKeys[g.ch.intn(len(skuKeys))]) +
			"; PREPARE oracle_p FROM 'UPDATE sku SET stock = stock + 1 WHERE sku_id = ?'; EXECUTE oracle_p USING @oracle_k"
	case 3:
		return "SET @oracle_q = " + quoted + "; PREPARE oracle_p FROM @oracle_q; EXECUTE oracle_p"
	}
	return "EXECUTE IMMEDIATE CONCAT('UPDATE sku SET stock = 3 WHERE sku_id = ', " + fmt.Sprint(skuKeys[g.ch.intn(len(skuKeys))]) + ")"
}

// view is a write through a view of a guarded table.
func (g *gen) view() string {
	g.mark("view")
	k := g.intLit(skuKeys[g.ch.intn(len(skuKeys))])
	switch g.ch.intn(6) {
	case 0:
		return "UPDATE v_sku SET stock = 0"
	case 1:
		return "UPDATE v_sku SET stock = stock + 1 WHERE sku_id = " + k
	case 2:
		return "DELETE FROM v_sku WHERE sku_id = " + k
	case 3:
		return "INSERT INTO v_sku (sku_id, stock) VALUES (" + k + ", 1)"
	case 4:
		return "UPDATE v_sku_low SET s = 9 WHERE k = " + k
	}
	return "DELETE FROM v_sku_low WHERE k = " + k
}

// call is a CALL of a procedure that writes a guarded table.
func (g *gen) call() string {
	g.mark("CALL")
	switch g.ch.intn(3) {
	case 0:
		return "CALL oracle_zero()"
	case 1:
		return "CALL oracle_name(" + g.strLit(g.pick(acctKeys...)) + ")"
	}
	return "CALL oracle_bump(" + g.intLit(skuKeys[g.ch.intn(len(skuKeys))]) + ")"
}
