package convert

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A row gives input manifests and what the output must hold: values at
// paths ("Kind/name spec.x.y" → JSON), paths that must be absent, and
// substrings of the notes and unmappable findings (each must match one;
// with wantUnmappable nil there must be none).
type row struct {
	name           string
	in             string
	opts           Options
	want           map[string]string
	absent         []string
	wantNotes      []string
	wantUnmappable []string
	// wantObjects is the kind/name list of the output, in order, when set.
	wantObjects []string
}

const template = `
apiVersion: karpenter.k8s.aws/v1alpha1
kind: AWSNodeTemplate
metadata: {name: default}
spec:
  subnetSelector: {karpenter.sh/discovery: demo}
  securityGroupSelector: {karpenter.sh/discovery: demo}
  instanceProfile: KarpenterNodeInstanceProfile-demo
`

const sel = "subnetSelector: {k: v}\nsecurityGroupSelector: {k: v}\ninstanceProfile: p\n"

func TestConvert(t *testing.T) {
	rows := []row{
		// Provisioner → NodePool.
		{name: "ttlSecondsAfterEmpty becomes WhenEmpty with consolidateAfter",
			in:   provisioner("ttlSecondsAfterEmpty: 120"),
			want: map[string]string{"NodePool/default spec.disruption": `{"consolidationPolicy":"WhenEmpty","consolidateAfter":"2m"}`}},
		{name: "ttlSecondsAfterEmpty that is not whole minutes stays in seconds",
			in:   provisioner("ttlSecondsAfterEmpty: 30"),
			want: map[string]string{"NodePool/default spec.disruption.consolidateAfter": `"30s"`}},
		{name: "consolidation.enabled becomes WhenEmptyOrUnderutilized",
			in:   provisioner("consolidation: {enabled: true}"),
			want: map[string]string{"NodePool/default spec.disruption": `{"consolidationPolicy":"WhenEmptyOrUnderutilized","consolidateAfter":"0s"}`}},
		{name: "neither removes nothing: consolidateAfter Never",
			in:        provisioner("consolidation: {enabled: false}"),
			want:      map[string]string{"NodePool/default spec.disruption": `{"consolidationPolicy":"WhenEmpty","consolidateAfter":"Never"}`},
			wantNotes: []string{"consolidateAfter is Never"}},
		{name: "ttlSecondsUntilExpired becomes template expireAfter",
			in:     provisioner("ttlSecondsUntilExpired: 2592000"),
			want:   map[string]string{"NodePool/default spec.template.spec.expireAfter": `"720h"`},
			absent: []string{"NodePool/default spec.disruption.expireAfter"}},
		{name: "no ttlSecondsUntilExpired never expired: expireAfter Never",
			in:   provisioner(""),
			want: map[string]string{"NodePool/default spec.template.spec.expireAfter": `"Never"`}},
		{name: "providerRef becomes nodeClassRef with group and kind",
			in:   provisioner(""),
			want: map[string]string{"NodePool/default spec.template.spec.nodeClassRef": `{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}`}},
		{name: "labels, annotations, taints, startup taints, limits and weight are carried",
			in: provisioner(`
labels: {team: a}
annotations: {example.com/owner: a}
taints: [{key: dedicated, value: a, effect: NoSchedule}]
startupTaints: [{key: agent-not-ready, effect: NoExecute}]
limits: {resources: {cpu: 1000, memory: 1000Gi}}
weight: 50`),
			want: map[string]string{
				"NodePool/default spec.template.metadata":           `{"labels":{"team":"a"},"annotations":{"example.com/owner":"a"}}`,
				"NodePool/default spec.template.spec.taints":        `[{"key":"dedicated","value":"a","effect":"NoSchedule"}]`,
				"NodePool/default spec.template.spec.startupTaints": `[{"key":"agent-not-ready","effect":"NoExecute"}]`,
				"NodePool/default spec.limits":                      `{"cpu":1000,"memory":"1000Gi"}`,
				"NodePool/default spec.weight":                      `50`,
			}},
		{name: "restricted template labels are dropped with a note",
			in:   provisioner(`labels: {team: a, karpenter.sh/capacity-type: spot, karpenter.sh/custom: x, kubernetes.io/hostname: h, karpenter.k8s.aws/instance-pods: "10"}`),
			want: map[string]string{"NodePool/default spec.template.metadata.labels": `{"team":"a","karpenter.sh/capacity-type":"spot"}`},
			wantNotes: []string{`spec.labels[karpenter.sh/custom]: dropped: label domain "karpenter.sh" is restricted`,
				`spec.labels[kubernetes.io/hostname]: dropped: label "kubernetes.io/hostname" is restricted`,
				`spec.labels[karpenter.k8s.aws/instance-pods]: dropped: label domain "karpenter.k8s.aws" is restricted`}},
		{name: "restricted requirement keys are dropped with a note",
			in: provisioner(`requirements:
- {key: karpenter.sh/provisioner-name, operator: Exists}
- {key: karpenter.k8s.aws/instance-pods, operator: Gt, values: ["10"]}
- {key: karpenter.k8s.aws/instance-size, operator: NotIn, values: [nano]}`),
			opts:      Options{IgnoreDefaults: true},
			want:      map[string]string{"NodePool/default spec.template.spec.requirements": `[{"key":"karpenter.k8s.aws/instance-size","operator":"NotIn","values":["nano"]}]`},
			wantNotes: []string{"karpenter.sh/provisioner-name is gone in v1", `requirement on karpenter.k8s.aws/instance-pods: label domain "karpenter.k8s.aws" is restricted`}},
		{name: "do-not-evict and do-not-consolidate on the template become do-not-disrupt",
			in:        provisioner(`annotations: {karpenter.sh/do-not-consolidate: "true", karpenter.sh/do-not-evict: "true"}`),
			want:      map[string]string{"NodePool/default spec.template.metadata.annotations": `{"karpenter.sh/do-not-disrupt":"true"}`},
			wantNotes: []string{"[karpenter.sh/do-not-evict]: renamed karpenter.sh/do-not-disrupt", "[karpenter.sh/do-not-consolidate]: dropped: karpenter.sh/do-not-disrupt is already set"}},
		{name: "v1alpha5's default requirements are added",
			in: provisioner(""),
			want: map[string]string{"NodePool/default spec.template.spec.requirements": `[
				{"key":"kubernetes.io/os","operator":"In","values":["linux"]},
				{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]},
				{"key":"karpenter.sh/capacity-type","operator":"In","values":["on-demand"]},
				{"key":"karpenter.k8s.aws/instance-category","operator":"In","values":["c","m","r"]},
				{"key":"karpenter.k8s.aws/instance-generation","operator":"Gt","values":["2"]}]`},
			wantNotes: []string{"added v1alpha5's defaults"}},
		{name: "defaults are not added where the Provisioner constrained the key or a label sets it",
			in: provisioner(`labels: {kubernetes.io/arch: arm64}
requirements:
- {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
- {key: karpenter.k8s.aws/instance-family, operator: In, values: [m6g]}
- {key: kubernetes.io/os, operator: In, values: [linux]}`),
			want: map[string]string{"NodePool/default spec.template.spec.requirements": `[
				{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot"]},
				{"key":"karpenter.k8s.aws/instance-family","operator":"In","values":["m6g"]},
				{"key":"kubernetes.io/os","operator":"In","values":["linux"]}]`}},
		{name: "--ignore-defaults adds none",
			in:   provisioner(""),
			opts: Options{IgnoreDefaults: true},
			want: map[string]string{"NodePool/default spec.template.spec.requirements": `[]`}},
		{name: "instance-type values that are categories become an instance-category requirement",
			in:        provisioner(`requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [c, t, m]}]`),
			opts:      Options{IgnoreDefaults: true},
			want:      map[string]string{"NodePool/default spec.template.spec.requirements": `[{"key":"karpenter.k8s.aws/instance-category","operator":"In","values":["c","t","m"]}]`},
			wantNotes: []string{"values c,t,m are instance categories, not instance types"}},
		{name: "instance-type values that are families become an instance-family requirement",
			in:        provisioner(`requirements: [{key: node.kubernetes.io/instance-type, operator: NotIn, values: [t2, c4]}]`),
			opts:      Options{IgnoreDefaults: true},
			want:      map[string]string{"NodePool/default spec.template.spec.requirements": `[{"key":"karpenter.k8s.aws/instance-family","operator":"NotIn","values":["t2","c4"]}]`},
			wantNotes: []string{"instance families"}},
		{name: "instance-type values that mix types and categories are kept, with a note",
			in:        provisioner(`requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large, c]}]`),
			opts:      Options{IgnoreDefaults: true},
			want:      map[string]string{"NodePool/default spec.template.spec.requirements": `[{"key":"node.kubernetes.io/instance-type","operator":"In","values":["m5.large","c"]}]`},
			wantNotes: []string{"mix kinds (category c; type m5.large)"}},
		{name: "real instance types are left alone",
			in:        provisioner(`requirements: [{key: beta.kubernetes.io/instance-type, operator: In, values: [m5.large, c5.xlarge]}]`),
			opts:      Options{IgnoreDefaults: true},
			want:      map[string]string{"NodePool/default spec.template.spec.requirements": `[{"key":"node.kubernetes.io/instance-type","operator":"In","values":["m5.large","c5.xlarge"]}]`},
			wantNotes: []string{"deprecated name of node.kubernetes.io/instance-type"}},
		{name: "kubeletConfiguration moves to the referenced EC2NodeClass",
			in:        provisioner("kubeletConfiguration: {maxPods: 20, systemReserved: {cpu: 100m}, containerRuntime: containerd}"),
			want:      map[string]string{"EC2NodeClass/default spec.kubelet": `{"maxPods":20,"systemReserved":{"cpu":"100m"}}`},
			absent:    []string{"NodePool/default spec.template.spec.kubelet"},
			wantNotes: []string{"containerRuntime: dropped"}},
		{name: "a container runtime other than containerd is unmappable",
			in:             provisioner("kubeletConfiguration: {containerRuntime: dockerd}"),
			wantUnmappable: []string{`Provisioner/default: spec.kubeletConfiguration.containerRuntime: "dockerd"`}},
		{name: "NodePools sharing a class with different kubelets get a copy of the class each",
			in: provisioner("kubeletConfiguration: {maxPods: 20}") + `---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: big}
spec:
  providerRef: {name: default}
  kubeletConfiguration: {maxPods: 110}
---
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: same}
spec:
  providerRef: {name: default}
  kubeletConfiguration: {maxPods: 20}
`,
			wantObjects: []string{"NodePool/default", "EC2NodeClass/default", "EC2NodeClass/default-big", "NodePool/big", "NodePool/same"},
			want: map[string]string{
				"EC2NodeClass/default spec.kubelet":                  `{"maxPods":20}`,
				"EC2NodeClass/default-big spec.kubelet":              `{"maxPods":110}`,
				"EC2NodeClass/default-big spec.subnetSelectorTerms":  `[{"tags":{"karpenter.sh/discovery":"demo"}}]`,
				"NodePool/big spec.template.spec.nodeClassRef.name":  `"default-big"`,
				"NodePool/same spec.template.spec.nodeClassRef.name": `"default"`,
			},
			wantNotes: []string{"Provisioner/big: spec.kubeletConfiguration: kubelet settings differ from other NodePools of EC2NodeClass default; v1 keeps them on the class, so NodePool(s) big now use a copy of it, EC2NodeClass default-big"}},
		{name: "kubelet settings with no EC2NodeClass among the inputs are unmappable",
			in: `
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  providerRef: {name: elsewhere}
  kubeletConfiguration: {maxPods: 20}`,
			wantUnmappable: []string{"Provisioner/default: spec.kubeletConfiguration: v1 keeps kubelet settings on the EC2NodeClass, and elsewhere is not among the inputs"}},
		{name: "kubelet settings of a Provisioner without providerRef are unmappable",
			in:             "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: default}\nspec: {kubeletConfiguration: {maxPods: 20}}\n",
			wantUnmappable: []string{"Provisioner/default: spec.providerRef: missing", "Provisioner/default: spec.kubeletConfiguration: v1 keeps kubelet settings on the EC2NodeClass, and this object references none"}},
		{name: "an inline provider block is unmappable",
			in: `
apiVersion: karpenter.sh/v1alpha5
kind: Provisioner
metadata: {name: default}
spec:
  provider: {amiFamily: Bottlerocket, subnetSelector: {k: v}}`,
			absent:         []string{"NodePool/default spec.template.spec.nodeClassRef"},
			wantUnmappable: []string{"Provisioner/default: spec.provider: an inline provider block has no v1 form"}},
		{name: "a Provisioner without providerRef is unmappable",
			in:             "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata: {name: default}\nspec: {}\n",
			wantUnmappable: []string{"Provisioner/default: spec.providerRef: missing"}},
		{name: "an unknown Provisioner field is unmappable",
			in:             provisioner("ttlSecondsAfterEmty: 30"),
			wantUnmappable: []string{"Provisioner/default: spec.ttlSecondsAfterEmty: not a field of a v1alpha5 Provisioner"}},

		// AWSNodeTemplate → EC2NodeClass.
		{name: "no amiFamily meant AL2: the al2 alias",
			in:        nodeTemplate(sel),
			want:      map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"al2@latest"}]`},
			absent:    []string{"EC2NodeClass/default spec.amiFamily"},
			wantNotes: []string{"v1alpha1 meant AL2"}},
		{name: "no amiFamily with a chosen default family: its alias",
			in:        nodeTemplate(sel),
			opts:      Options{DefaultAMIFamily: "AL2023"},
			want:      map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"al2023@latest"}]`},
			wantNotes: []string{"--ami-family made it AL2023"}},
		{name: "the default family does not override a named one",
			in:   nodeTemplate(sel + "amiFamily: Bottlerocket"),
			opts: Options{DefaultAMIFamily: "AL2023"},
			want: map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"bottlerocket@latest"}]`}},
		{name: "AL2023 becomes the al2023 alias",
			in:   nodeTemplate(sel + "amiFamily: AL2023"),
			want: map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"al2023@latest"}]`}},
		{name: "Bottlerocket becomes the bottlerocket alias",
			in:   nodeTemplate(sel + "amiFamily: Bottlerocket"),
			want: map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"bottlerocket@latest"}]`}},
		{name: "Windows2019 becomes the windows2019 alias",
			in:   nodeTemplate(sel + "amiFamily: Windows2019"),
			want: map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"windows2019@latest"}]`}},
		{name: "Windows2022 becomes the windows2022 alias",
			in:   nodeTemplate(sel + "amiFamily: Windows2022"),
			want: map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"alias":"windows2022@latest"}]`}},
		{name: "Custom with an amiSelector keeps the family and gets terms without alias",
			in: nodeTemplate(sel + "amiFamily: Custom\namiSelector: {team: a}"),
			want: map[string]string{"EC2NodeClass/default spec.amiFamily": `"Custom"`,
				"EC2NodeClass/default spec.amiSelectorTerms": `[{"tags":{"team":"a"}}]`}},
		{name: "an amiSelector without amiFamily keeps AL2 as the family",
			in: nodeTemplate(sel + "amiSelector: {aws-ids: \"ami-1,ami-2\"}"),
			want: map[string]string{"EC2NodeClass/default spec.amiFamily": `"AL2"`,
				"EC2NodeClass/default spec.amiSelectorTerms": `[{"id":"ami-1"},{"id":"ami-2"}]`}},
		{name: "Custom without an amiSelector is unmappable",
			in:             nodeTemplate(sel + "amiFamily: Custom"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.amiFamily: Custom with no AMI selector"}},
		{name: "Ubuntu without an amiSelector is unmappable",
			in:             nodeTemplate(sel + "amiFamily: Ubuntu"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.amiFamily: Ubuntu: v1 has no Ubuntu family"}},
		{name: "Ubuntu with an amiSelector becomes AL2, keeping its /dev/sda1 root volume",
			in: nodeTemplate(sel + "amiFamily: Ubuntu\namiSelector: {aws::ids: ami-1}"),
			want: map[string]string{"EC2NodeClass/default spec.amiFamily": `"AL2"`,
				"EC2NodeClass/default spec.blockDeviceMappings": `[{"deviceName":"/dev/sda1","ebs":{"encrypted":true,"volumeSize":"20Gi","volumeType":"gp3"},"rootVolume":true}]`},
			wantNotes: []string{"Ubuntu became AL2", "spec.blockDeviceMappings: not set: Ubuntu's default root volume was /dev/sda1"}},
		{name: "Ubuntu with its own volumes keeps them",
			in:   nodeTemplate(sel + "amiFamily: Ubuntu\namiSelector: {aws::ids: ami-1}\nblockDeviceMappings: [{deviceName: /dev/sdb, ebs: {volumeSize: 100Gi}}]"),
			want: map[string]string{"EC2NodeClass/default spec.blockDeviceMappings": `[{"deviceName":"/dev/sdb","ebs":{"volumeSize":"100Gi"}}]`}},
		{name: "v1alpha1 without metadataOptions keeps its defaults, hop limit 2",
			in:        nodeTemplate(sel),
			want:      map[string]string{"EC2NodeClass/default spec.metadataOptions": `{"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":2,"httpTokens":"required"}`},
			wantNotes: []string{"spec.metadataOptions: not set: v1alpha1 defaulted httpPutResponseHopLimit to 2"}},
		{name: "map selectors become tag terms; an empty value is a wildcard",
			in: nodeTemplate("subnetSelector: {karpenter.sh/discovery: demo, tier: \"\"}\nsecurityGroupSelector: {Name: nodes}\ninstanceProfile: p"),
			want: map[string]string{"EC2NodeClass/default spec.subnetSelectorTerms": `[{"tags":{"karpenter.sh/discovery":"demo","tier":"*"}}]`,
				"EC2NodeClass/default spec.securityGroupSelectorTerms": `[{"tags":{"Name":"nodes"}}]`}},
		{name: "comma-separated tag values multiply into terms",
			in:   nodeTemplate("subnetSelector: {a: \"1,2\", b: \"3,4\"}\nsecurityGroupSelector: {k: v}\ninstanceProfile: p"),
			want: map[string]string{"EC2NodeClass/default spec.subnetSelectorTerms": `[{"tags":{"a":"1","b":"3"}},{"tags":{"a":"2","b":"3"}},{"tags":{"a":"1","b":"4"}},{"tags":{"a":"2","b":"4"}}]`}},
		{name: "aws-ids and aws::ids become one id term each",
			in: nodeTemplate("subnetSelector: {aws-ids: \"subnet-1, subnet-2\"}\nsecurityGroupSelector: {aws::ids: sg-1}\ninstanceProfile: p"),
			want: map[string]string{"EC2NodeClass/default spec.subnetSelectorTerms": `[{"id":"subnet-1"},{"id":"subnet-2"}]`,
				"EC2NodeClass/default spec.securityGroupSelectorTerms": `[{"id":"sg-1"}]`}},
		{name: "aws::name and aws::owners become name and owner terms",
			in: nodeTemplate(sel + "amiFamily: AL2023\namiSelector: {aws::name: \"n1,n2\", aws::owners: \"123456789012,amazon\"}"),
			want: map[string]string{"EC2NodeClass/default spec.amiSelectorTerms": `[{"name":"n1","owner":"123456789012"},{"name":"n2","owner":"123456789012"},{"name":"n1","owner":"amazon"},{"name":"n2","owner":"amazon"}]`,
				"EC2NodeClass/default spec.amiFamily": `"AL2023"`}},
		{name: "aws::ids combined with tags is unmappable",
			in:             nodeTemplate("subnetSelector: {aws-ids: subnet-1, tier: private}\nsecurityGroupSelector: {k: v}\ninstanceProfile: p"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.subnetSelector: aws::ids is combined with other filters"}},
		{name: "aws::owners alone is unmappable",
			in:             nodeTemplate(sel + "amiSelector: {aws::owners: amazon}"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.amiSelector: aws::owners alone"}},
		{name: "instanceProfile is carried",
			in:     nodeTemplate("subnetSelector: {k: v}\nsecurityGroupSelector: {k: v}\ninstanceProfile: KarpenterNodeInstanceProfile-demo"),
			opts:   Options{Role: "ignored-when-the-source-has-one"},
			want:   map[string]string{"EC2NodeClass/default spec.instanceProfile": `"KarpenterNodeInstanceProfile-demo"`},
			absent: []string{"EC2NodeClass/default spec.role"}},
		{name: "--role fills a template without instance profile",
			in:     nodeTemplate("subnetSelector: {k: v}\nsecurityGroupSelector: {k: v}"),
			opts:   Options{Role: "KarpenterNodeRole-demo"},
			want:   map[string]string{"EC2NodeClass/default spec.role": `"KarpenterNodeRole-demo"`},
			absent: []string{"EC2NodeClass/default spec.instanceProfile"}},
		{name: "--instance-profile fills a template without instance profile",
			in:   nodeTemplate("subnetSelector: {k: v}\nsecurityGroupSelector: {k: v}"),
			opts: Options{InstanceProfile: "KarpenterNodeInstanceProfile-demo"},
			want: map[string]string{"EC2NodeClass/default spec.instanceProfile": `"KarpenterNodeInstanceProfile-demo"`}},
		{name: "no instance profile and no flag is unmappable, naming the flags",
			in:             nodeTemplate("subnetSelector: {k: v}\nsecurityGroupSelector: {k: v}"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.instanceProfile: missing, and v1 has no global default instance profile: pass --role NODE_ROLE"}},
		{name: "both flags are unmappable",
			in:             nodeTemplate("subnetSelector: {k: v}\nsecurityGroupSelector: {k: v}"),
			opts:           Options{Role: "r", InstanceProfile: "p"},
			wantUnmappable: []string{"both --role and --instance-profile are set"}},
		{name: "launchTemplate is unmappable",
			in:             nodeTemplate(sel + "launchTemplate: my-template"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.launchTemplate: v1 launches from launch templates it generates"}},
		{name: "an instance store block device is unmappable",
			in:             nodeTemplate(sel + "blockDeviceMappings: [{deviceName: /dev/sdb, virtualName: ephemeral0}]"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.blockDeviceMappings[0].virtualName"}},
		{name: "the other AWSNodeTemplate fields are carried",
			in: nodeTemplate(sel + `userData: echo hi
