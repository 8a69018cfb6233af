package locktest

import (
	"context"
	"testing"
	"time"

	"github.com/lockproxy/lockproxy/lockmgr"
)

// testSchemaWord: on a backend that carries schema-change announcements,
// each of two Lockers hears the other's announcement. A Locker starts
// following in the background, so an announcement made before the other
// follows may go unheard: each side announces until the other hears, on
// a generous deadline.
func testSchemaWord(t *testing.T, b Backend) {
	ls := lockers(t, b, 2)
	as := make([]lockmgr.SchemaAnnouncer, len(ls))
	for i, l := range ls {
		a, ok := l.(lockmgr.SchemaAnnouncer)
		if !ok {
			t.Skipf("%T carries no schema-change announcements", l)
		}
		as[i] = a
	}
	for _, dir := range [][2]int{{0, 1}, {1, 0}} {
		from, to := as[dir[0]], as[dir[1]]
		heard := false
		for deadline := time.Now().Add(30 * time.Second); !heard && time.Now().Before(deadline); {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := from.AnnounceSchemaChange(ctx)
			cancel()
			if err != nil {
				t.Fatalf("Locker %d: AnnounceSchemaChange: %v", dir[0], err)
			}
			select {
			case <-to.SchemaChanges():
				heard = true
			case <-time.After(500 * time.Millisecond):
			}
		}
		if !heard {
			t.Fatalf("Locker %d never heard Locker %d's schema-change announcements in 30s", dir[1], dir[0])
		}
	}
}

// testSchemaWordOwn: a Locker's own announcements, however close
// together (a poll or a watch that reads two of them as one jump), are
// never delivered to it: an instance that ran DDL must not re-read the
// schema for its own word, nor count it as another's.
func testSchemaWordOwn(t *testing.T, b Backend) {
	l := lockers(t, b, 1)[0]
	a, ok := l.(lockmgr.SchemaAnnouncer)
	if !ok {
		t.Skipf("%T carries no schema-change announcements", l)
	}
	for round := 0; round < 5; round++ {
		for i := 0; i < 5; i++ {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err := a.AnnounceSchemaChange(ctx)
			cancel()
			if err != nil {
				t.Fatalf("AnnounceSchemaChange: %v", err)
			}
		}
		select {
		case <-a.SchemaChanges():
			t.Fatalf("round %d: the Locker heard its own announcements", round)
		case <-time.After(300 * time.Millisecond):
		}
	}
}
