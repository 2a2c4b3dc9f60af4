package instancetype

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"flag"
	"io"
	"os"
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/joiner-autoscaler/joiner/internal/mototest"
)

var update = flag.Bool("update", false, "rewrite "+motoTestdata+" from moto's DescribeInstanceTypes")

// motoTestdata holds moto's DescribeInstanceTypes answer for us-east-1, as
// the SDK decoded it, so the allocatable table runs on EC2's own records.
const motoTestdata = "testdata/moto-describe-instance-types.json.gz"

func TestMain(m *testing.M) { os.Exit(mototest.Main(m)) }

// describeAll is every instance type moto describes, sorted by name.
func describeAll(t *testing.T, client *ec2.Client) []ec2types.InstanceTypeInfo {
	t.Helper()
	var infos []ec2types.InstanceTypeInfo
	pages := ec2.NewDescribeInstanceTypesPaginator(client, &ec2.DescribeInstanceTypesInput{})
	for pages.HasMorePages() {
		out, err := pages.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, out.InstanceTypes...)
	}
	sort.Slice(infos, func(i, j int) bool { return infos[i].InstanceType < infos[j].InstanceType })
	return infos
}

// encodeInfos writes the records as JSON with the SDK's field names, nulls
// left out.
func encodeInfos(infos []ec2types.InstanceTypeInfo) ([]byte, error) {
	raw, err := json.Marshal(infos)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	return json.MarshalIndent(dropNulls(doc), "", " ")
}

func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if x == nil {
				delete(v, k)
			} else {
				v[k] = dropNulls(x)
			}
		}
	case []any:
		for i, x := range v {
			v[i] = dropNulls(x)
		}
	}
	return v
}

func readInfos(t *testing.T, path string) []ec2types.InstanceTypeInfo {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if len(path) > 3 && path[len(path)-3:] == ".gz" {
		gz, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		r = gz
	}
	var infos []ec2types.InstanceTypeInfo
	if err := json.NewDecoder(r).Decode(&infos); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return infos
}

// TestMotoTestdata checks the checked-in records against moto's answer
// (so a moto upgrade that changes them is seen), and with -update rewrites
// them:
//
//	go test ./pkg/cloudprovider/aws/instancetype -run TestMotoTestdata -update
func TestMotoTestdata(t *testing.T) {
	live, err := encodeInfos(describeAll(t, mototest.Clients(t, "").EC2))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		var buf bytes.Buffer
		gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		gz.Header.Name = "moto-describe-instance-types.json"
		gz.Write(append(live, '\n'))
		gz.Close()
		if err := os.WriteFile(motoTestdata, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	stored, err := encodeInfos(readInfos(t, motoTestdata))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(live, stored) {
		t.Fatalf("moto's DescribeInstanceTypes no longer matches %s; if moto was upgraded on purpose, rerun with -update", motoTestdata)
	}
}
