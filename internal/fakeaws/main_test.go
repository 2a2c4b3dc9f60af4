package fakeaws_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/smithy-go"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/joiner-autoscaler/joiner/internal/localcluster"
	"github.com/joiner-autoscaler/joiner/pkg/cloudprovider/aws/awsclient"
)

const (
	clusterName = "demo"
	region      = "us-east-1"
)

var (
	cluster     *localcluster.Cluster
	fake        *fakeaws.Server
	callLogPath string
)

// TestMain shares one control plane and one endpoint (and so one moto) with
// every test of the package; tests that inject faults put them back.
func TestMain(m *testing.M) {
	code := localcluster.Main(m, &cluster, func(c *localcluster.Cluster) error {
		dir, err := os.MkdirTemp("", "fakeaws-test-")
		if err != nil {
			return err
		}
		callLogPath = filepath.Join(dir, "calls.jsonl")
		logFile, err := os.Create(callLogPath)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		fake, err = fakeaws.Start(ctx, fakeaws.Options{ClusterName: clusterName, Region: region, Kubeconfig: c.Kubeconfig, CallLog: logFile})
		if err != nil {
			return err
		}
		for k, v := range map[string]string{
			"AWS_ENDPOINT_URL": fake.URL(), "AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test",
			"AWS_REGION": region, "AWS_DEFAULT_REGION": region, "AWS_EC2_METADATA_DISABLED": "true",
			"AWS_CONFIG_FILE": filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "none"),
		} {
			os.Setenv(k, v)
		}
		return nil
	})
	if fake != nil {
		fake.Stop()
	}
	os.Exit(code)
}

// clients are the product's clients (awsclient, its retry policy), pointed
// at the endpoint by AWS_ENDPOINT_URL alone.
func clients(t *testing.T) *awsclient.Clients {
	t.Helper()
	c, err := awsclient.New(context.Background(), awsclient.Options{Region: region})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fastClients keep the product's retry policy (attempts, retryable errors,
// no retry budget) but wait at most a millisecond between attempts, so
// tests that fail every attempt on purpose stay quick.
func fastClients(t *testing.T) *awsclient.Clients {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(region), config.WithRetryer(func() aws.Retryer {
		return retry.AddWithMaxBackoffDelay(awsclient.NewRetryer(), time.Millisecond)
	}))
	if err != nil {
		t.Fatal(err)
	}
	return awsclient.FromConfig(cfg)
}

func setFaults(t *testing.T, f fakeaws.Faults) {
	t.Helper()
	if err := fake.SetFaults(f); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.SetFaults(fakeaws.Faults{}) })
}

func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// admin calls the endpoint's admin API and decodes the answer into out.
func admin(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, fake.URL()+path, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func ptr[T any](v T) *T { return &v }

// must fails the test on err: must(call())(t).
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func describe(v any) string { b, _ := json.Marshal(v); return fmt.Sprint(string(b)) }
