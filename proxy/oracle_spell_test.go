package proxy

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// Spellings of the typed oracle's temporal and text keys.

// timeSpell spells the datetime v ('YYYY-MM-DD hh:mm:ss[.f]').
func (g *gen) timeSpell(v string) string {
	date, clock, _ := strings.Cut(v, " ")
	hms, frac, _ := strings.Cut(clock, ".")
	digits := strings.ReplaceAll(date, "-", "") + strings.ReplaceAll(hms, ":", "")
	dot := map[bool]string{true: "." + frac, false: ""}[frac != ""]
	switch g.ch.intn(16) {
	case 0:
		g.mark("temporal spelling: digits")
		return "'" + digits + dot + "'"
	case 1:
		g.mark("temporal spelling: number")
		return digits + dot
	case 2:
		g.mark("temporal spelling: slashes")
		return "'" + strings.ReplaceAll(date, "-", "/") + " " + hms + dot + "'"
	case 3:
		g.mark("temporal spelling: T")
		return "'" + date + "T" + hms + dot + "'"
	case 4:
		g.mark("temporal spelling: literal")
		return "TIMESTAMP'" + v + "'"
	case 5:
		g.mark("temporal spelling: date only")
		return g.pick("DATE'"+date+"'", "'"+date+"'")
	case 6:
		g.mark("temporal spelling: fraction")
		return "'" + date + " " + hms + g.pick(".4", ".5", ".000000", ".499999", ".5000001", ".505", ".0000001") + "'"
	case 7:
		g.mark("temporal spelling: short parts")
		d := strings.Split(date, "-")
		m, _ := strconv.Atoi(d[1])
		day, _ := strconv.Atoi(d[2])
		return fmt.Sprintf("'%s-%d-%d %s%s'", d[0], m, day, hms, dot)
	case 8:
		g.mark("temporal spelling: spaces")
		return "' " + v + " '"
	case 9:
		g.mark("temporal spelling: hex")
		return fmt.Sprintf("X'%X'", v)
	case 10:
		g.mark("temporal spelling: out of range")
		return g.pick("'2000-13-01 00:00:00'", "'2000-10-01 25:00:00'", "'2000-02-30 12:00:00'", "'0000-00-00 00:00:00'", "'2000-10-01 12:00:60'")
	case 11:
		g.mark("temporal spelling: introducer")
		return "_latin1'" + v + "'"
	case 12:
		g.mark("temporal spelling: number with fraction")
		return digits + g.pick(".5", ".4", ".0")
	}
	return "'" + v + "'"
}

// timeParam is a typed parameter for the datetime v.
func (g *gen) timeParam(v string) binParam {
	date, clock, _ := strings.Cut(v, " ")
	hms, frac, _ := strings.Cut(clock, ".")
	var y, mo, d, h, mi, s int
	fmt.Sscanf(date, "%d-%d-%d", &y, &mo, &d)
	fmt.Sscanf(hms, "%d:%d:%d", &h, &mi, &s)
	us, _ := strconv.Atoi((frac + "000000")[:6])
	le := binary.LittleEndian
	dt := func(us int) []byte {
		b := le.AppendUint16([]byte{11}, uint16(y))
		b = append(b, byte(mo), byte(d), byte(h), byte(mi), byte(s))
		return le.AppendUint32(b, uint32(us))
	}
	switch g.ch.intn(6) {
	case 0:
		g.mark("param DATETIME with fraction")
		u := []int{us, 500000, 400000, 499999}[g.ch.intn(4)]
		return binParam{mysql.MYSQL_TYPE_DATETIME, false, dt(u), fmt.Sprintf("DATETIME %s %s.%06d", date, hms, u)}
	case 1:
		g.mark("param DATE typed")
		b := le.AppendUint16([]byte{4}, uint16(y))
		return binParam{mysql.MYSQL_TYPE_DATE, false, append(b, byte(mo), byte(d)), "DATE " + date}
	case 2:
		s := g.pick(v, strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(hmsless(v), "-", ""), ":", ""), " ", ""), v+"5", date+" "+hms+".5")
		g.mark("param VAR_STRING datetime")
		return binParam{mysql.MYSQL_TYPE_VAR_STRING, false, lenenc(s), fmt.Sprintf("VAR_STRING %q", s)}
	case 3:
		n, _ := strconv.ParseInt(strings.NewReplacer("-", "", ":", "", " ", "").Replace(date+" "+hms), 10, 64)
		g.mark("param LONGLONG datetime")
		return binParam{mysql.MYSQL_TYPE_LONGLONG, false, le.AppendUint64(nil, uint64(n)), fmt.Sprintf("LONGLONG %d", n)}
	case 4:
		g.mark("param TIMESTAMP typed")
		return binParam{mysql.MYSQL_TYPE_TIMESTAMP, false, dt(us), fmt.Sprintf("TIMESTAMP %s %s.%06d", date, hms, us)}
	}
	g.mark("param DATETIME typed")
	return binParam{mysql.MYSQL_TYPE_DATETIME, false, dt(us), fmt.Sprintf("DATETIME %s %s.%06d", date, hms, us)}
}

