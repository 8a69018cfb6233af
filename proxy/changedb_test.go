package proxy

import "testing"

// TestMayChangeDB: a USE is found wherever MariaDB would run one (after
// comments, in an executable comment, after ';', any white space or
// quoting of the name), in any reading the text's bytes allow, and not
// where it is inside a literal or part of another word.
func TestMayChangeDB(t *testing.T) {
	for _, c := range []struct {
		q    string
		want bool
	}{
		{"USE shop", true},
		{"  use `shop`", true},
		{"USE\rshop", true},
		{"USE\tshop", true},
		{"SELECT 1; USE shop", true},
		{"/* c */ USE shop", true},
		{"# c\nUSE shop", true},
		{"-- c\nuse shop", true},
		{"/*!USE shop*/", true},
		{"/*M!100000 USE shop */", true},
		// NO_BACKSLASH_ESCAPES makes '\' a whole string: the USE then runs.
		{`SELECT '\'; USE shop; -- '`, true},
		{"SELECT 'x; USE shop'", false},
		{"SELECT user FROM users", false},
		{"SELECT * FROM users WHERE cause = 1; SELECT 'use'", false},
		{"x;USE shop", true},
		{"SELECT 1 -- USE shop", false},
		{"USEshop", false},
		{"SELECT `use`", false},
		{"", false},
	} {
		if got := mayChangeDB([]byte(c.q)); got != c.want {
			t.Errorf("mayChangeDB(%q) = %v, want %v", c.q, got, c.want)
		}
	}
}
