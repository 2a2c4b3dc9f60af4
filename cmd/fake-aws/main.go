// Command fake-aws is a local AWS endpoint for running Joiner's AWS provider
// without an AWS account: moto behind a thin front that adds pricing, the
// EKS node images' public parameters, faults, a call log, and instances that
// boot into Nodes of a local cluster. See docs/fake-aws.md.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"github.com/joiner-autoscaler/joiner/internal/fakeaws"
	"github.com/spf13/cobra"
	"go.uber.org/zap"
)

func main() {
	if err := newCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "fake-aws: "+err.Error())
		os.Exit(1)
	}
}

func newCommand() *cobra.Command {
	var (
		opts                fakeaws.Options
		callLog             string
		capacity, denied    []string
		latency, describeMs time.Duration
	)
	cmd := &cobra.Command{
		Use:   "fake-aws --cluster-name NAME [--kubeconfig FILE] [--listen ADDR]",
		Short: "A local AWS endpoint (moto behind a thin front) for Joiner's AWS provider",
		Long: `fake-aws starts moto_server as a child process and serves one endpoint in front
of it. Point the AWS SDK or the AWS CLI at it with AWS_ENDPOINT_URL=<the printed URL>
(and AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test). Instances that boot get
a Node in the --kubeconfig cluster, built from their user data.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, c := range capacity {
				ic, err := fakeaws.ParseCapacity(c)
				if err != nil {
					return fmt.Errorf("--insufficient-capacity: %w", err)
				}
				opts.Faults.InsufficientCapacity = append(opts.Faults.InsufficientCapacity, ic)
			}
			opts.Faults.AccessDenied = denied
			opts.Faults.Latency.Duration = latency
			opts.Faults.DescribeDelay.Duration = describeMs
			if callLog != "" {
				f, err := os.OpenFile(callLog, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return fmt.Errorf("--call-log: %w", err)
				}
				defer f.Close()
				opts.CallLog = f
			}
			z, err := zap.NewDevelopment()
			if err != nil {
				return err
			}
			opts.Log = zapr.NewLogger(z)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			s, err := fakeaws.Start(ctx, opts)
			if err != nil {
				return err
			}
			defer s.Stop()
			fmt.Printf("AWS_ENDPOINT_URL=%s\n", s.URL())
			if admin := s.AdminCredentials(); admin.AccessKeyID != "" {
				fmt.Printf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s\n", admin.AccessKeyID, admin.SecretAccessKey)
			}
			<-ctx.Done()
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ClusterName, "cluster-name", "", "the cluster's name: tags the seeded subnets and security group (karpenter.sh/discovery), names the EKS cluster, node role and queue (required)")
	f.StringVar(&opts.Region, "region", "us-east-1", "the region seeded and watched for instances")
	f.StringVar(&opts.Kubeconfig, "kubeconfig", os.Getenv("KUBECONFIG"), "the cluster instances join as Nodes; empty: no Nodes")
	f.StringVar(&opts.Listen, "listen", "127.0.0.1:4566", "address to serve the endpoint on")
	f.StringVar(&opts.MotoServer, "moto-server", "moto_server", "the moto_server program")
	f.StringVar(&callLog, "call-log", "", "append every call to this file as JSON lines")
	f.Float64Var(&opts.Faults.ThrottleRate, "throttle-rate", 0, "share of calls (0-1) answered with the service's throttling error")
	f.Float64Var(&opts.Faults.ErrorRate, "error-rate", 0, "share of calls (0-1) answered with a 5xx before they reach moto")
	f.Float64Var(&opts.Faults.LostRate, "lost-rate", 0, "share of calls (0-1) moto carries out whose answer is then replaced with a 5xx")
	f.Uint64Var(&opts.Faults.Seed, "fault-seed", 1, "seed of the fault draws")
	f.DurationVar(&latency, "latency", 0, "latency added to every call, e.g. 50ms")
	f.StringArrayVar(&capacity, "insufficient-capacity", nil, "offering out of capacity, as instance-type:zone:capacity-type (any part empty or * for all); repeatable")
	f.StringArrayVar(&denied, "access-denied", nil, "service:Action answered with AccessDenied (EC2: UnauthorizedOperation), e.g. ec2:CreateFleet or iam:*; repeatable")
	f.DurationVar(&describeMs, "describe-delay", 0, "new instances are missing from DescribeInstances for this long (eventual consistency)")
	f.StringSliceVar(&opts.KubernetesVersions, "kubernetes-versions", fakeaws.DefaultKubernetesVersions, "Kubernetes versions whose node images are published")
	f.StringVar(&opts.ServiceCIDR, "service-cidr", "10.96.0.0/16", "the cluster's service CIDR, as DescribeCluster reports it")
	f.Float64Var(&opts.MemoryOverheadPercent, "memory-overhead-percent", 0, "percent of an instance's memory its Node does not report (what the hypervisor and kernel keep)")
	f.BoolVar(&opts.IAMEnforce, "iam-enforce", false, "authorize every call as AWS would, with the signing identity's IAM policies and their conditions; prints the administrator's AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, and seeds no node role or queue (the guide's stack makes them)")
	f.StringVar(&opts.IAMSimulateModules, "iam-simulate-modules", os.Getenv("JOINER_IAMSIM_MODULES"), "node_modules of the IAM evaluator for --iam-enforce (hack/setup.sh installs it and prints iamsim=...)")
	_ = cmd.MarkFlagRequired("cluster-name")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see %s --help)", err, strings.Fields(c.Use)[0])
	})
	return cmd
}
