package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/joiner-autoscaler/joiner/pkg/convert"
	"github.com/spf13/cobra"
)

func newConvertCommand() *cobra.Command {
	var files []string
	var opts convert.Options
	var ignoreUnmappable bool
	cmd := &cobra.Command{
		Use:   "convert -f FILE...",
		Short: "Convert Karpenter v1alpha5/v1alpha1 and v1beta1 manifests to the v1 API",
		Long: `convert reads Provisioners (karpenter.sh/v1alpha5), AWSNodeTemplates
(karpenter.k8s.aws/v1alpha1), and v1beta1 NodePools and EC2NodeClasses, as
files or as "kubectl get -o yaml" output, and prints the v1 NodePools and
EC2NodeClasses on standard output as multi-document YAML. Other kinds pass
through; legacy do-not-evict and do-not-consolidate annotations on pods, pod
templates and nodes become karpenter.sh/do-not-disrupt.

Notes about what changed meaning go to standard error. A field with no v1
form is reported there too, naming the object and field, and the command
fails unless --ignore-unmappable, which drops the field. docs/migrate.md
lists every mapping.`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(files) == 0 {
				return fmt.Errorf("no manifests: pass -f FILE (or -f - for standard input)")
			}
			if !slices.Contains(convert.AMIFamilies, opts.DefaultAMIFamily) {
				return fmt.Errorf("--ami-family %q: use one of %s", opts.DefaultAMIFamily, strings.Join(convert.AMIFamilies, ", "))
			}
			var in []convert.Object
			for _, f := range files {
				objs, err := decodeFile(f, cmd.InOrStdin())
				if err != nil {
					return err
				}
				in = append(in, objs...)
			}
			res := convert.Convert(in, opts)
			stderr := cmd.ErrOrStderr()
			for _, n := range res.Notes {
				fmt.Fprintln(stderr, "note: "+n.String())
			}
			prefix := "unmappable: "
			if ignoreUnmappable {
				prefix = "warning: dropped: "
			}
			for _, u := range res.Unmappable {
				fmt.Fprintln(stderr, prefix+u.String())
			}
			if len(res.Unmappable) > 0 && !ignoreUnmappable {
				return fmt.Errorf("%d field(s) cannot be mapped to v1 (listed above); fix them in the input, or pass --ignore-unmappable to drop them", len(res.Unmappable))
			}
			return convert.Encode(cmd.OutOrStdout(), res.Objects)
		},
	}
	cmd.Flags().StringSliceVarP(&files, "filename", "f", nil, "manifest files (multi-document YAML or JSON, or kubectl get -o yaml output); - reads standard input")
	cmd.Flags().StringVar(&opts.Role, "role", "", "IAM role for converted EC2NodeClasses whose source names no instance profile (v1alpha1 used the global aws.defaultInstanceProfile)")
	cmd.Flags().StringVar(&opts.InstanceProfile, "instance-profile", "", "existing instance profile for converted EC2NodeClasses whose source names none; alternative to --role")
	cmd.Flags().StringVar(&opts.DefaultAMIFamily, "ami-family", "AL2", "AMI family for AWSNodeTemplates that name none (v1alpha1 defaulted to AL2, which EKS does not publish for Kubernetes 1.33+)")
	cmd.Flags().BoolVar(&opts.IgnoreDefaults, "ignore-defaults", false, "do not add the requirements v1alpha5 defaulted (linux, amd64, on-demand, categories c,m,r of generation > 2)")
	cmd.Flags().BoolVar(&ignoreUnmappable, "ignore-unmappable", false, "drop fields with no v1 form with a warning, instead of failing")
	return cmd
}

func decodeFile(path string, stdin io.Reader) ([]convert.Object, error) {
	if path == "-" {
		return convert.Decode("standard input", stdin)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return convert.Decode(path, f)
}
