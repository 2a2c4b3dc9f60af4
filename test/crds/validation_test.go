package crds

import (
	"context"
	"fmt"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const baseNodePool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: base}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
      - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

const baseNodeClaim = `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: base}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  requirements:
  - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`

const baseEC2NodeClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: base}
spec:
  role: KarpenterNodeRole-demo
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: demo}}]
`

const baseNodeOverlay = `
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {name: base}
spec:
  requirements:
  - {key: karpenter.k8s.aws/instance-family, operator: In, values: [m5]}
`

const baseCapacityBuffer = `
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: base}
spec:
  podTemplateRef: {name: buffer-pod}
  replicas: 2
`

// req builds a NodePool patch with one requirement.
func req(r string) string {
	return "spec: {template: {spec: {requirements: [" + r + "]}}}"
}

type validationCase struct {
	name string
	base string
	// patch is a YAML merge patch (RFC 7386) applied to base before create.
	patch string
	// update, when set, is applied to the created object and must be rejected;
	// then patch must be accepted.
	update string
	// want is a substring of the apiserver's error; empty means the object
	// must be accepted.
	want string
}

var validationCases = []validationCase{
	// NodePool requirements.
	{name: "In without values", base: baseNodePool, patch: req("{key: kubernetes.io/arch, operator: In}"), want: "requirements with operator 'In' must have a value defined"},
	{name: "In with empty values", base: baseNodePool, patch: req("{key: kubernetes.io/arch, operator: In, values: []}"), want: "requirements with operator 'In' must have a value defined"},
	{name: "Gt with a non-integer value", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["two"]}`), want: "type conversion error from 'string' to 'int' evaluating rule: requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
	{name: "Gt with two values", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["2", "3"]}`), want: "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
	{name: "Lt with a negative value", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/instance-cpu, operator: Lt, values: ["-1"]}`), want: "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
	{name: "Gte without values", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/instance-cpu, operator: Gte}`), want: "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
	{name: "Lte with an integer is accepted", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/instance-cpu, operator: Lte, values: ["16"]}`)},
	// Karpenter's CRD lists Gte and Lte first, and the apiserver names the
	// supported values in the CRD's order.
	{name: "unknown operator", base: baseNodePool, patch: req(`{key: kubernetes.io/arch, operator: Equals, values: [amd64]}`), want: `spec.template.spec.requirements[0].operator: Unsupported value: "Equals": supported values: "Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"`},
	{name: "restricted label domain karpenter.sh", base: baseNodePool, patch: req(`{key: karpenter.sh/team, operator: Exists}`), want: `label domain "karpenter.sh" is restricted`},
	{name: "karpenter.sh/nodepool requirement", base: baseNodePool, patch: req(`{key: karpenter.sh/nodepool, operator: In, values: [a]}`), want: `label "karpenter.sh/nodepool" is restricted`},
	{name: "hostname requirement", base: baseNodePool, patch: req(`{key: kubernetes.io/hostname, operator: In, values: [a]}`), want: `label "kubernetes.io/hostname" is restricted`},
	{name: "restricted label domain karpenter.k8s.aws", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/not-a-label, operator: Exists}`), want: `label domain "karpenter.k8s.aws" is restricted`},
	{name: "well-known AWS label is allowed", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/instance-family, operator: In, values: [c5a]}`)},
	// Only on Karpenter's main branch, in no v1.14 release: v1.14.1's CRD restricts it.
	{name: "the unreleased nitro-sandbox label is restricted", base: baseNodePool, patch: req(`{key: karpenter.k8s.aws/nitro-sandbox, operator: Exists}`), want: `label domain "karpenter.k8s.aws" is restricted`},
	{name: "capacity-type requirement is allowed", base: baseNodePool, patch: req(`{key: karpenter.sh/capacity-type, operator: In, values: [spot]}`)},
	{name: "invalid key", base: baseNodePool, patch: req(`{key: "not a key", operator: Exists}`), want: "spec.template.spec.requirements[0].key: Invalid value"},
	// Karpenter's CRD puts the label-value pattern and length on the values
	// list, where the apiserver never applies them: any value is accepted
	// (the NodePool's status reports it).
	{name: "value that is not a label value is accepted", base: baseNodePool, patch: req(`{key: team, operator: In, values: ["a b"]}`)},
	{name: "value longer than 63 characters is accepted", base: baseNodePool, patch: req(`{key: team, operator: In, values: [` + strings.Repeat("a", 64) + `]}`)},
	{name: "value with a domain and a slash is accepted", base: baseNodePool, patch: req(`{key: team, operator: NotIn, values: [kubernetes.io/hostname, "karpenter.sh/x"]}`)},
	{name: "minValues above the number of values", base: baseNodePool, patch: req(`{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large], minValues: 2}`), want: "requirements with 'minValues' must have at least that many values specified in the 'values' field"},
	{name: "minValues zero", base: baseNodePool, patch: req(`{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 0}`), want: "should be greater than or equal to 1"},
	{name: "too many requirements", base: baseNodePool, patch: req(strings.TrimSuffix(strings.Repeat("{key: team, operator: Exists},", 101), ",")), want: "Too many: 101: must have at most 100 items"},
	{name: "requirements missing", base: baseNodePool, patch: "spec: {template: {spec: {requirements: null}}}", want: "spec.template.spec.requirements: Required value"},

	// NodePool template labels.
	{name: "label in the karpenter.sh domain", base: baseNodePool, patch: "spec: {template: {metadata: {labels: {karpenter.sh/team: a}}}}", want: `label domain "karpenter.sh" is restricted`},
	{name: "karpenter.sh/nodepool label", base: baseNodePool, patch: "spec: {template: {metadata: {labels: {karpenter.sh/nodepool: a}}}}", want: `label "karpenter.sh/nodepool" is restricted`},
	{name: "hostname label", base: baseNodePool, patch: "spec: {template: {metadata: {labels: {kubernetes.io/hostname: a}}}}", want: `label "kubernetes.io/hostname" is restricted`},
	{name: "label in the karpenter.k8s.aws domain", base: baseNodePool, patch: "spec: {template: {metadata: {labels: {karpenter.k8s.aws/team: a}}}}", want: `label domain "karpenter.k8s.aws" is restricted`},
	{name: "label value too long", base: baseNodePool, patch: "spec: {template: {metadata: {labels: {team: " + strings.Repeat("a", 64) + "}}}}", want: "may not be more than 63 bytes"},

	// NodePool disruption.
	{name: "schedule without duration", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "1", schedule: "@daily"}]}}`, want: "'schedule' must be set with 'duration'"},
	{name: "duration without schedule", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "1", duration: 10m}]}}`, want: "'schedule' must be set with 'duration'"},
	{name: "budget nodes above 100%", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "101%"}]}}`, want: `spec.disruption.budgets[0].nodes: Invalid value: "101%"`},
	{name: "budget nodes not a number", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "ten"}]}}`, want: `spec.disruption.budgets[0].nodes: Invalid value: "ten"`},
	{name: "budget duration in seconds", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "1", schedule: "0 9 * * *", duration: 30s}]}}`, want: `spec.disruption.budgets[0].duration: Invalid value: "30s"`},
	{name: "budget schedule not cron", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "1", schedule: "daily", duration: 1h}]}}`, want: `spec.disruption.budgets[0].schedule: Invalid value: "daily"`},
	{name: "unknown budget reason", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: 1m, budgets: [{nodes: "1", reasons: [Expired]}]}}`, want: `Unsupported value: "Expired": supported values: "Underutilized", "Empty", "Drifted"`},
	{name: "disruption without consolidateAfter", base: baseNodePool, patch: `spec: {disruption: {consolidationPolicy: WhenEmpty}}`, want: "spec.disruption.consolidateAfter: Required value"},
	{name: "v1beta1 consolidation policy", base: baseNodePool, patch: `spec: {disruption: {consolidationPolicy: WhenUnderutilized}}`, want: `Unsupported value: "WhenUnderutilized": supported values: "WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"`},
	{name: "consolidateAfter without a unit", base: baseNodePool, patch: `spec: {disruption: {consolidateAfter: "30"}}`, want: `spec.disruption.consolidateAfter: Invalid value: "30"`},
	{name: "expireAfter in days", base: baseNodePool, patch: `spec: {template: {spec: {expireAfter: 30d}}}`, want: `spec.template.spec.expireAfter: Invalid value: "30d"`},
	{name: "expireAfter never in lower case", base: baseNodePool, patch: `spec: {template: {spec: {expireAfter: never}}}`, want: `spec.template.spec.expireAfter: Invalid value: "never"`},
	{name: "expireAfter Never is accepted", base: baseNodePool, patch: `spec: {template: {spec: {expireAfter: Never}}}`},
	{name: "expireAfter with a fraction", base: baseNodePool, patch: `spec: {template: {spec: {expireAfter: 1.5h}}}`, want: `spec.template.spec.expireAfter: Invalid value: "1.5h"`},
	{name: "terminationGracePeriod Never", base: baseNodePool, patch: `spec: {template: {spec: {terminationGracePeriod: Never}}}`, want: `spec.template.spec.terminationGracePeriod: Invalid value: "Never"`},
	{name: "weight zero", base: baseNodePool, patch: `spec: {weight: 0}`, want: "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"},
	{name: "weight above 100", base: baseNodePool, patch: `spec: {weight: 101}`, want: "spec.weight: Invalid value: 101: spec.weight in body should be less than or equal to 100"},
	{name: "taint with an unknown effect", base: baseNodePool, patch: `spec: {template: {spec: {taints: [{key: a, effect: NoWay}]}}}`, want: `Unsupported value: "NoWay": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
	{name: "taint with an invalid key", base: baseNodePool, patch: `spec: {template: {spec: {startupTaints: [{key: "bad key", effect: NoSchedule}]}}}`, want: "spec.template.spec.startupTaints[0].key: Invalid value"},
	{name: "empty nodeClassRef group", base: baseNodePool, patch: `spec: {template: {spec: {nodeClassRef: {group: ""}}}}`, want: "group may not be empty"},
	{name: "empty nodeClassRef kind", base: baseNodePool, patch: `spec: {template: {spec: {nodeClassRef: {kind: ""}}}}`, want: "kind may not be empty"},
	{name: "empty nodeClassRef name", base: baseNodePool, patch: `spec: {template: {spec: {nodeClassRef: {name: ""}}}}`, want: "name may not be empty"},
	{name: "nodeClassRef group with a version", base: baseNodePool, patch: `spec: {template: {spec: {nodeClassRef: {group: karpenter.k8s.aws/v1}}}}`, want: `spec.template.spec.nodeClassRef.group: Invalid value: "karpenter.k8s.aws/v1"`},
	{name: "nodeClassRef missing", base: baseNodePool, patch: `spec: {template: {spec: {nodeClassRef: null}}}`, want: "spec.template.spec.nodeClassRef: Required value"},
	{name: "change of nodeClassRef.group", base: baseNodePool, update: `spec: {template: {spec: {nodeClassRef: {group: example.com}}}}`, want: "nodeClassRef.group is immutable"},
	{name: "change of nodeClassRef.kind", base: baseNodePool, update: `spec: {template: {spec: {nodeClassRef: {kind: OtherNodeClass}}}}`, want: "nodeClassRef.kind is immutable"},
	{name: "change of nodeClassRef.name is allowed", base: baseNodePool, update: `spec: {template: {spec: {nodeClassRef: {name: other}}}}`},
	{name: "static NodePool with a cpu limit", base: baseNodePool, patch: `spec: {replicas: 2, limits: {cpu: "10"}}`, want: "only 'limits.nodes' is supported on static NodePools"},
	{name: "static NodePool with a weight", base: baseNodePool, patch: `spec: {replicas: 2, weight: 10}`, want: "'weight' is not supported on static NodePools"},
	{name: "dynamic NodePool made static", base: baseNodePool, update: `spec: {replicas: 3}`, want: "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"},
	{name: "unknown field limit", base: baseNodePool, patch: `spec: {limit: {cpu: "20"}}`, want: `unknown field "spec.limit"`},

	// NodeClaim.
	{name: "NodeClaim In without values", base: baseNodeClaim, patch: `spec: {requirements: [{key: kubernetes.io/arch, operator: In}]}`, want: "requirements with operator 'In' must have a value defined"},
	{name: "NodeClaim karpenter.sh/nodepool requirement is allowed", base: baseNodeClaim, patch: `spec: {requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]}`},
	{name: "NodeClaim restricted label domain", base: baseNodeClaim, patch: `spec: {requirements: [{key: karpenter.sh/team, operator: Exists}]}`, want: `label domain "karpenter.sh" is restricted`},
	{name: "NodeClaim hostname requirement", base: baseNodeClaim, patch: `spec: {requirements: [{key: kubernetes.io/hostname, operator: Exists}]}`, want: `label "kubernetes.io/hostname" is restricted`},
	{name: "NodeClaim unknown operator", base: baseNodeClaim, patch: `spec: {requirements: [{key: kubernetes.io/arch, operator: in, values: [amd64]}]}`, want: `spec.requirements[0].operator: Unsupported value: "in": supported values: "Gte", "Lte", "In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"`},
	{name: "NodeClaim value that is not a label value is accepted", base: baseNodeClaim, patch: `spec: {requirements: [{key: team, operator: In, values: ["a b", "` + strings.Repeat("b", 64) + `"]}]}`},
	{name: "NodeClaim bad expireAfter", base: baseNodeClaim, patch: `spec: {expireAfter: 2w}`, want: `spec.expireAfter: Invalid value: "2w"`},
	{name: "NodeClaim spec change", base: baseNodeClaim, update: `spec: {expireAfter: 10h}`, want: "spec is immutable"},

	// EC2NodeClass.
	{name: "role together with instanceProfile", base: baseEC2NodeClass, patch: `spec: {instanceProfile: KarpenterNodeInstanceProfile}`, want: "must specify exactly one of ['role', 'instanceProfile']"},
	{name: "neither role nor instanceProfile", base: baseEC2NodeClass, patch: `spec: {role: null}`, want: "must specify exactly one of ['role', 'instanceProfile']"},
	{name: "empty role", base: baseEC2NodeClass, patch: `spec: {role: ""}`, want: "role cannot be empty"},
	{name: "empty instanceProfile", base: baseEC2NodeClass, patch: `spec: {role: null, instanceProfile: ""}`, want: "instanceProfile cannot be empty"},
	{name: "alias family does not match amiFamily", base: baseEC2NodeClass, patch: `spec: {amiFamily: Bottlerocket}`, want: "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
	{name: "bottlerocket alias with AL2", base: baseEC2NodeClass, patch: `spec: {amiFamily: AL2, amiSelectorTerms: [{alias: bottlerocket@latest}]}`, want: "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"},
	{name: "alias with amiFamily Custom is allowed", base: baseEC2NodeClass, patch: `spec: {amiFamily: Custom}`},
	{name: "no alias and no amiFamily", base: baseEC2NodeClass, patch: `spec: {amiSelectorTerms: [{id: ami-0123456789abcdef0}]}`, want: "must specify amiFamily if amiSelectorTerms does not contain an alias"},
	{name: "alias without a version", base: baseEC2NodeClass, patch: `spec: {amiSelectorTerms: [{alias: al2023}]}`, want: "'alias' is improperly formatted, must match the format 'family@version'"},
	{name: "alias of an unknown family", base: baseEC2NodeClass, patch: `spec: {amiSelectorTerms: [{alias: ubuntu@latest}]}`, want: "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"},
	{name: "pinned windows alias", base: baseEC2NodeClass, patch: `spec: {amiSelectorTerms: [{alias: windows2022@v20240101}]}`, want: "windows families may only specify version 'latest'"},
	{name: "alias with another term", base: baseEC2NodeClass, patch: `spec: {amiSelectorTerms: [{alias: al2023@latest}, {name: my-ami}]}`, want: "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
	{name: "alias with tags in one term", base: baseEC2NodeClass, patch: `spec: {amiSelectorTerms: [{alias: al2023@latest, tags: {a: b}}]}`, want: "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
	{name: "ami id with a name", base: baseEC2NodeClass, patch: `spec: {amiFamily: AL2023, amiSelectorTerms: [{id: ami-0123456789abcdef0, name: my-ami}]}`, want: "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
	{name: "empty ami term", base: baseEC2NodeClass, patch: `spec: {amiFamily: AL2023, amiSelectorTerms: [{}]}`, want: "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
	{name: "no ami terms", base: baseEC2NodeClass, patch: `spec: {amiFamily: AL2023, amiSelectorTerms: []}`, want: "spec.amiSelectorTerms: Invalid value: 0: spec.amiSelectorTerms in body should have at least 1 items"},
	{name: "unknown amiFamily", base: baseEC2NodeClass, patch: `spec: {amiFamily: Ubuntu}`, want: `Unsupported value: "Ubuntu"`},
	{name: "no subnet terms", base: baseEC2NodeClass, patch: `spec: {subnetSelectorTerms: []}`, want: "subnetSelectorTerms cannot be empty"},
	{name: "subnet terms missing", base: baseEC2NodeClass, patch: `spec: {subnetSelectorTerms: null}`, want: "spec.subnetSelectorTerms: Required value"},
	{name: "empty subnet term", base: baseEC2NodeClass, patch: `spec: {subnetSelectorTerms: [{}]}`, want: "expected at least one, got none, ['tags', 'id']"},
	{name: "subnet id with tags", base: baseEC2NodeClass, patch: `spec: {subnetSelectorTerms: [{id: subnet-0123, tags: {a: b}}]}`, want: "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
	{name: "subnet tag with an empty value", base: baseEC2NodeClass, patch: `spec: {subnetSelectorTerms: [{tags: {a: ""}}]}`, want: "empty tag keys or values aren't supported"},
	{name: "no security group terms", base: baseEC2NodeClass, patch: `spec: {securityGroupSelectorTerms: []}`, want: "securityGroupSelectorTerms cannot be empty"},
	{name: "empty security group term", base: baseEC2NodeClass, patch: `spec: {securityGroupSelectorTerms: [{}]}`, want: "expected at least one, got none, ['tags', 'id', 'name']"},
	{name: "security group id with name", base: baseEC2NodeClass, patch: `spec: {securityGroupSelectorTerms: [{id: sg-0123, name: nodes}]}`, want: "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
	{name: "restricted cluster tag", base: baseEC2NodeClass, patch: `spec: {tags: {kubernetes.io/cluster/demo: owned}}`, want: "tag contains a restricted tag matching kubernetes.io/cluster/"},
	{name: "restricted eks tag", base: baseEC2NodeClass, patch: `spec: {tags: {"eks:eks-cluster-name": demo}}`, want: "tag contains a restricted tag matching eks:eks-cluster-name"},
	{name: "restricted nodepool tag", base: baseEC2NodeClass, patch: `spec: {tags: {karpenter.sh/nodepool: a}}`, want: "tag contains a restricted tag matching karpenter.sh/nodepool"},
	{name: "unknown httpTokens", base: baseEC2NodeClass, patch: `spec: {metadataOptions: {httpTokens: sometimes}}`, want: `Unsupported value: "sometimes": supported values: "required", "optional"`},
	{name: "hop limit above 64", base: baseEC2NodeClass, patch: `spec: {metadataOptions: {httpPutResponseHopLimit: 65}}`, want: "should be less than or equal to 64"},
	{name: "EBS volume without size or snapshot", base: baseEC2NodeClass, patch: `spec: {blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeType: gp3}}]}`, want: "snapshotID or volumeSize must be defined"},
	{name: "two root volumes", base: baseEC2NodeClass, patch: `spec: {blockDeviceMappings: [{rootVolume: true, ebs: {volumeSize: 20Gi}}, {rootVolume: true, ebs: {volumeSize: 20Gi}}]}`, want: "must have only one blockDeviceMappings with rootVolume"},
	{name: "volume size in Mi", base: baseEC2NodeClass, patch: `spec: {blockDeviceMappings: [{ebs: {volumeSize: 100Mi}}]}`, want: `Invalid value: "100Mi"`},
	{name: "unknown volume type", base: baseEC2NodeClass, patch: `spec: {blockDeviceMappings: [{ebs: {volumeSize: 20Gi, volumeType: gp9}}]}`, want: `Unsupported value: "gp9"`},
	{name: "image GC thresholds inverted", base: baseEC2NodeClass, patch: `spec: {kubelet: {imageGCHighThresholdPercent: 50, imageGCLowThresholdPercent: 60}}`, want: "imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent"},
	{name: "evictionSoft without grace period", base: baseEC2NodeClass, patch: `spec: {kubelet: {evictionSoft: {memory.available: 5%}}}`, want: "evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod"},
	{name: "unknown systemReserved key", base: baseEC2NodeClass, patch: `spec: {kubelet: {systemReserved: {gpu: "1"}}}`, want: "valid keys for systemReserved are ['cpu','memory','ephemeral-storage','pid']"},
	{name: "negative kubeReserved", base: baseEC2NodeClass, patch: `spec: {kubelet: {kubeReserved: {cpu: "-1"}}}`, want: "kubeReserved value cannot be a negative resource quantity"},
	{name: "unknown eviction signal", base: baseEC2NodeClass, patch: `spec: {kubelet: {evictionHard: {disk.available: 5%}}}`, want: "valid keys for evictionHard are"},
	{name: "evictionHard value that is neither a percentage nor a quantity", base: baseEC2NodeClass, patch: `spec: {kubelet: {evictionHard: {memory.available: five}}}`, want: `spec.kubelet.evictionHard.memory.available: Invalid value: "five": spec.kubelet.evictionHard.memory.available in body should match '^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$'`},
	{name: "evictionSoft percentage above 100", base: baseEC2NodeClass, patch: `spec: {kubelet: {evictionSoft: {nodefs.available: 101%}, evictionSoftGracePeriod: {nodefs.available: 1m}}}`, want: `spec.kubelet.evictionSoft.nodefs.available: Invalid value: "101%": spec.kubelet.evictionSoft.nodefs.available in body should match`},
	{name: "eviction thresholds as percentages and quantities are accepted", base: baseEC2NodeClass, patch: `spec: {kubelet: {evictionHard: {memory.available: 5%, nodefs.available: "10.5%", pid.available: "", imagefs.available: 100.0%}, evictionSoft: {memory.available: 500Mi}, evictionSoftGracePeriod: {memory.available: 1m30s}}}`},
	{name: "kubeReserved value that is not a quantity", base: baseEC2NodeClass, patch: `spec: {kubelet: {kubeReserved: {memory: 1 Gi}}}`, want: `spec.kubelet.kubeReserved.memory: Invalid value: "1 Gi": spec.kubelet.kubeReserved.memory in body should match '^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$'`},
	{name: "systemReserved value that is not a quantity", base: baseEC2NodeClass, patch: `spec: {kubelet: {systemReserved: {cpu: lots}}}`, want: `spec.kubelet.systemReserved.cpu: Invalid value: "lots": spec.kubelet.systemReserved.cpu in body should match`},
	{name: "networkInterfaces without the primary interface", base: baseEC2NodeClass, patch: `spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 1, interfaceType: interface}]}`, want: "networkInterfaces must include a primary interface with interfaceType='interface'"},
	{name: "networkInterfaces with an efa-only primary", base: baseEC2NodeClass, patch: `spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: efa-only}]}`, want: "networkInterfaces must include a primary interface with interfaceType='interface'"},
	{name: "empty networkInterfaces are accepted", base: baseEC2NodeClass, patch: `spec: {networkInterfaces: []}`},
	{name: "networkInterfaces with a repeated pair", base: baseEC2NodeClass, patch: `spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}]}`, want: "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
	{name: "networkInterfaces with two efa-only on one card", base: baseEC2NodeClass, patch: `spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 1, interfaceType: efa-only}]}`, want: "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
	{name: "networkInterfaces with one efa-only per card are accepted", base: baseEC2NodeClass, patch: `spec: {networkInterfaces: [{networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}, {networkCardIndex: 0, deviceIndex: 1, interfaceType: efa-only}, {networkCardIndex: 1, deviceIndex: 0, interfaceType: efa-only}]}`},
	{name: "empty connectionTracking", base: baseEC2NodeClass, patch: `spec: {connectionTracking: {}}`, want: "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
	{name: "empty placementGroupSelector", base: baseEC2NodeClass, patch: `spec: {placementGroupSelector: {}}`, want: "expected at least one, got none, ['name', 'id']"},
	{name: "placementGroupSelector with name and id", base: baseEC2NodeClass, patch: `spec: {placementGroupSelector: {name: training, id: pg-0123}}`, want: "'name' and 'id' are mutually exclusive"},
	{name: "unknown instanceStorePolicy", base: baseEC2NodeClass, patch: `spec: {instanceStorePolicy: RAID1}`, want: `Unsupported value: "RAID1": supported values: "RAID0"`},
	{name: "bad subnet id", base: baseEC2NodeClass, patch: `spec: {subnetSelectorTerms: [{id: vpc-0123}]}`, want: `spec.subnetSelectorTerms[0].id: Invalid value: "vpc-0123"`},
	// NodeOverlay (karpenter.sh/v1alpha1), as the AWS provider's CRD has it.
	{name: "overlay with price and priceAdjustment", base: baseNodeOverlay, patch: `spec: {price: "0.5", priceAdjustment: "-10%"}`, want: "cannot set both 'price' and 'priceAdjustment'"},
	{name: "overlay adding cpu", base: baseNodeOverlay, patch: `spec: {capacity: {cpu: "2"}}`, want: "invalid resource restricted"},
	{name: "overlay adding pods", base: baseNodeOverlay, patch: `spec: {capacity: {pods: "20"}}`, want: "invalid resource restricted"},
	{name: "overlay adding an extended resource and hugepages is accepted", base: baseNodeOverlay, patch: `spec: {capacity: {example.com/device: "2", hugepages-2Mi: 1Gi}}`},
	{name: "overlay cut beyond 100%", base: baseNodeOverlay, patch: `spec: {priceAdjustment: "-150%"}`, want: `spec.priceAdjustment: Invalid value: "-150%"`},
	{name: "overlay cut of 100% is accepted", base: baseNodeOverlay, patch: `spec: {priceAdjustment: "-100%"}`},
	{name: "overlay rise in percent is accepted", base: baseNodeOverlay, patch: `spec: {priceAdjustment: "+250%"}`},
	{name: "overlay adjustment without a sign", base: baseNodeOverlay, patch: `spec: {priceAdjustment: "10%"}`, want: `spec.priceAdjustment: Invalid value: "10%"`},
	{name: "overlay absolute adjustment is accepted", base: baseNodeOverlay, patch: `spec: {priceAdjustment: "-0.05"}`},
	{name: "overlay negative price", base: baseNodeOverlay, patch: `spec: {price: "-1"}`, want: `spec.price: Invalid value: "-1"`},
	{name: "overlay weight zero", base: baseNodeOverlay, patch: `spec: {weight: 0}`, want: "spec.weight in body should be greater than or equal to 1"},
	{name: "overlay weight above 10000", base: baseNodeOverlay, patch: `spec: {weight: 10001}`, want: "spec.weight in body should be less than or equal to 10000"},
	{name: "overlay without requirements", base: baseNodeOverlay, patch: `spec: {requirements: null}`, want: "spec.requirements: Required value"},
	{name: "overlay on a capacity reservation", base: baseNodeOverlay, patch: `spec: {requirements: [{key: karpenter.k8s.aws/capacity-reservation-id, operator: Exists}]}`, want: `label domain "karpenter.k8s.aws" is restricted`},
	{name: "overlay on a capacity type is accepted", base: baseNodeOverlay, patch: `spec: {requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]}`},
	{name: "overlay on the hostname", base: baseNodeOverlay, patch: `spec: {requirements: [{key: kubernetes.io/hostname, operator: Exists}]}`, want: `label "kubernetes.io/hostname" is restricted`},
	{name: "overlay Gte with two values", base: baseNodeOverlay, patch: `spec: {requirements: [{key: karpenter.k8s.aws/instance-cpu, operator: Gte, values: ["2", "4"]}]}`, want: "requirements operator 'Gt', 'Lt', 'Gte' or 'Lte' must have a single positive integer value"},
	// CapacityBuffer (autoscaling.x-k8s.io/v1beta1).
	{name: "buffer with a template and a scalable", base: baseCapacityBuffer, patch: `spec: {scalableRef: {kind: Deployment, name: web}}`, want: "You must define either PodTemplateRef or ScalableRef, but not both"},
	{name: "buffer template without replicas or limits", base: baseCapacityBuffer, patch: `spec: {replicas: null}`, want: "If podTemplateRef is set, replicas or limits must also be set"},
	{name: "buffer template with limits alone is accepted", base: baseCapacityBuffer, patch: `spec: {replicas: null, limits: {cpu: "4"}}`},
	{name: "buffer negative replicas", base: baseCapacityBuffer, patch: `spec: {replicas: -1}`, want: "spec.replicas in body should be greater than or equal to 0"},
	{name: "buffer empty template name", base: baseCapacityBuffer, patch: `spec: {podTemplateRef: {name: ""}}`, want: "spec.podTemplateRef.name in body should be at least 1 chars long"},
	{name: "buffer scalable without a kind", base: baseCapacityBuffer, patch: `spec: {podTemplateRef: null, replicas: null, scalableRef: {name: web}}`, want: "spec.scalableRef.kind: Required value"},
}

func TestValidation(t *testing.T) {
	ctx := context.Background()
	client := dyn(t)
	rejected := 0
	for i, tc := range validationCases {
		if tc.want != "" {
			rejected++
		}
		t.Run(tc.name, func(t *testing.T) {
			o := patched(t, tc.base, tc.patch)
			o.SetName(fmt.Sprintf("case-%d", i))
			res := resourceFor(client, o.GetKind())
			t.Cleanup(func() { _ = res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}) })
			created, err := res.Create(ctx, o, metav1.CreateOptions{FieldValidation: "Strict"})
			if tc.update != "" {
				if err != nil {
					t.Fatalf("create before update: %v", err)
				}
				updated := patchObject(t, created, tc.update)
				_, err = res.Update(ctx, updated, metav1.UpdateOptions{FieldValidation: "Strict"})
			}
			checkErr(t, err, tc.want)
		})
	}
	if rejected < 40 {
		t.Errorf("only %d rejection cases; the API contract needs at least 40", rejected)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("want accepted, got %v", err)
	case want != "" && err == nil:
		t.Fatalf("want rejected with %q, got accepted", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("want error containing %q, got %v", want, err)
	}
}

func patched(t *testing.T, base, patch string) *unstructured.Unstructured {
	t.Helper()
	return patchObject(t, obj(t, base), patch)
}

func patchObject(t *testing.T, o *unstructured.Unstructured, patch string) *unstructured.Unstructured {
	t.Helper()
	if patch == "" {
		return o.DeepCopy()
	}
	doc, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	p, err := yaml.YAMLToJSON([]byte(patch))
	if err != nil {
		t.Fatalf("bad patch YAML: %v", err)
	}
	out, err := jsonpatch.MergePatch(doc, p)
	if err != nil {
		t.Fatalf("applying patch: %v", err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(out); err != nil {
		t.Fatal(err)
	}
	return u
}

// statusCase writes status (through the status subresource) to a created
// object; want is as in validationCase.
type statusCase struct {
	name, base string
	// status is the status as YAML.
	status string
	want   string
	// path and value, when set, are a field the accepted status must hold.
	path  []string
	value any
}

const (
	readyCondition = `{type: Ready, status: "True", reason: Ready, message: "", lastTransitionTime: "2025-01-01T00:00:00Z"}`
)

var statusCases = []statusCase{
	// NodePool and NodeClaim conditions are a map keyed by type, as in Karpenter.
	{name: "NodePool conditions with a repeated type", base: baseNodePool, status: `{conditions: [` + readyCondition + `, ` + readyCondition + `]}`, want: `status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}`},
	{name: "NodeClaim conditions with a repeated type", base: baseNodeClaim, status: `{conditions: [` + readyCondition + `, ` + readyCondition + `]}`, want: `status.conditions[1]: Duplicate value: map[string]interface {}{"type":"Ready"}`},
	// A NodeClaim's conditions are Karpenter's own type: reason and message may be left out.
	{name: "NodeClaim condition without reason or message", base: baseNodeClaim, status: `{conditions: [{type: Launched, status: Unknown, lastTransitionTime: "2025-01-01T00:00:00Z"}]}`},
	{name: "NodeClaim condition with an empty reason", base: baseNodeClaim, status: `{conditions: [{type: Launched, status: Unknown, reason: "", lastTransitionTime: "2025-01-01T00:00:00Z"}]}`},
	{name: "NodeClaim condition reason that is not CamelCase", base: baseNodeClaim, status: `{conditions: [{type: Launched, status: Unknown, reason: "not launched", lastTransitionTime: "2025-01-01T00:00:00Z"}]}`, want: `status.conditions[0].reason: Invalid value: "not launched"`},
	// A NodePool's conditions stay metav1.Condition, as in Karpenter.
	{name: "NodePool condition with an empty reason", base: baseNodePool, status: `{conditions: [{type: Ready, status: "True", reason: "", message: "", lastTransitionTime: "2025-01-01T00:00:00Z"}]}`, want: `status.conditions[0].reason: Invalid value: "": conditions[0].reason in body should be at least 1 chars long`},
	{name: "NodePool nodes default to 0", base: baseNodePool, status: `{conditions: [` + readyCondition + `]}`, path: []string{"status", "nodes"}, value: int64(0)},
}

func TestStatusValidation(t *testing.T) {
	ctx := context.Background()
	client := dyn(t)
	for i, tc := range statusCases {
		t.Run(tc.name, func(t *testing.T) {
			o := obj(t, tc.base)
			o.SetName(fmt.Sprintf("status-%d", i))
			res := resourceFor(client, o.GetKind())
			t.Cleanup(func() { _ = res.Delete(ctx, o.GetName(), metav1.DeleteOptions{}) })
			created, err := res.Create(ctx, o, metav1.CreateOptions{})
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			status := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.status), &status); err != nil {
				t.Fatalf("bad status YAML: %v", err)
			}
			created.Object["status"] = status
			updated, err := res.UpdateStatus(ctx, created, metav1.UpdateOptions{FieldValidation: "Strict"})
			checkErr(t, err, tc.want)
			if tc.path != nil {
				got, _, _ := unstructured.NestedFieldNoCopy(updated.Object, tc.path...)
				if got != tc.value {
					t.Fatalf("%v = %#v, want %#v", tc.path, got, tc.value)
				}
			}
		})
	}
}
