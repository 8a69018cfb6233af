package parser

import (
	"reflect"
	"strconv"
	"strings"
)

// Statement shapes. Applications send the same statement again and again
// with other values in it (`UPDATE sku_stock SET stock = 41 WHERE
// sku_id = 7`, `... WHERE sku = 'A-1001'`), and each new text would
// otherwise be parsed by the TiDB parser. A shape is the text with the
// integer and plain string literals that are compared or assigned with
// `=` written as `?`: it is analysed once, as a prepared statement's text
// is, and its placeholders are bound to the literals' values (the same
// parser.Value a literal gets), as an execute binds them. MariaDB gives a
// placeholder bound to an integer or a string the meaning of the same
// literal (Item_param compares and assigns as Item_int or Item_string
// does), so the planner, which already keys placeholders from execute-time
// values (and folds strings by the key column's collation either way),
// reaches the same keys. The text sent to MariaDB is always the one the
// client sent.
//
// The scan that finds the literals is deliberately narrow: it gives up on
// any text it cannot read with certainty (comments, which may be
// executable or carry hints; backslashes and double quotes, whose meaning
// depends on sql_mode; user variables; placeholders already present),
// and it replaces only a run of at most 18 decimal digits that follows a
// lone `=` and is not part of a word, a number with a fraction or
// exponent, or a signed number, and a single-quoted string of printable
// ASCII without a backslash that follows a lone `=` with no introducer,
// no doubled quote, no string next to it and no COLLATE (shapeableString),
// and the two bounds of `BETWEEN lo AND hi` when both are such digit runs,
// differ, and nothing after hi can extend it (betweenPair: range reads),
// and such a digit run or string (printable ASCII without a backslash)
// that is a whole element of an INSERT's or REPLACE's VALUES rows
// (valuesRows).
// A shape is used only when its analysis
// is that of one INSERT, REPLACE, UPDATE, DELETE or SELECT that parsed
// with certainty, and only after the analysis of the first text seen with
// that shape matched it field for field once the placeholders were bound
// (sameUnderParams): a shape whose placeholders change what the analyser
// concludes (a position in ORDER BY, a literal inside an expression the
// analyser keeps as text) is remembered as unusable and its texts are
// analysed one by one as before.

// maxShapeDigits is the longest digit run shaped: every run this long fits
// an int64, so the literal's value never depends on its length.
const maxShapeDigits = 18

// shapeOf returns sql with its shapeable integer literals replaced by `?`
// and their values, in textual order; ok is false when the text has none
// or cannot be shaped with certainty.
func shapeOf(sql string) (shape string, vals []Value, ok bool) {
	var b strings.Builder
	last := 0     // sql[last:] is not copied to b yet
	var prev byte // last byte outside blanks, strings and quoted names
	var prev2 byte
	// Strings are read as ending at their next quote (as under
	// NO_BACKSLASH_ESCAPES): a string holding a backslash is never shaped,
	// and a backslash outside one gives up.
	sc := NewScanner(sql, ScanOptions{Mode: ModeNoBackslashEscapes})
	afterBetween := false // the last token outside blanks was the word BETWEEN
	hiAt := -1            // where the upper bound of a shaped BETWEEN pair starts
	var rows valuesRows
	for {
		t, more := sc.Next()
		if !more {
			break
		}
		c := sql[t.Start]
		wasBetween := afterBetween
		if t.Kind != TokenSpace {
			afterBetween = false
			rows.next(sql, t)
		}
		switch t.Kind {
		case TokenComment, TokenExecStart, TokenExecEnd:
			return "", nil, false
		case TokenSpace:
		case TokenString, TokenQuotedName:
			if t.Open || c == '"' {
				return "", nil, false
			}
			closing := t.End - 1
			if c == '\'' && (shapeableString(sql, t.Start, closing, prev, prev2) ||
				rows.element(sql, t, prev) && plainString(sql, t.Start, closing)) {
				if b.Len() == 0 {
					b.Grow(len(sql))
				}
				b.WriteString(sql[last:t.Start])
				b.WriteByte('?')
				last = t.End
				content := sql[t.Start+1 : closing]
				vals = append(vals, Value{Kind: ValueString, Str: content, Text: quoteString(content)})
				prev2, prev = prev, '?'
				continue
			}
			prev2, prev = prev, c
		case TokenWord:
			run := sql[t.Start:t.End]
			bound := t.Start == hiAt
			if !bound && wasBetween {
				if at := betweenPair(sql, t.Start, t.End); at >= 0 {
					hiAt, bound = at, true
				}
			}
			if !bound {
				afterBetween = strings.EqualFold(run, "between")
				if !shapeable(sql, t.Start, t.End, prev, prev2) && !(rows.element(sql, t, prev) && rowDigits(sql, t.Start, t.End)) {
					prev2, prev = prev, run[len(run)-1]
					continue
				}
			}
			// A digit run after a lone `=`, or a BETWEEN pair's bound.
			n, ok := digitRun(sql, t.Start, t.End)
			if !ok { // a bound whose word is not the run betweenPair read
				return "", nil, false
			}
			if b.Len() == 0 {
				b.Grow(len(sql))
			}
			b.WriteString(sql[last:t.Start])
			b.WriteByte('?')
			last = t.End
			vals = append(vals, Value{Kind: ValueInt, Int: n, Text: strconv.FormatInt(n, 10)})
			prev2, prev = prev, '?'
		default:
			switch {
			case c == '?' || c == '\\' || c == '@',
				c == '-' && t.End < len(sql) && sql[t.End] == '-':
				return "", nil, false
			}
			prev2, prev = prev, c
		}
	}
	if len(vals) == 0 {
		return "", nil, false
	}
	b.WriteString(sql[last:])
	return b.String(), vals, true
}

