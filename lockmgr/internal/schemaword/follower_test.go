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