// hmsless is v without its fraction.
func hmsless(v string) string {
	s, _, _ := strings.Cut(v, ".")
	return s
}

// textAlike is what the typed text table of collation holds alike.
func textAlike(collation string) map[string][]string {
	for _, tt := range textTables {
		if tt.collation == collation {
			return tt.alike
		}
	}
	if collation == "latin1_german2_ci" {
		return map[string][]string{"ae": {"ä", "Ä"}, "ss": {"ß"}}
	}
	return nil
}

// textSpellIn spells a text key of a column of collation.
func textSpellIn(collation string) func(*gen, string) string {
	alike := textAlike(collation)
	return func(g *gen, s string) string {
		q := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
		if a := alike[s]; len(a) > 0 && g.chance(40) {
			g.mark("string spelling: collation equivalent")
			s = a[g.ch.intn(len(a))]
		}
		switch g.ch.intn(14) {
		case 0:
			g.mark("string spelling: upper case")
			return q(strings.ToUpper(s))
		case 1:
			g.mark("string spelling: trailing spaces")
			return q(s + "  ")
		case 2:
			g.mark("string spelling: introducer")
			return "_utf8mb4" + q(s)
		case 3:
			g.mark("string spelling: hex")
			return fmt.Sprintf("X'%X'", s)
		case 4:
			if h, ok := toLatin1(s); ok {
				g.mark("string spelling: latin1 introducer on hex")
				return fmt.Sprintf("_latin1 X'%X'", h)
			}
		case 5:
			g.mark("string spelling: COLLATE")
			return q(s) + " COLLATE " + g.pick("utf8mb4_bin", "utf8mb4_general_ci", "utf8mb4_unicode_ci")
		case 6:
			if h, ok := toLatin1(s); ok {
				g.mark("string spelling: latin1 COLLATE")
				return fmt.Sprintf("_latin1 X'%X' COLLATE %s", h, g.pick("latin1_bin", "latin1_swedish_ci", "latin1_german2_ci"))
			}
		case 7:
			g.mark("string spelling: too long")
			return q(s + strings.Repeat("z", 40))
		case 8:
			if len(s) == 1 {
				g.mark("string spelling: bit literal")
				return fmt.Sprintf("b'%08b'", s[0])
			}
		case 9:
			g.mark("string spelling: N''")
			return "N" + q(s)
		case 10:
			g.mark("string spelling: utf8mb3 introducer")
			return "_utf8mb3" + q(s)
		}
		return q(s)
	}
}

// textParamIn is a typed parameter for a text key of collation.
func textParamIn(collation string) func(*gen, string) binParam {
	alike := textAlike(collation)
	return func(g *gen, s string) binParam {
		if a := alike[s]; len(a) > 0 && g.chance(50) {
			s = a[g.ch.intn(len(a))]
		}
		switch g.ch.intn(5) {
		case 0:
			g.mark("param BLOB text")
			return binParam{mysql.MYSQL_TYPE_BLOB, false, lenenc(s), fmt.Sprintf("BLOB %q", s)}
		case 1:
			if h, ok := toLatin1(s); ok && h != s {
				g.mark("param BLOB latin1 bytes")
				return binParam{mysql.MYSQL_TYPE_BLOB, false, lenenc(h), fmt.Sprintf("BLOB %q", h)}
			}
		case 2:
			g.mark("param STRING text")
			s = strings.ToUpper(s) + "  "
			return binParam{mysql.MYSQL_TYPE_STRING, false, lenenc(s), fmt.Sprintf("STRING %q", s)}
		case 3:
			g.mark("param VAR_STRING too long")
			s += strings.Repeat("z", 40)
		}
		g.mark("param VAR_STRING text")
		return binParam{mysql.MYSQL_TYPE_VAR_STRING, false, lenenc(s), fmt.Sprintf("VAR_STRING %q", s)}
	}
}
