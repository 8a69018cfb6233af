package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/go-mysql-org/go-mysql/mysql"
)

var errBadParams = errors.New("proxy: malformed COM_STMT_EXECUTE parameters")

// executeParams decodes the parameter values of a COM_STMT_EXECUTE payload
// the way the binary protocol defines them: nil for NULL, int64 or uint64
// for integers, float64 for FLOAT/DOUBLE, []byte for strings, decimals,
// temporal values (as text) and everything else. types are the 2-byte
// parameter types in force (sent now or remembered from an earlier
// execute); long holds values sent with COM_STMT_SEND_LONG_DATA, which the
// packet itself does not carry.
func executeParams(p []byte, n int, types []byte, long map[int][]byte) ([]any, error) {
	if n == 0 {
		return nil, nil
	}
	if len(types) < 2*n {
		return nil, errBadParams
	}
	nullStart := 10
	pos := nullStart + (n+7)/8
	if pos >= len(p) {
		return nil, errBadParams
	}
	nulls := p[nullStart:pos]
	if p[pos] == 1 {
		pos += 1 + 2*n
	} else {
		pos++
	}
	out := make([]any, n)
	for i := 0; i < n; i++ {
		if nulls[i/8]&(1<<(i%8)) != 0 {
			continue
		}
		if v, ok := long[i]; ok {
			out[i] = v
			continue
		}
		v, next, err := binaryValue(p, pos, types[2*i], types[2*i+1]&0x80 != 0)
		if err != nil {
			return nil, fmt.Errorf("%w: parameter %d: %v", errBadParams, i, err)
		}
		out[i], pos = v, next
	}
	return out, nil
}

// binaryValue decodes one binary-protocol value of type t at p[pos:].
func binaryValue(p []byte, pos int, t byte, unsigned bool) (any, int, error) {
	need := func(k int) error {
		if pos+k > len(p) {
			return errShortPacket
		}
		return nil
	}
	switch t {
	case mysql.MYSQL_TYPE_NULL:
		return nil, pos, nil
	case mysql.MYSQL_TYPE_TINY:
		if err := need(1); err != nil {
			return nil, pos, err
		}
		if unsigned {
			return uint64(p[pos]), pos + 1, nil
		}
		return int64(int8(p[pos])), pos + 1, nil
	case mysql.MYSQL_TYPE_SHORT, mysql.MYSQL_TYPE_YEAR:
		if err := need(2); err != nil {
			return nil, pos, err
		}
		v := binary.LittleEndian.Uint16(p[pos:])
		if unsigned {
			return uint64(v), pos + 2, nil
		}
		return int64(int16(v)), pos + 2, nil
	case mysql.MYSQL_TYPE_LONG, mysql.MYSQL_TYPE_INT24:
		if err := need(4); err != nil {
			return nil, pos, err
		}
		v := binary.LittleEndian.Uint32(p[pos:])
		if unsigned {
			return uint64(v), pos + 4, nil
		}
		return int64(int32(v)), pos + 4, nil
	case mysql.MYSQL_TYPE_LONGLONG:
		if err := need(8); err != nil {
			return nil, pos, err
		}
		v := binary.LittleEndian.Uint64(p[pos:])
		if unsigned {
			return v, pos + 8, nil
		}
		return int64(v), pos + 8, nil
	case mysql.MYSQL_TYPE_FLOAT:
		if err := need(4); err != nil {
			return nil, pos, err
		}
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(p[pos:]))), pos + 4, nil
	case mysql.MYSQL_TYPE_DOUBLE:
		if err := need(8); err != nil {
			return nil, pos, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(p[pos:])), pos + 8, nil
	case mysql.MYSQL_TYPE_DATE, mysql.MYSQL_TYPE_DATETIME, mysql.MYSQL_TYPE_TIMESTAMP:
		return binaryDateTime(p, pos)
	case mysql.MYSQL_TYPE_TIME:
		return binaryTime(p, pos)
	default:
		s, next, err := readLenEncString(p, pos)
		if err != nil {
			return nil, pos, err
		}
		return append([]byte(nil), s...), next, nil
	}
}

// binaryDateTime decodes a DATE/DATETIME/TIMESTAMP value into MySQL's text form.
func binaryDateTime(p []byte, pos int) (any, int, error) {
	if pos >= len(p) {
		return nil, pos, errShortPacket
	}
	n := int(p[pos])
	pos++
	if pos+n > len(p) || (n != 0 && n != 4 && n != 7 && n != 11) {
		return nil, pos, errShortPacket
	}
	b := p[pos : pos+n]
	var y, mo, d, h, mi, s, us int
	if n >= 4 {
		y, mo, d = int(binary.LittleEndian.Uint16(b)), int(b[2]), int(b[3])
	}
	if n >= 7 {
		h, mi, s = int(b[4]), int(b[5]), int(b[6])
	}
	if n == 11 {
		us = int(binary.LittleEndian.Uint32(b[7:]))
	}
	text := fmt.Sprintf("%04d-%02d-%02d %02d:%02d:%02d", y, mo, d, h, mi, s)
	if us != 0 {
		text += fmt.Sprintf(".%06d", us)
	}
	return []byte(text), pos + n, nil
}

// binaryTime decodes a TIME value into MySQL's text form.
func binaryTime(p []byte, pos int) (any, int, error) {
	if pos >= len(p) {
		return nil, pos, errShortPacket
	}
	n := int(p[pos])
	pos++
	if pos+n > len(p) || (n != 0 && n != 8 && n != 12) {
		return nil, pos, errShortPacket
	}
	if n == 0 {
		return []byte("00:00:00"), pos, nil
	}
	b := p[pos : pos+n]
	sign := ""
	if b[0] == 1 {
		sign = "-"
	}
	days := int(binary.LittleEndian.Uint32(b[1:]))
	text := fmt.Sprintf("%s%02d:%02d:%02d", sign, days*24+int(b[5]), b[6], b[7])
	if n == 12 {
		if us := binary.LittleEndian.Uint32(b[8:]); us != 0 {
			text += fmt.Sprintf(".%06d", us)
		}
	}
	return []byte(text), pos + n, nil
}