// shapeable reports whether sql[start:end], a maximal run of word bytes,
// is an integer literal compared or assigned with a lone `=` (prev is the
// last byte before it outside blanks, prev2 the one before that).
func shapeable(sql string, start, end int, prev, prev2 byte) bool {
	if end-start > maxShapeDigits {
		return false
	}
	for i := start; i < end; i++ {
		if sql[i] < '0' || sql[i] > '9' {
			return false
		}
	}
	if prev != '=' {
		return false
	}
	switch prev2 {
	case '<', '>', '!', ':', '=':
		return false // <=, >=, !=, :=, <=> and == are other operators
	}
	// A dot before or after makes it part of a name or a decimal (t.1,
	// 1.5); the word scan already took letters, so 1e5 and 0x1f are words.
	if start > 0 && sql[start-1] == '.' {
		return false
	}
	return end == len(sql) || sql[end] != '.'
}

// betweenPair reports where the upper bound of a BETWEEN pair starts
// when sql[start:end], the word right after a BETWEEN, is its lower bound
// and both are shaped together; -1 if they are not. Only the narrowest
// form is: `BETWEEN lo AND hi` with lo and hi runs of at most
// maxShapeDigits decimal digits, only blanks between them and the AND,
// and after hi only the end of the text, a closing parenthesis or one of
// AND, OR, ORDER, GROUP, LIMIT, FOR and LOCK, none of which an operand
// of BETWEEN can continue into (hi + 1, hi COLLATE x, hi IS NULL are not
// shaped). And lo must differ from hi: the analysis reads `e BETWEEN k
// AND k` as `e = k` and keys it, which a shape, whose placeholders it
// cannot compare, would not.
func betweenPair(sql string, start, end int) int {
	lo, ok := digitRun(sql, start, end)
	if !ok {
		return -1
	}
	i := skipBlanks(sql, end)
	if !wordAt(sql, i, "and") {
		return -1
	}
	hiStart := skipBlanks(sql, i+len("and"))
	hiEnd := hiStart
	for hiEnd < len(sql) && IsWordByte(sql[hiEnd]) {
		hiEnd++
	}
	hi, ok := digitRun(sql, hiStart, hiEnd)
	if !ok || hi == lo {
		return -1
	}
	j := skipBlanks(sql, hiEnd)
	if j == len(sql) || sql[j] == ')' {
		return hiStart
	}
	for _, w := range [...]string{"and", "or", "order", "group", "limit", "for", "lock"} {
		if wordAt(sql, j, w) {
			return hiStart
		}
	}
	return -1
}

