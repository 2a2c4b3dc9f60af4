package main

import "testing"

func TestSoftMemoryLimit(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		want   int64
		wantOK bool
	}{
		{"the chart's 300 MiB limit", map[string]string{"MEMORY_LIMIT": "314572800"}, 251658240, true},
		{"1 GiB", map[string]string{"MEMORY_LIMIT": "1073741824"}, 858993456, true},
		{"an explicit GOMEMLIMIT wins", map[string]string{"MEMORY_LIMIT": "314572800", "GOMEMLIMIT": "200MiB"}, 0, false},
		{"no limit", map[string]string{}, 0, false},
		{"not a number", map[string]string{"MEMORY_LIMIT": "300Mi"}, 0, false},
		{"zero", map[string]string{"MEMORY_LIMIT": "0"}, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := softMemoryLimit(func(k string) string { return tc.env[k] })
			if got != tc.want || ok != tc.wantOK {
				t.Fatalf("softMemoryLimit = %d, %v; want %d, %v", got, ok, tc.want, tc.wantOK)
			}
		})
	}
}
