package soakreport

import (
	"fmt"
	"os"
	"strings"
)

// latestHeading starts the generated section of the -out file.
const latestHeading = "## Latest run"

// replaceLatest returns doc with its "## Latest run" section (from that
// heading line to the end of the file) replaced by section; without one,
// section is appended.
func replaceLatest(doc, section string) string {
	off := 0
	for _, line := range strings.SplitAfter(doc, "\n") {
		if strings.TrimRight(line, " \r\n") == latestHeading {
			return doc[:off] + section
		}
		off += len(line)
	}
	if doc != "" && !strings.HasSuffix(doc, "\n") {
		doc += "\n"
	}
	if doc != "" {
		doc += "\n"
	}
	return doc + section
}

// WriteLatest rewrites path's "## Latest run" section with section (see
// Report.Markdown), keeping what is above it; a missing file is created
// with only the section.
func WriteLatest(path, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("report: %w", err)
	}
	if err := os.WriteFile(path, []byte(replaceLatest(string(old), section)), 0o644); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
