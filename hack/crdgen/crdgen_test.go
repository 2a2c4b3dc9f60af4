package main

import (
	"path/filepath"
	"testing"
)

// TestGeneratedFilesUpToDate fails when the committed deepcopy functions or
// CRDs differ from what the API types generate; `make generate` fixes it.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if err := run(root, true); err != nil {
		t.Fatal(err)
	}
}
