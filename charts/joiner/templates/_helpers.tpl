{{/* The chart's name, cut to Kubernetes' 63 characters. */}}
{{- define "joiner.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The name of the release's objects: fullnameOverride; else the release
name when it names the chart or Karpenter (so "helm install karpenter", the
guides' command, gives the guides' names: the ServiceAccount "karpenter"
that their IRSA role or Pod Identity association trusts); else
"<release>-joiner". */}}
{{- define "joiner.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if or (contains $name .Release.Name) (contains "karpenter" .Release.Name) }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "joiner.selectorLabels" -}}
app.kubernetes.io/name: {{ include "joiner.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "joiner.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "joiner.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* metadata.annotations of every object, when additionalAnnotations has any. */}}
{{- define "joiner.annotations" -}}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{- define "joiner.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "joiner.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: with serviceAccount.create=false, name the existing ServiceAccount to use" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image: the digest when given (repository@sha256:...), else the
tag, else the chart's appVersion. */}}
{{- define "joiner.image" -}}
{{- $img := .Values.controller.image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* FEATURE_GATES in Karpenter's form: Name=bool, comma-separated. */}}
{{- define "joiner.featureGates" -}}
{{- $gates := list }}
{{- range $k, $v := .Values.settings.featureGates }}
{{- $gate := printf "%s%s" (upper (substr 0 1 $k)) (substr 1 (len $k) $k) }}
{{- $gates = append $gates (printf "%s=%t" $gate $v) }}
{{- end }}
{{- join "," $gates }}
{{- end }}

{{/* joiner.withSelector gives each (anti-)affinity term without a label
selector the chart's pod selector, as Karpenter's chart does: a term
"one per host" means one of these pods per host. Takes dict terms root. */}}
{{- define "joiner.withSelector" -}}
{{- $sel := dict "matchLabels" (include "joiner.selectorLabels" .root | fromYaml) }}
{{- $out := dict }}
{{- range $kind, $terms := .terms }}
{{- $list := list }}
{{- range $terms }}
{{- if and (not (hasKey . "labelSelector")) (hasKey . "topologyKey") }}
{{- $list = append $list (merge (dict "labelSelector" $sel) .) }}
{{- else if and (hasKey . "podAffinityTerm") (not (hasKey .podAffinityTerm "labelSelector")) }}
{{- $list = append $list (merge (dict "podAffinityTerm" (merge (dict "labelSelector" $sel) .podAffinityTerm)) .) }}
{{- else }}
{{- $list = append $list . }}
{{- end }}
{{- end }}
{{- $_ := set $out $kind $list }}
{{- end }}
{{- toYaml $out }}
{{- end }}
