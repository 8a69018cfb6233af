package workload

import (
	"fmt"
	"testing"
)

func TestStmt(t *testing.T) {
	q, a := stmt(false, "UPDATE t SET n = %d WHERE id = %d", 5, 7)
	if q != "UPDATE t SET n = 5 WHERE id = 7" || a != nil {
		t.Errorf("text stmt = %q %v", q, a)
	}
	q, a = stmt(true, "UPDATE t SET n = %d WHERE id = %d", 5, 7)
	if q != "UPDATE t SET n = ? WHERE id = ?" || fmt.Sprint(a) != "[5 7]" {
		t.Errorf("prepared stmt = %q %v", q, a)
	}
}
