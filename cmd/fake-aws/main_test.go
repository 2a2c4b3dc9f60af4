package main

import (
	"strings"
	"testing"
)

// TestBadFlags: bad input stops the command before anything starts, with
// the flag's name and the fix.
func TestBadFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, `required flag(s) "cluster-name" not set`},
		{[]string{"--cluster-name", "demo", "--insufficient-capacity", "m5.large:us-east-1a:reserved"}, "--insufficient-capacity"},
		{[]string{"--cluster-name", "demo", "--throttle-rate", "1.5", "--moto-server", "/nonexistent/moto_server"}, "throttleRate 1.5: must be between 0 and 1"},
		{[]string{"--cluster-name", "demo", "--lost-rate", "-0.1", "--moto-server", "/nonexistent/moto_server"}, "lostRate -0.1: must be between 0 and 1"},
		{[]string{"--cluster-name", "demo", "--throttle-rate", "0.6", "--lost-rate", "0.6", "--moto-server", "/nonexistent/moto_server"}, "throttleRate + errorRate + lostRate is 1.2"},
		{[]string{"--cluster-name", "demo", "--access-denied", "CreateFleet", "--moto-server", "/nonexistent/moto_server"}, "must be a service:Action pattern"},
		{[]string{"--cluster-name", "demo", "--kubeconfig", "", "--moto-server", "/nonexistent/moto_server"}, "pip install 'moto[server]'"},
	}
	for _, tt := range tests {
		cmd := newCommand()
		cmd.SetArgs(tt.args)
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("fake-aws %v: error %v, want one containing %q", tt.args, err, tt.want)
		}
	}
}
