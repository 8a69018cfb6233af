package schemaword

import "testing"

func TestFollower(t *testing.T) {
	type step struct {
		version int64
		writer  string
		want    bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"baseline delivers nothing", []step{{3, "other", false}}},
		{"another's announcement", []step{{-1, "", false}, {0, "other", true}}},
		{"own announcement", []step{{4, "other", false}, {5, "me", false}}},
		{"own after another's, merged", []step{{4, "other", false}, {6, "me", true}}},
		{"unchanged", []step{{4, "other", false}, {4, "other", false}}},
		{"record recreated", []step{{7, "other", false}, {0, "me", true}}},
		{"record gone", []step{{7, "other", false}, {-1, "", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New("me")
			for i, s := range tc.steps {
				f.Seen(s.version, s.writer)
				got := false
				select {
				case <-f.C():
					got = true
				default:
				}
				if got != s.want {
					t.Fatalf("step %d (version %d by %q): delivered %v, want %v", i, s.version, s.writer, got, s.want)
				}
			}
		})
	}
}

// TestOwnJump: two announcements of this Locker read as one jump (the
// poll or the watch missed the middle one) deliver nothing; a jump with
// another's announcement inside delivers.
func TestOwnJump(t *testing.T) {
	for _, tc := range []struct {
		name string
		own  []int64
		seen int64
		by   string
		want bool
	}{
		{"two own", []int64{1}, 2, "me", false},
		{"three own", []int64{1, 2, 3}, 3, "me", false},
		{"another's in the middle", []int64{1}, 3, "me", true},
		{"another's last", []int64{1}, 2, "other", true},
		{"own unknown", nil, 2, "me", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := New("me")
			f.Seen(0, "other")
			for _, v := range tc.own {
				f.Own(v)
			}
			f.Seen(tc.seen, tc.by)
			got := false
			select {
			case <-f.C():
				got = true
			default:
			}
			if got != tc.want {
				t.Fatalf("own %v, then version %d by %q: delivered %v, want %v", tc.own, tc.seen, tc.by, got, tc.want)
			}
		})
	}
	f := New("me")
	f.Seen(0, "other")
	f.Own(1)
	f.Seen(1, "me")
	f.Seen(2, "me") // 1 was read already; 2 is the next own
	select {
	case <-f.C():
		t.Fatal("own announcements read one by one delivered")
	default:
	}
	if len(f.own) != 0 {
		t.Fatalf("own versions kept after they were read: %v", f.own)
	}
}

func TestSignalMerges(t *testing.T) {
	f := New("me")
	f.Signal()
	f.Signal()
	<-f.C()
	select {
	case <-f.C():
		t.Fatal("two signals while one was pending delivered twice")
	default:
	}
}

// TestOwnBeforeBaseline: a Locker that announces while its first read is
// still on its way (that read finds no record: -1) delivers nothing for
// its own announcements when the next read finds them.
func TestOwnBeforeBaseline(t *testing.T) {
	f := New("me")
	for v := int64(0); v < 5; v++ {
		f.Own(v)
	}
	f.Seen(-1, "")
	f.Seen(4, "me")
	select {
	case <-f.C():
		t.Fatal("the Locker heard its own announcements, made before its baseline read was recorded")
	default:
	}
	f.Seen(5, "other")
	select {
	case <-f.C():
	default:
		t.Fatal("another's announcement after them was not delivered")
	}
}
