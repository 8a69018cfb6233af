package soakreport

import "testing"

func TestReplaceLatest(t *testing.T) {
	section := "## Latest run\n\nnew\n"
	tests := []struct{ doc, want string }{
		{"", section},
		{"# Soak\n\ntext\n\n## Latest run\n\nold\nmore\n", "# Soak\n\ntext\n\n" + section},
		{"# Soak\n\ntext", "# Soak\n\ntext\n\n" + section},
		{"## Latest run\nold\n", section},
		{"# Soak\n\n## Latest runs elsewhere\n", "# Soak\n\n## Latest runs elsewhere\n\n" + section}, // only the exact heading
	}
	for _, tt := range tests {
		if got := replaceLatest(tt.doc, section); got != tt.want {
			t.Errorf("replaceLatest(%q) = %q, want %q", tt.doc, got, tt.want)
		}
	}
}
