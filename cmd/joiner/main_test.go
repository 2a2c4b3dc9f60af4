package main

import (
	"strings"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    int64
		wantOK  bool
		wantErr bool
	}{
		{"the chart's 300 MiB limit", map[string]string{"MEMORY_LIMIT": "314572800"}, 220200960, true, false},
		{"1 GiB", map[string]string{"MEMORY_LIMIT": "1073741824"}, 751619274, true, false},
		{"an explicit GOMEMLIMIT wins", map[string]string{"MEMORY_LIMIT": "314572800", "GOMEMLIMIT": "200MiB"}, 0, false, false},
		{"no limit", map[string]string{}, 0, false, false},
		{"not a count of bytes: refused", map[string]string{"MEMORY_LIMIT": "300Mi"}, 0, false, true},
		{"negative: refused", map[string]string{"MEMORY_LIMIT": "-1"}, 0, false, true},
		{"zero", map[string]string{"MEMORY_LIMIT": "0"}, 0, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := softMemoryLimit(func(k string) string { return tc.env[k] })
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "MEMORY_LIMIT") {
				t.Fatalf("error %q does not name MEMORY_LIMIT", err)
			}
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("softMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
