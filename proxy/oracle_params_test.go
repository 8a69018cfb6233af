package proxy

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/go-mysql-org/go-mysql/mysql"
)

// The plan oracle's prepared statements and their parameters of exact
// binary types.

// prepared is a statement with placeholders and parameters of exact
// binary types.
func (g *gen) prepared() (string, []binParam) {
	g.mark("prepared")
	switch g.ch.intn(9) {
	case 0, 1, 2:
		return "UPDATE sku SET stock = stock + 1 WHERE sku_id = ?", []binParam{g.intParam()}
	case 3:
		return "DELETE FROM sku WHERE sku_id IN (?, ?)", []binParam{g.intParam(), g.intParam()}
	case 4:
		return "INSERT INTO sku (sku_id, stock) VALUES (?, 1) ON DUPLICATE KEY UPDATE stock = stock + 1", []binParam{g.intParam()}
	case 5:
		return "UPDATE acct SET bal = bal + 1 WHERE name = ?", []binParam{g.strParam()}
	case 6:
		return "REPLACE INTO acct (name, bal) VALUES (?, 5)", []binParam{g.strParam()}
	case 7:
		return "UPDATE bin SET qty = qty + 1 WHERE shop_id = ? AND code = ?", []binParam{g.intParam(), g.strParam()}
	}
	g.mark("CALL")
	return "CALL oracle_bump(?)", []binParam{g.intParam()}
}

func lenenc(s string) []byte { return append(mysql.PutLengthEncodedInt(uint64(len(s))), s...) }

// intParam is a parameter for an integer key, of any binary type.
func (g *gen) intParam() binParam {
	small := []int64{7, 100, 200}
	n := skuKeys[g.ch.intn(len(skuKeys))]
	le := binary.LittleEndian
	switch g.ch.intn(17) {
	case 0:
		v := small[g.ch.intn(len(small))]
		g.mark("param TINY")
		return binParam{mysql.MYSQL_TYPE_TINY, v > 127, []byte{byte(v)}, fmt.Sprintf("TINY %d", v)}
	case 1:
		g.mark("param SHORT")
		return binParam{mysql.MYSQL_TYPE_SHORT, false, le.AppendUint16(nil, 30000), "SHORT 30000"}
	case 2:
		g.mark("param INT24")
		return binParam{mysql.MYSQL_TYPE_INT24, false, le.AppendUint32(nil, 70000), "INT24 70000"}
	case 3:
		g.mark("param LONG")
		return binParam{mysql.MYSQL_TYPE_LONG, g.chance(50), le.AppendUint32(nil, uint32(n)), fmt.Sprintf("LONG %d", n)}
	case 4:
		g.mark("param LONGLONG unsigned")
		return binParam{mysql.MYSQL_TYPE_LONGLONG, true, le.AppendUint64(nil, uint64(n)), fmt.Sprintf("LONGLONG UNSIGNED %d", n)}
	case 5:
		f := float64(n) + float64(g.ch.intn(2))*0.4
		g.mark("param FLOAT")
		return binParam{mysql.MYSQL_TYPE_FLOAT, false, le.AppendUint32(nil, math.Float32bits(float32(f))), fmt.Sprintf("FLOAT %g", f)}
	case 6:
		f := float64(n) + float64(g.ch.intn(3))*0.3
		g.mark("param DOUBLE")
		return binParam{mysql.MYSQL_TYPE_DOUBLE, false, le.AppendUint64(nil, math.Float64bits(f)), fmt.Sprintf("DOUBLE %g", f)}
	case 7:
		s := g.pick(fmt.Sprintf("%d", n), fmt.Sprintf("%d.00", n), fmt.Sprintf("%d.5", n))
		g.mark("param NEWDECIMAL")
		return binParam{mysql.MYSQL_TYPE_NEWDECIMAL, false, lenenc(s), "NEWDECIMAL " + s}
	case 8:
		g.mark("param DATE")
		return binParam{mysql.MYSQL_TYPE_DATE, false, []byte{4, 0xD0, 0x07, 10, 1}, "DATE 2000-10-01"}
	case 9:
		g.mark("param DATETIME")
		return binParam{mysql.MYSQL_TYPE_DATETIME, false, []byte{7, 0xD0, 0x07, 10, 1, 0, 0, 0}, "DATETIME 2000-10-01 00:00:00"}
	case 10:
		g.mark("param TIMESTAMP")
		return binParam{mysql.MYSQL_TYPE_TIMESTAMP, false, []byte{4, 0xD0, 0x07, 10, 1}, "TIMESTAMP 2000-10-01"}
	case 11:
		g.mark("param TIME")
		return binParam{mysql.MYSQL_TYPE_TIME, false, []byte{8, 0, 0, 0, 0, 0, 0, 10, 1}, "TIME 00:10:01"}
	case 12:
		g.mark("param YEAR")
		return binParam{mysql.MYSQL_TYPE_YEAR, false, le.AppendUint16(nil, 2001), "YEAR 2001"}
	case 13:
		s := g.pick(fmt.Sprint(n), fmt.Sprintf(" %d", n), fmt.Sprintf("%dabc", n), fmt.Sprintf("%d.0", n))
		g.mark("param VAR_STRING for an integer key")
		return binParam{mysql.MYSQL_TYPE_VAR_STRING, false, lenenc(s), fmt.Sprintf("VAR_STRING %q", s)}
	case 14:
		g.mark("param BLOB for an integer key")
		return binParam{mysql.MYSQL_TYPE_BLOB, false, lenenc(fmt.Sprint(n)), fmt.Sprintf("BLOB %q", fmt.Sprint(n))}
	case 15:
		v := small[g.ch.intn(len(small))]
		g.mark("param TINY")
		return binParam{mysql.MYSQL_TYPE_TINY, false, []byte{byte(v)}, fmt.Sprintf("TINY %d", int8(v))}
	}
	return binParam{mysql.MYSQL_TYPE_LONGLONG, false, le.AppendUint64(nil, uint64(n)), fmt.Sprintf("LONGLONG %d", n)}
}

// strParam is a parameter for a _ci string key.
func (g *gen) strParam() binParam {
	s := g.pick(acctKeys...)
	switch g.ch.intn(8) {
	case 0:
		s = strings.ToUpper(s)
		g.mark("param VAR_STRING upper case")
	case 1:
		s += "   "
		g.mark("param VAR_STRING trailing spaces")
	case 2:
		g.mark("param BLOB for a string key")
		return binParam{mysql.MYSQL_TYPE_BLOB, false, lenenc(s), fmt.Sprintf("BLOB %q", s)}
	case 3:
		g.mark("param LONGLONG for a string key")
		return binParam{mysql.MYSQL_TYPE_LONGLONG, false, binary.LittleEndian.AppendUint64(nil, 0), "LONGLONG 0"}
	case 4:
		g.mark("param STRING for a string key")
		return binParam{mysql.MYSQL_TYPE_STRING, false, lenenc(s), fmt.Sprintf("STRING %q", s)}
	}
	return binParam{mysql.MYSQL_TYPE_VAR_STRING, false, lenenc(s), fmt.Sprintf("VAR_STRING %q", s)}
}
