package proxy

import (
	"github.com/go-mysql-org/go-mysql/mysql"
)

// writeResult answers the current command with a text result set that
// lockproxy makes itself (all columns VARCHAR, NULL for nil).
func (s *session) writeResult(columns []string, rows [][]*string) error {
	seq := byte(1)
	var err error
	if seq, err = s.cw.writePacket(seq, appendLenEncInt(nil, uint64(len(columns)))); err != nil {
		return err
	}
	for _, c := range columns {
		if seq, err = s.cw.writePacket(seq, columnDef(c)); err != nil {
			return err
		}
	}
	deprecate := s.caps&mysql.CLIENT_DEPRECATE_EOF != 0
	if !deprecate {
		if seq, err = s.cw.writePacket(seq, eofPayload(s.status, 0)); err != nil {
			return err
		}
	}
	for _, r := range rows {
		var b []byte
		for _, v := range r {
			if v == nil {
				b = append(b, 0xfb)
			} else {
				b = appendLenEncString(b, *v)
			}
		}
		if seq, err = s.cw.writePacket(seq, b); err != nil {
			return err
		}
	}
	end := eofPayload(s.status, 0)
	if deprecate {
		end = okPayload(0, 0, s.status, 0, s.caps&mysql.CLIENT_SESSION_TRACK != 0)
		end[0] = mysql.EOF_HEADER
	}
	if _, err = s.cw.writePacket(seq, end); err != nil {
		return err
	}
	return s.cw.flush()
}

// columnDef encodes a Protocol::ColumnDefinition41 for a VARCHAR column.
func columnDef(name string) []byte {
	b := appendLenEncString(nil, "def")
	b = appendLenEncString(b, "") // schema
	b = appendLenEncString(b, "") // table
	b = appendLenEncString(b, "") // org_table
	b = appendLenEncString(b, name)
	b = appendLenEncString(b, name)
	b = append(b, 0x0c)
	b = append(b, 45, 0)                       // utf8mb4_general_ci
	b = append(b, 0x00, 0x00, 0x01, 0x00)      // column length 65536
	b = append(b, mysql.MYSQL_TYPE_VAR_STRING) // type
	b = append(b, 0, 0)                        // flags
	b = append(b, 0)                           // decimals
	return append(b, 0, 0)                     // filler
}