tags: {team: a}
context: c-1
detailedMonitoring: true
associatePublicIpAddress: false
metadataOptions: {httpEndpoint: enabled, httpPutResponseHopLimit: 2, httpTokens: required}
blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 100Gi, volumeType: gp3, encrypted: true}}]`),
			want: map[string]string{
				"EC2NodeClass/default spec.userData":                 `"echo hi"`,
				"EC2NodeClass/default spec.tags":                     `{"team":"a"}`,
				"EC2NodeClass/default spec.context":                  `"c-1"`,
				"EC2NodeClass/default spec.detailedMonitoring":       `true`,
				"EC2NodeClass/default spec.associatePublicIPAddress": `false`,
				"EC2NodeClass/default spec.metadataOptions":          `{"httpEndpoint":"enabled","httpPutResponseHopLimit":2,"httpTokens":"required"}`,
				"EC2NodeClass/default spec.blockDeviceMappings":      `[{"deviceName":"/dev/xvda","ebs":{"volumeSize":"100Gi","volumeType":"gp3","encrypted":true}}]`,
			}},
		{name: "metadataOptions without httpTokens keeps EC2's optional",
			in:        nodeTemplate(sel + "metadataOptions: {httpPutResponseHopLimit: 2}"),
			want:      map[string]string{"EC2NodeClass/default spec.metadataOptions": `{"httpPutResponseHopLimit":2,"httpTokens":"optional"}`},
			wantNotes: []string{"httpTokens: not set"}},
		{name: "an unknown AWSNodeTemplate field is unmappable",
			in:             nodeTemplate(sel + "subnetSelectorTerms: []"),
			wantUnmappable: []string{"AWSNodeTemplate/default: spec.subnetSelectorTerms: not a field of a v1alpha1 AWSNodeTemplate"}},

		// v1beta1 → v1.
		{name: "v1beta1 NodePool: WhenUnderutilized, expireAfter, kubelet and nodeClassRef move",
			in: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template:
    metadata: {labels: {team: a}}
    spec:
      nodeClassRef: {apiVersion: karpenter.k8s.aws/v1beta1, kind: EC2NodeClass, name: default}
      requirements: [{key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m], minValues: 2}]
      kubelet: {maxPods: 50}
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: 168h
    budgets: [{nodes: "10%"}]
  limits: {cpu: 100}
  weight: 10
---
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: AL2023
  role: KarpenterNodeRole-demo
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`,
			want: map[string]string{
				"NodePool/default spec.disruption":                 `{"consolidationPolicy":"WhenEmptyOrUnderutilized","consolidateAfter":"0s","budgets":[{"nodes":"10%"}]}`,
				"NodePool/default spec.template.spec.expireAfter":  `"168h"`,
				"NodePool/default spec.template.spec.nodeClassRef": `{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}`,
				"NodePool/default spec.template.spec.requirements": `[{"key":"karpenter.k8s.aws/instance-category","operator":"In","values":["c","m"],"minValues":2}]`,
				"NodePool/default spec.template.metadata.labels":   `{"team":"a"}`,
				"NodePool/default spec.limits":                     `{"cpu":100}`,
				"NodePool/default spec.weight":                     `10`,
				"EC2NodeClass/default spec.kubelet":                `{"maxPods":50}`,
				"EC2NodeClass/default spec.amiSelectorTerms":       `[{"alias":"al2023@latest"}]`,
				"EC2NodeClass/default spec.role":                   `"KarpenterNodeRole-demo"`,
				"EC2NodeClass/default spec.subnetSelectorTerms":    `[{"tags":{"karpenter.sh/discovery":"demo"}}]`,
			},
			absent: []string{"NodePool/default spec.template.spec.kubelet", "NodePool/default spec.disruption.expireAfter", "EC2NodeClass/default spec.amiFamily"}},
		{name: "v1beta1 NodePool: WhenEmpty keeps its consolidateAfter; no expireAfter stays v1's 720h default",
			in: `
apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata: {name: default}
spec:
  template: {spec: {nodeClassRef: {name: default}, requirements: []}}
  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}
`,
			want: map[string]string{"NodePool/default spec.disruption": `{"consolidationPolicy":"WhenEmpty","consolidateAfter":"30s"}`,
				"NodePool/default spec.template.spec.nodeClassRef": `{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}`},
			absent: []string{"NodePool/default spec.template.spec.expireAfter"}},
		{name: "v1beta1 EC2NodeClass with terms keeps amiFamily and terms",
			in: `
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: Custom
  amiSelectorTerms: [{name: my-ami, owner: self}]
  instanceProfile: p
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{name: nodes}]
`,
			want: map[string]string{"EC2NodeClass/default spec.amiFamily": `"Custom"`,
				"EC2NodeClass/default spec.amiSelectorTerms": `[{"name":"my-ami","owner":"self"}]`,
				"EC2NodeClass/default spec.instanceProfile":  `"p"`,
				"EC2NodeClass/default spec.metadataOptions":  `{"httpEndpoint":"enabled","httpProtocolIPv6":"disabled","httpPutResponseHopLimit":2,"httpTokens":"required"}`},
			wantNotes: []string{"EC2NodeClass/default: spec.metadataOptions: not set: v1beta1 defaulted httpPutResponseHopLimit to 2"}},
		{name: "v1beta1 Ubuntu becomes AL2 with its /dev/sda1 root volume",
			in: `
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec:
  amiFamily: Ubuntu
  amiSelectorTerms: [{id: ami-1}]
  role: r
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
  metadataOptions: {httpPutResponseHopLimit: 1}
`,
			want: map[string]string{"EC2NodeClass/default spec.amiFamily": `"AL2"`,
				"EC2NodeClass/default spec.blockDeviceMappings": `[{"deviceName":"/dev/sda1","ebs":{"encrypted":true,"volumeSize":"20Gi","volumeType":"gp3"},"rootVolume":true}]`,
				"EC2NodeClass/default spec.metadataOptions":     `{"httpPutResponseHopLimit":1}`},
			wantNotes: []string{"Ubuntu became AL2", "spec.blockDeviceMappings: not set: Ubuntu's default root volume"}},
		{name: "v1beta1 EC2NodeClass: Custom without terms is unmappable",
			in: `
apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata: {name: default}
spec: {amiFamily: Custom, role: r, subnetSelectorTerms: [{id: subnet-1}], securityGroupSelectorTerms: [{id: sg-1}]}
`,
			wantUnmappable: []string{"EC2NodeClass/default: spec.amiFamily: Custom with no AMI selector"}},

		// Other kinds, lists, kubectl get output.
		{name: "other kinds pass through; do-not-evict in pod templates becomes do-not-disrupt",
			in: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, annotations: {karpenter.sh/do-not-evict: "true"}}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: web}, annotations: {karpenter.sh/do-not-evict: "true", other: x}}
    spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: nightly}