// digitRun returns the value of sql[start:end], a maximal run of word
// bytes, when it is 1 to maxShapeDigits decimal digits not next to a dot.
func digitRun(sql string, start, end int) (int64, bool) {
	if end <= start || end-start > maxShapeDigits || start > 0 && sql[start-1] == '.' || end < len(sql) && sql[end] == '.' {
		return 0, false
	}
	for i := start; i < end; i++ {
		if sql[i] < '0' || sql[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(sql[start:end], 10, 64)
	return n, err == nil
}

// skipBlanks returns the index of the first byte at or after i that is
// not a blank.
func skipBlanks(sql string, i int) int {
	for i < len(sql) && isSpace(sql[i]) {
		i++
	}
	return i
}

// wordAt reports whether the word at sql[i:] is w, in any case.
func wordAt(sql string, i int, w string) bool {
	return len(sql)-i >= len(w) && strings.EqualFold(sql[i:i+len(w)], w) &&
		(len(sql) == i+len(w) || !IsWordByte(sql[i+len(w)]))
}

// shapeableString reports whether sql[open:closing+1], a single-quoted
// string with no quote inside, is a plain string literal compared or
// assigned with a lone `=` whose value is its bytes whatever the
// connection's character set and sql_mode: printable ASCII but the
// backslash only (an escape, or not, by sql_mode; shapeOf's scan skips
// string contents, so it must be refused here), no introducer or N before
// it (the byte before the `=` side is then not `=`), and neither a quote
// right after it (a doubled quote inside, an escaped quote, or a string
// it is concatenated with) nor COLLATE after it.
func shapeableString(sql string, open, closing int, prev, prev2 byte) bool {
	if prev != '=' {
		return false
	}
	switch prev2 {
	case '<', '>', '!', ':', '=':
		return false
	}
	if !plainString(sql, open, closing) {
		return false
	}
	j := closing + 1
	for j < len(sql) && isSpace(sql[j]) {
		j++
	}
	if j < len(sql) && sql[j] == '\'' {
		return false
	}
	const collateWord = "collate"
	if len(sql)-j >= len(collateWord) && strings.EqualFold(sql[j:j+len(collateWord)], collateWord) &&
		(len(sql) == j+len(collateWord) || !IsWordByte(sql[j+len(collateWord)])) {
		return false
	}
	return true
}

// plainString reports whether the string sql[open:closing+1] holds only
// printable ASCII but the backslash and the quote: its value is its bytes
// whatever the connection's character set and sql_mode.
func plainString(sql string, open, closing int) bool {
	for i := open + 1; i < closing; i++ {
		if sql[i] < 0x20 || sql[i] > 0x7e || sql[i] == '\\' || sql[i] == '\'' {
			return false
		}
	}
	return true
}

// valuesRows follows the VALUES rows of an INSERT or REPLACE through
// shapeOf's tokens, to find the literals that are a whole element of a
// row: `INSERT INTO t (id, k, c) VALUES (5012, 4993, 'x'), (7, 8, 'y')`
// has the shape `... VALUES (?, ?, ?), (?, ?, ?)`, whose placeholders
// the analysis reads as it reads a prepared INSERT's, into the rows it
// keys. Only the rows of the text's own statement are followed: its first
// word is INSERT or REPLACE, and the word VALUES (or VALUE) comes outside
// parentheses before anything else does; the rows end at the first token
// outside their parentheses that is neither a row's `(` nor the comma
// between rows (ON DUPLICATE KEY UPDATE, RETURNING, a `;`), and nothing
// after them is shaped as an element. An element is shaped only when it
// is alone between the row's own parentheses and commas: one inside
// another pair of parentheses (a function's argument, a row of a row) or
// next to an operator, a sign, a COLLATE or another string is not.
type valuesRows struct {
	first int8 // 0: no word yet, 1: the first word is INSERT or REPLACE, -1: it is another
	state int8 // 0: before VALUES, 1: in the rows, 2: after them
	depth int  // parentheses open
}

// next notes t, a token of sql that is not a blank.
func (v *valuesRows) next(sql string, t Token) {
	if v.first == 0 {
		v.first = -1
		if t.Kind == TokenWord && (wordAt(sql, t.Start, "insert") || wordAt(sql, t.Start, "replace")) {
			v.first = 1
		}
		return
	}
	if v.first < 0 || v.state == 2 {
		return
	}
	c := sql[t.Start]
	if v.state == 0 {
		if t.Kind == TokenWord && (wordAt(sql, t.Start, "values") || wordAt(sql, t.Start, "value")) && v.depth == 0 {
			v.state = 1
			return
		}
		if t.Kind == TokenPunct {
			switch c {
			case '(':
				v.depth++
			case ')':
				v.depth--
			}
		}
		return
	}
	if t.Kind == TokenPunct {
		switch {
		case c == '(':
			v.depth++
			return
		case c == ')' && v.depth > 0:
			v.depth--
			return
		case c == ',':
			return // between elements, or between rows
		}
	}
	if v.depth == 0 {
		v.state = 2
	}
}

// element reports whether t, a literal token of sql just noted by next,
// is a whole element of a VALUES row: inside the row's own parentheses,
// after its `(` or a `,` (prev), and followed, past blanks, by a `,` or
// the row's `)`.
func (v *valuesRows) element(sql string, t Token, prev byte) bool {
	if v.first < 0 || v.state != 1 || v.depth != 1 || prev != '(' && prev != ',' {
		return false
	}
	j := skipBlanks(sql, t.End)
	return j < len(sql) && (sql[j] == ',' || sql[j] == ')')
}

// rowDigits reports whether sql[start:end] is a digit run shapeOf shapes
// (see digitRun).
func rowDigits(sql string, start, end int) bool {
	_, ok := digitRun(sql, start, end)
	return ok
}

// shapeKinds are the statement kinds a shape may stand for.
var shapeKinds = map[Kind]bool{KindSelect: true, KindInsert: true, KindReplace: true, KindUpdate: true, KindDelete: true}

// usableShape reports whether a, the analysis of a text or of its shape,
// is one statement of a shaped kind, parsed with certainty, with exactly n
// placeholders (0 for the text itself).
func usableShape(a *Analysis, n int) bool {
	if a.Unparsed || a.Uncertain != "" || a.PrimaryHint || len(a.Stmts) != 1 || a.Params != n {
		return false
	}
	f := a.Stmts[0]
	return shapeKinds[f.Kind] && f.Prepared == nil && f.Procedure == "" && !f.ImplicitCommit
}

// sameUnderParams reports whether the analysis of a shape, with each
// placeholder bound to vals, says what the analysis of the literal text
// says: every field equal but the texts, parse trees and placeholder
// counts, and each placeholder Value where the literal one is vals[i]
// (an assignment of a placeholder where one of a literal is).
func sameUnderParams(sh, lit *Analysis, vals []Value) bool {
	if len(sh.Stmts) != len(lit.Stmts) || sh.Unparsed != lit.Unparsed || sh.Uncertain != lit.Uncertain ||
		sh.PrimaryHint != lit.PrimaryHint || sh.DB != lit.DB || sh.Mode != lit.Mode || lit.Params != 0 {
		return false
	}
	for i := range sh.Stmts {
		if !sameFacts(reflect.ValueOf(sh.Stmts[i]).Elem(), reflect.ValueOf(lit.Stmts[i]).Elem(), vals) {
			return false
		}
	}
	return true
}

var (
	valueType      = reflect.TypeFor[Value]()
	assignmentType = reflect.TypeFor[Assignment]()
	factsType      = reflect.TypeFor[Facts]()
)

// sameFacts compares s (from the shape) with l (from the literal text)
// field by field; see sameUnderParams.
func sameFacts(s, l reflect.Value, vals []Value) bool {
	if s.Type() != l.Type() {
		return false
	}
	switch s.Type() {
	case valueType:
		sv, lv := s.Interface().(Value), l.Interface().(Value)
		if sv.Kind == ValueParam {
			return sv.Param >= 0 && sv.Param < len(vals) && lv == vals[sv.Param]
		}
		return sv == lv
	case assignmentType:
		sa, la := s.Interface().(Assignment), l.Interface().(Assignment)
		if sa.Kind == AssignParam && la.Kind == AssignLiteral {
			sa.Kind = AssignLiteral
		}
		return sa.Table == la.Table && sa.Column == la.Column && sa.Kind == la.Kind && sa.Op == la.Op &&
			sameFacts(reflect.ValueOf(sa.Value), reflect.ValueOf(la.Value), vals) &&
			sameFacts(reflect.ValueOf(sa.Delta), reflect.ValueOf(la.Delta), vals)
	case factsType:
		for i := range s.NumField() {
			switch s.Type().Field(i).Name {
			case "Node", "Text", "ParamBase", "Params":
				continue // the texts differ by construction
			case "current":
				continue // a cache of what Text proves
			}
			if !sameFacts(s.Field(i), l.Field(i), vals) {
				return false
			}
		}
		return true
	}
	switch s.Kind() {
	case reflect.Pointer:
		if s.IsNil() || l.IsNil() {
			return s.IsNil() == l.IsNil()
		}
		return sameFacts(s.Elem(), l.Elem(), vals)
	case reflect.Struct:
		for i := range s.NumField() {
			if !sameFacts(s.Field(i), l.Field(i), vals) {
				return false
			}
		}
		return true
	case reflect.Slice, reflect.Array:
		if s.Kind() == reflect.Slice && s.IsNil() != l.IsNil() || s.Len() != l.Len() {
			return false
		}
		for i := range s.Len() {
			if !sameFacts(s.Index(i), l.Index(i), vals) {
				return false
			}
		}
		return true
	case reflect.Map:
		if s.IsNil() != l.IsNil() || s.Len() != l.Len() {
			return false
		}
		it := s.MapRange()
		for it.Next() {
			lv := l.MapIndex(it.Key())
			if !lv.IsValid() || !sameFacts(it.Value(), lv, vals) {
				return false
			}
		}
		return true
	case reflect.Interface:
		if s.IsNil() || l.IsNil() {
			return s.IsNil() == l.IsNil()
		}
		return sameFacts(s.Elem(), l.Elem(), vals)
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.String:
		return s.Equal(l)
	}
	// Functions, channels and the like have no place in facts: never
	// trust a shape over them.
	return false
}

// bindShape returns the execute-time parameters that bind a shape's
// placeholders to the literals they stand for.
func bindShape(vals []Value) []any {
	params := make([]any, len(vals))
	for i, v := range vals {
		params[i] = v
	}
	return params
}
