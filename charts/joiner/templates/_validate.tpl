{{/*
joiner.validate fails the render on a value Joiner cannot honour, naming
the key and the fix: Karpenter's pre-v1 keys (settings.aws.*, which v1
moved), settings and feature gates Joiner does not implement, and keys
neither Karpenter's chart nor Joiner's has. Nothing a values file sets is
dropped silently.
*/}}
{{- define "joiner.validate" -}}
{{- $s := .Values.settings | default dict }}
{{- /* Karpenter v0.x's settings.aws.* and their v1 homes. */}}
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
{{- if hasKey $s "aws" }}
{{- range $k, $v := $s.aws }}
{{- fail (printf "settings.aws.%s is Karpenter's pre-v1 key; in v1 it is %s" $k (get $moved $k | default "gone: remove it")) }}
{{- end }}
{{- fail "settings.aws is Karpenter's pre-v1 block; move its keys to settings (for example settings.aws.clusterName to settings.clusterName)" }}
{{- end }}
{{- $known := list "awsFeatureGates" "batchIdleDuration" "batchMaxDuration" "clusterCABundle" "clusterName" "clusterEndpoint" "eksControlPlane" "interruptionQueue" "isolatedVPC" "vmMemoryOverheadPercent" "reservedENIs" "preferencePolicy" "minValuesPolicy" "amiRefreshInterval" "subnetRefreshInterval" "disableClusterStateObservability" "disableDryRun" "enableZonalShift" "ignoreDRARequests" "featureGates" }}
{{- range $k, $v := $s }}
{{- if not (has $k $known) }}
{{- fail (printf "settings.%s is not a setting of Karpenter v1 or Joiner; remove it (the settings are listed in the chart's values.yaml)" $k) }}
{{- end }}
{{- end }}
{{- /* Settings whose only honoured value is Karpenter's default. */}}
{{- $fixed := list
  (list "ignoreDRARequests" true "Joiner does not model DRA requests; remove the key or set true") }}
{{- range $fixed }}
{{- $k := index . 0 }}
{{- if and (hasKey $s $k) (ne (toString (get $s $k)) (toString (index . 1))) }}
{{- fail (printf "settings.%s=%v is not supported: %s" $k (get $s $k) (index . 2)) }}
{{- end }}
{{- end }}
{{- $gates := list "nodeOverlay" "nodeRepair" "reservedCapacity" "spotToSpotConsolidation" "staticCapacity" "capacityBuffer" }}
{{- range $k, $v := ($s.featureGates | default dict) }}
{{- if eq $k "driftEnabled" }}
{{- fail "settings.featureGates.driftEnabled is Karpenter's pre-v1 gate; v1 removed it (drift is always on): remove it" }}
{{- end }}
{{- if not (has $k $gates) }}
{{- fail (printf "settings.featureGates.%s is not a feature gate of Karpenter v1 or Joiner; remove it (gates: %s)" $k (join ", " $gates)) }}
{{- end }}
{{- if not (kindIs "bool" $v) }}
{{- fail (printf "settings.featureGates.%s=%v: want true or false" $k $v) }}
{{- end }}
{{- end }}
{{- with $s.featureGates }}
{{- end }}
{{- range $k, $v := ($s.awsFeatureGates | default dict) }}
{{- if ne $k "nodeClassCEL" }}
{{- fail (printf "settings.awsFeatureGates.%s is not an AWS feature gate of Karpenter v1; remove it" $k) }}
{{- end }}
{{- if ne (toString $v) "false" }}
{{- fail "settings.awsFeatureGates.nodeClassCEL=true is not supported: Joiner's EC2NodeClass validation is its CRD's CEL rules already; remove it or set false" }}
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
{{- if and .Values.webhook .Values.webhook.enabled }}
{{- fail "webhook.enabled=true: Joiner serves no webhook (Karpenter v1's conversion webhook converts v1beta1 objects, which Joiner does not serve); remove the webhook block or set webhook.enabled=false" }}
{{- end }}
{{- /* Karpenter pre-v1 chart keys at the top level. */}}
{{- if hasKey .Values "clusterName" }}
{{- fail "clusterName is Karpenter's pre-v0.19 key; set settings.clusterName" }}
{{- end }}
{{- if hasKey .Values "clusterEndpoint" }}
{{- fail "clusterEndpoint is Karpenter's pre-v0.19 key; set settings.clusterEndpoint" }}
{{- end }}
{{- if hasKey .Values "aws" }}
{{- fail "aws is Karpenter's pre-v0.19 block; move aws.defaultInstanceProfile to each EC2NodeClass's spec.role or spec.instanceProfile" }}
{{- end }}
{{- end }}