spec:
  schedule: "@daily"
  jobTemplate: {spec: {template: {metadata: {annotations: {karpenter.sh/do-not-consolidate: "true"}}, spec: {containers: [{name: c, image: busybox}]}}}}
---
apiVersion: v1
kind: Pod
metadata: {name: p, annotations: {karpenter.sh/do-not-evict: "false"}}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm}
data: {karpenter.sh/do-not-evict: "true"}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: already-v1}
spec: {template: {spec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}}}
`,
			wantObjects: []string{"Deployment/web", "CronJob/nightly", "Pod/p", "ConfigMap/cm", "NodePool/already-v1"},
			absent:      []string{"Pod/p metadata.annotations"},
			want: map[string]string{
				"Deployment/web spec.template.metadata.annotations":                   `{"karpenter.sh/do-not-disrupt":"true","other":"x"}`,
				"Deployment/web metadata.annotations":                                 `{"karpenter.sh/do-not-evict":"true"}`,
				"Deployment/web spec.replicas":                                        `2`,
				"CronJob/nightly spec.jobTemplate.spec.template.metadata.annotations": `{"karpenter.sh/do-not-disrupt":"true"}`,
				"ConfigMap/cm data":                                                   `{"karpenter.sh/do-not-evict":"true"}`,
				"NodePool/already-v1 spec.template.spec.nodeClassRef.name":            `"x"`,
			},
			wantNotes: []string{"Deployment/web: spec.template.metadata.annotations[karpenter.sh/do-not-evict]: renamed karpenter.sh/do-not-disrupt",
				`Pod/p: metadata.annotations[karpenter.sh/do-not-evict]: dropped: value "false" never blocked disruption`}},
		{name: "workloads selecting karpenter.sh/provisioner-name select karpenter.sh/nodepool",
			in: `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  template:
    spec:
      nodeSelector: {karpenter.sh/provisioner-name: default, kubernetes.io/os: linux}
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms:
            - matchExpressions: [{key: karpenter.sh/provisioner-name, operator: In, values: [default]}, {key: kubernetes.io/arch, operator: In, values: [amd64]}]
          preferredDuringSchedulingIgnoredDuringExecution:
          - weight: 1
            preference: {matchExpressions: [{key: karpenter.sh/provisioner-name, operator: NotIn, values: [spot]}]}
      containers: [{name: c, image: nginx}]
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {nodeSelector: {karpenter.sh/provisioner-name: batch}, containers: [{name: c, image: busybox}]}
---
apiVersion: v1
kind: Node
metadata: {name: node-1, labels: {karpenter.sh/provisioner-name: default}}
`,
			want: map[string]string{
				"Deployment/web spec.template.spec.nodeSelector": `{"karpenter.sh/nodepool":"default","kubernetes.io/os":"linux"}`,
				"Deployment/web spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms": `[{"matchExpressions":[{"key":"karpenter.sh/nodepool","operator":"In","values":["default"]},{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}]}]`,
				"Deployment/web spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution":                  `[{"preference":{"matchExpressions":[{"key":"karpenter.sh/nodepool","operator":"NotIn","values":["spot"]}]},"weight":1}]`,
				"Pod/p spec.nodeSelector":     `{"karpenter.sh/nodepool":"batch"}`,
				"Node/node-1 metadata.labels": `{"karpenter.sh/provisioner-name":"default"}`,
			},
			wantNotes: []string{
				"Deployment/web: spec.template.spec.nodeSelector[karpenter.sh/provisioner-name]: renamed karpenter.sh/nodepool",
				"Deployment/web: spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key: renamed karpenter.sh/nodepool",
				"Deployment/web: spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key: renamed karpenter.sh/nodepool",
				"Pod/p: spec.nodeSelector[karpenter.sh/provisioner-name]: renamed karpenter.sh/nodepool",
			}},
		{name: "kubectl get -o yaml: a List, with status and server metadata dropped",
			in: `
