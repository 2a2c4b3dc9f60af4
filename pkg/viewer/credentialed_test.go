package viewer

import (
	"context"
	"testing"

	"github.com/aws/smithy-go/logging"
)

// The viewer's AWS clients keep the SDK's warnings off the terminal: one
// written to standard error in the middle of the screen stays there, as
// the terminal UI repaints only the lines it changed.
func TestCredentialedClientsDiscardSDKWarnings(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "testing")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "testing")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	clients, err := credentialed(context.Background(), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := clients.Config.Logger.(logging.Nop); !ok {
		t.Errorf("the SDK logs through %T, want logging.Nop", clients.Config.Logger)
	}
}
