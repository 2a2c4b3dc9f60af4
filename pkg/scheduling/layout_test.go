package scheduling

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSolverFilesAreSmall keeps the layout issue 20 asked for: each file of
// the solver is one concern a reader takes in at once, and a file past 500
// lines is a sign that a second concern has moved in.
func TestSolverFilesAreSmall(t *testing.T) {
	const maxLines = 500
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		if n := bytes.Count(b, []byte("\n")); n > maxLines {
			t.Errorf("%s has %d lines, over %d: move a concern of it into a file of its own", f, n, maxLines)
		}
	}
	if checked == 0 {
		t.Fatal("no source files found")
	}
}
