package router

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestGTIDReached(t *testing.T) {
	tests := []struct {
		name      string
		pos, want string
		reached   bool
	}{
		{"same", "0-1-42", "0-1-42", true},
		{"ahead", "0-1-43", "0-1-42", true},
		{"behind", "0-1-41", "0-1-42", false},
		{"sequence compared as number not text", "0-1-100", "0-1-99", true},
		{"server id ignored", "0-2-42", "0-1-42", true},
		{"empty want", "0-1-1", "", true},
		{"empty pos, empty want", "", "", true},
		{"empty pos", "", "0-1-1", false},
		{"other domain only", "1-1-100", "0-1-1", false},
		{"multi domain all reached", "0-1-42,1-2-7", "0-1-40,1-2-7", true},
		{"multi domain one behind", "0-1-42,1-2-6", "0-1-40,1-2-7", false},
		{"want subset of domains", "0-1-42,1-2-7", "1-2-7", true},
		{"pos order irrelevant", "1-2-7,0-1-42", "0-1-42,1-2-7", true},
		{"blanks after comma", "0-1-42, 1-2-7", "1-2-7", true},
		{"max sequence", "0-1-18446744073709551615", "0-1-18446744073709551614", true},
		{"bad want", "0-1-42", "0-1-x", false},
		{"bad pos", "0-1", "0-1-1", false},
		{"duplicate domain in want", "0-1-42", "0-1-1,0-2-2", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := GTIDReached(tt.pos, tt.want); got != tt.reached {
				t.Errorf("GTIDReached(%q, %q) = %v, want %v", tt.pos, tt.want, got, tt.reached)
			}
		})
	}
}

func TestParseGTIDPosRejects(t *testing.T) {
	for _, in := range []string{
		"0-1", "0-1-2-3", "-1-2", "0--2", "0-1-", "a-1-2", "+0-1-2", "0-1-2,", ",0-1-2",
		"0-1-2,,1-1-2", "4294967296-1-2", "0-4294967296-2", "0-1-18446744073709551616",
		"0-1-2;DROP TABLE x", "0-1-2') OR ('1", "0-1-2 1-1-2", "0-1-2\x00", "0x1-1-2", "٣-1-2",
	} {
		t.Run(in, func(t *testing.T) {
			if _, err := ParseGTIDPos(in); !errors.Is(err, ErrBadGTID) {
				t.Errorf("ParseGTIDPos(%q) err = %v, want ErrBadGTID", in, err)
			}
			if q := WaitGTIDQuery(in, time.Second); q != "" {
				t.Errorf("WaitGTIDQuery(%q) = %q, want \"\"", in, q)
			}
		})
	}
}

func TestParseGTIDPos(t *testing.T) {
	tests := []struct{ in, canonical string }{
		{"", ""},
		{"0-1-42", "0-1-42"},
		{"1-2-7,0-1-42", "0-1-42,1-2-7"},
		{" 0-1-42 ,\n1-2-7 ", "0-1-42,1-2-7"},
		{"007-01-042", "7-1-42"},
		{"4294967295-4294967295-18446744073709551615", "4294967295-4294967295-18446744073709551615"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			p, err := ParseGTIDPos(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.String(); got != tt.canonical {
				t.Errorf("String() = %q, want %q", got, tt.canonical)
			}
		})
	}
}

func TestWaitGTIDQuery(t *testing.T) {
	tests := []struct {
		gtid    string
		timeout time.Duration
		want    string
	}{
		{"0-1-42", 50 * time.Millisecond, "SELECT MASTER_GTID_WAIT('0-1-42', 0.05)"},
		{"1-2-7, 0-1-42", 2 * time.Second, "SELECT MASTER_GTID_WAIT('0-1-42,1-2-7', 2)"},
		{"0-1-42", 0, "SELECT MASTER_GTID_WAIT('0-1-42', 0)"},
		{"0-1-42", -time.Second, "SELECT MASTER_GTID_WAIT('0-1-42', 0)"},
		{"0-1-42", time.Nanosecond, "SELECT MASTER_GTID_WAIT('0-1-42', 0.000000001)"},
		{"", time.Second, ""},
		{"0-1-42'", time.Second, ""},
	}
	for _, tt := range tests {
		t.Run(tt.gtid+"/"+tt.timeout.String(), func(t *testing.T) {
			if got := WaitGTIDQuery(tt.gtid, tt.timeout); got != tt.want {
				t.Errorf("WaitGTIDQuery(%q, %s) = %q, want %q", tt.gtid, tt.timeout, got, tt.want)
			}
		})
	}
}

// FuzzWaitGTIDQuery: whatever the input, the query is empty or holds only
// the fixed text, digits, dashes and commas between the quotes.
func FuzzWaitGTIDQuery(f *testing.F) {
	for _, s := range []string{"0-1-42", "0-1-42,1-2-7", "", "0-1-2'); DROP", " 1-1-1 , 2-2-2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		q := WaitGTIDQuery(in, 50*time.Millisecond)
		if q == "" {
			return
		}
		const pre, post = "SELECT MASTER_GTID_WAIT('", "', 0.05)"
		if !strings.HasPrefix(q, pre) || !strings.HasSuffix(q, post) {
			t.Fatalf("query %q has an unexpected shape", q)
		}
		inner := q[len(pre) : len(q)-len(post)]
		if strings.Trim(inner, "0123456789-,") != "" {
			t.Fatalf("query %q quotes more than digits, dashes and commas", q)
		}
		p, err := ParseGTIDPos(inner)
		if err != nil || p.String() != inner {
			t.Fatalf("quoted position %q does not round-trip: %v", inner, err)
		}
		if !GTIDReached(inner, in) || !GTIDReached(in, inner) {
			t.Fatalf("%q and its canonical form %q are not the same position", in, inner)
		}
	})
}

func TestGTIDPosMerge(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"", "", ""},
		{"0-1-5", "", "0-1-5"},
		{"", "0-1-5", "0-1-5"},
		{"0-1-5", "0-1-7", "0-1-7"},
		{"0-1-9", "0-2-7", "0-1-9"},
		{"1-1-3", "0-1-5", "0-1-5,1-1-3"},
		{"0-1-5,1-1-3", "1-2-4,2-1-1", "0-1-5,1-2-4,2-1-1"},
	} {
		a, err := ParseGTIDPos(c.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ParseGTIDPos(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.Merge(b).String(); got != c.want {
			t.Errorf("%q merged with %q: %q, want %q", c.a, c.b, got, c.want)
		}
		if a.String() != c.a && c.a != "" {
			t.Errorf("Merge changed its receiver to %q", a)
		}
	}
}