apiVersion: v1
kind: List
metadata: {resourceVersion: ""}
items:
- apiVersion: karpenter.sh/v1alpha5
  kind: Provisioner
  metadata:
    name: default
    resourceVersion: "1234"
    uid: 0b5c2e1e-0000-0000-0000-000000000000
    creationTimestamp: "2023-08-01T00:00:00Z"
    generation: 3
    managedFields: [{manager: kubectl}]
    annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", team: a}
  spec: {providerRef: {name: default}, ttlSecondsAfterEmpty: 30}
  status: {resources: {cpu: "4"}}
- apiVersion: karpenter.k8s.aws/v1alpha1
  kind: AWSNodeTemplate
  metadata: {name: default, resourceVersion: "99", selfLink: /apis/x}
  spec: {subnetSelector: {k: v}, securityGroupSelector: {k: v}, instanceProfile: p}
  status: {subnets: [{id: subnet-1}]}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web, resourceVersion: "7", uid: u}
  spec: {template: {spec: {containers: []}}}
  status: {replicas: 1}
`,
			wantObjects: []string{"NodePool/default", "EC2NodeClass/default", "Deployment/web"},
			want:        map[string]string{"NodePool/default metadata": `{"name":"default","annotations":{"team":"a"}}`, "EC2NodeClass/default metadata": `{"name":"default"}`, "Deployment/web metadata": `{"name":"web"}`},
			absent:      []string{"NodePool/default status", "EC2NodeClass/default status", "Deployment/web status"}},
		{name: "a kind ending in List that has no items is an object, not a list",
			in:          "apiVersion: example.com/v1\nkind: AllowList\nmetadata: {name: a}\nspec: {entries: [x]}\n",
			wantObjects: []string{"AllowList/a"},
			want:        map[string]string{"AllowList/a spec": `{"entries":["x"]}`}},
		{name: "a legacy Machine is left out with a note",
			in:          "apiVersion: karpenter.sh/v1alpha5\nkind: Machine\nmetadata: {name: m}\nspec: {}\n",
			wantObjects: []string{},
			wantNotes:   []string{"Machine/m: left out"}},
		{name: "an unknown legacy Karpenter kind is unmappable",
			in:             "apiVersion: karpenter.k8s.aws/v1alpha1\nkind: AWSNodeTemplateX\nmetadata: {name: x}\n",
			wantUnmappable: []string{"AWSNodeTemplateX/x: apiVersion: karpenter.k8s.aws/v1alpha1 AWSNodeTemplateX is not a kind convert knows"}},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			objs, err := Decode("test", strings.NewReader(r.in))
			if err != nil {
				t.Fatal(err)
			}
			res := Convert(objs, r.opts)
			byRef := map[string]Object{}
			var refs []string
			for _, o := range res.Objects {
				ref := o["kind"].(string) + "/" + name(o)
				byRef[ref] = o
				refs = append(refs, ref)
			}
			if r.wantObjects != nil && !reflect.DeepEqual(refs, r.wantObjects) && !(len(refs) == 0 && len(r.wantObjects) == 0) {
				t.Errorf("objects %v, want %v", refs, r.wantObjects)
			}
			for at, want := range r.want {
				ref, path, _ := strings.Cut(at, " ")
				got, ok := lookup(byRef[ref], path)
				if !ok {
					t.Errorf("%s: missing; objects:\n%s", at, dump(res.Objects))
					continue
				}
				var w any
				if err := json.Unmarshal([]byte(want), &w); err != nil {
					t.Fatalf("%s: bad want: %v", at, err)
				}
				if !reflect.DeepEqual(normalize(got), w) {
					g, _ := json.Marshal(got)
					t.Errorf("%s:\n got %s\nwant %s", at, g, want)
				}
			}
			for _, at := range r.absent {
				ref, path, _ := strings.Cut(at, " ")
				if got, ok := lookup(byRef[ref], path); ok {
					t.Errorf("%s: want absent, got %v", at, got)
				}
			}
			matchFindings(t, "note", res.Notes, r.wantNotes, false)
			matchFindings(t, "unmappable", res.Unmappable, r.wantUnmappable, true)
		})
	}
}
