{{/*
joiner.validate fails the render on a value Joiner cannot honour, naming
the key and the fix: settings Joiner does not implement, and values
Karpenter's binary would refuse at start. Keys Karpenter v1.14.1's chart
ignores (unknown ones, its older ones) are not refused, since a values file
that installs Karpenter must install Joiner: joiner.unused names them in the
release notes instead. Nothing a values file sets is dropped silently.
*/}}
{{- define "joiner.validate" -}}
{{- $s := .Values.settings | default dict }}
{{- if and (not $s.clusterName) (hasKey $s "aws") (hasKey ($s.aws | default dict) "clusterName") }}
{{- fail "settings.aws.clusterName is Karpenter's pre-v1 key; set settings.clusterName" }}
{{- end }}
{{- if and (not $s.clusterName) (hasKey .Values "clusterName") }}
{{- fail "clusterName is Karpenter's pre-v0.19 key; set settings.clusterName" }}
{{- end }}
{{- $gates := list "nodeOverlay" "nodeRepair" "reservedCapacity" "spotToSpotConsolidation" "staticCapacity" "capacityBuffer" }}
{{- range $k, $v := ($s.featureGates | default dict) }}
{{- if and (has $k $gates) (not (kindIs "bool" $v)) }}
{{- fail (printf "settings.featureGates.%s=%v: want true or false" $k $v) }}
{{- end }}
{{- end }}
{{- if not (has (lower (toString .Values.logLevel)) (list "debug" "info" "error")) }}
{{- fail (printf "logLevel=%v: want debug, info or error" .Values.logLevel) }}
{{- end }}
{{- if ne (toJson .Values.logOutputPaths) (toJson (list "stdout")) }}
{{- fail "logOutputPaths: Joiner logs to stdout only; remove the key or set [stdout]" }}
{{- end }}
{{- if ne (toJson .Values.logErrorOutputPaths) (toJson (list "stderr")) }}
{{- fail "logErrorOutputPaths: Joiner logs errors to stderr only; remove the key or set [stderr]" }}
{{- end }}
{{- end }}

{{/*
joiner.unused lists, one "- key: why" line each, the values this chart
does not use: keys Karpenter v1.14.1's chart does not have either (a typo,
or a key of an older chart: webhook.*, postInstallHook.*, logConfig.*),
settings it does not know, and Karpenter's pre-v1 keys, with their v1
homes. Karpenter's chart ignores them without a word; NOTES.txt prints them.
*/}}
{{- define "joiner.unused" -}}
{{- $top := list "additionalAnnotations" "additionalClusterRoleRules" "additionalLabels" "affinity" "controller" "dnsConfig" "dnsPolicy" "extraVolumes" "fullnameOverride" "hostNetwork" "imagePullPolicy" "imagePullSecrets" "initContainers" "logErrorOutputPaths" "logLevel" "logOutputPaths" "nameOverride" "nodeSelector" "podAnnotations" "podDisruptionBudget" "podLabels" "podSecurityContext" "priorityClassName" "replicas" "revisionHistoryLimit" "schedulerName" "service" "serviceAccount" "serviceMonitor" "settings" "strategy" "terminationGracePeriodSeconds" "tolerations" "topologySpreadConstraints" "global" }}
{{- $older := dict
  "webhook" "Karpenter's conversion webhook (v1.0–v1.1); Joiner serves no webhook, as Karpenter v1.14 serves none"
  "postInstallHook" "Karpenter's post-install hook (v1.0–v1.1); nothing needs patching"
  "logConfig" "Karpenter's pre-v0.32 logging block; use logLevel"
  "clusterName" "Karpenter's pre-v0.19 key; settings.clusterName is used"
  "clusterEndpoint" "Karpenter's pre-v0.19 key; set settings.clusterEndpoint"
  "aws" "Karpenter's pre-v0.19 block; set spec.role or spec.instanceProfile of each EC2NodeClass" }}
{{- range $k, $v := .Values }}
{{- if not (has $k $top) }}
- {{ $k }}: {{ get $older $k | default "not a value of Karpenter v1.14.1's chart or Joiner's (a typo?)" }}
{{- end }}
{{- end }}
{{- $s := .Values.settings | default dict }}
{{- $known := list "awsFeatureGates" "batchIdleDuration" "batchMaxDuration" "clusterCABundle" "clusterName" "clusterEndpoint" "eksControlPlane" "interruptionQueue" "isolatedVPC" "vmMemoryOverheadPercent" "reservedENIs" "preferencePolicy" "minValuesPolicy" "amiRefreshInterval" "subnetRefreshInterval" "disableClusterStateObservability" "disableDryRun" "enableZonalShift" "ignoreDRARequests" "featureGates" }}
{{- $moved := dict
  "clusterName" "settings.clusterName"
  "clusterEndpoint" "settings.clusterEndpoint"
  "interruptionQueueName" "settings.interruptionQueue"
  "isolatedVPC" "settings.isolatedVPC"
  "vmMemoryOverheadPercent" "settings.vmMemoryOverheadPercent"
  "reservedENIs" "settings.reservedENIs"
  "defaultInstanceProfile" "spec.role or spec.instanceProfile of each EC2NodeClass"
  "tags" "spec.tags of each EC2NodeClass"
  "enablePodENI" "nothing: v1 removed it (pod ENIs are the VPC CNI's)"
  "enableENILimitedPodDensity" "nothing: v1 removed it (set spec.kubelet.maxPods of an EC2NodeClass)"
  "nodeNameConvention" "nothing: v1 removed it (node names are the instances' private DNS names)"
  "assumeRoleARN" "nothing: v1 removed it (use IRSA or Pod Identity on the service account)"
  "assumeRoleDuration" "nothing: v1 removed it (use IRSA or Pod Identity on the service account)" }}
{{- range $k, $v := $s }}
{{- if eq $k "aws" }}
{{- range $ak, $av := $v }}
- settings.aws.{{ $ak }}: Karpenter's pre-v1 key; in v1 it is {{ get $moved $ak | default "gone" }}
{{- end }}
{{- else if not (has $k $known) }}
- settings.{{ $k }}: not a setting of Karpenter v1.14.1 or Joiner (a typo?)
{{- end }}
{{- end }}
{{- $gates := list "nodeOverlay" "nodeRepair" "reservedCapacity" "spotToSpotConsolidation" "staticCapacity" "capacityBuffer" }}
{{- range $k, $v := ($s.featureGates | default dict) }}
{{- if eq $k "driftEnabled" }}
- settings.featureGates.driftEnabled: Karpenter's pre-v1 gate; v1 removed it (drift is always on)
{{- else if not (has $k $gates) }}
- settings.featureGates.{{ $k }}: not a feature gate of Karpenter v1.14.1 or Joiner (gates: {{ join ", " $gates }})
{{- end }}
{{- end }}
{{- range $k, $v := ($s.awsFeatureGates | default dict) }}
- settings.awsFeatureGates.{{ $k }}: not a value of Karpenter v1.14.1's chart{{ if and (eq $k "nodeClassCEL") (ne (toString $v) "false") }}; Joiner's EC2NodeClass validation is its CRD's CEL rules already{{ end }}
{{- end }}
{{- if and (hasKey $s "ignoreDRARequests") (eq (toString $s.ignoreDRARequests) "false") }}
- settings.ignoreDRARequests=false: Karpenter's chart drops a false value too, so DRA requests stay ignored (Joiner does not model them)
{{- end }}
{{- end }}
