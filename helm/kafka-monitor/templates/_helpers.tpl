{{/* Chart name, truncated to the 63 characters Kubernetes names allow. */}}
{{- define "kafka-monitor.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-qualified name; the release name alone when it already contains the chart's. */}}
{{- define "kafka-monitor.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "kafka-monitor.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kafka-monitor.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "kafka-monitor.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "kafka-monitor.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "kafka-monitor.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "kafka-monitor.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The service's configuration: values.config with http pinned to the container port and
state.path to the state volume. */}}
{{- define "kafka-monitor.config" -}}
{{- $config := deepCopy .Values.config }}
{{- $http := dict "host" "0.0.0.0" "port" (int .Values.service.port) }}
{{- with .Values.http.auth }}{{- $_ := set $http "auth" . }}{{- end }}
{{- with .Values.http.tls }}{{- $_ := set $http "tls" . }}{{- end }}
{{- $_ := set $config "http" $http }}
{{- if .Values.state.enabled }}
{{- $state := deepCopy (default (dict) $config.state) }}
{{- $_ = set $state "path" .Values.state.mountPath }}
{{- $_ = set $config "state" $state }}
{{- end }}
{{- toYaml $config }}
{{- end }}

{{/* The state volume's claim: the operator's, or the chart's own. */}}
{{- define "kafka-monitor.stateClaimName" -}}
{{- if .Values.state.persistence.existingClaim }}
{{- .Values.state.persistence.existingClaim }}
{{- else }}
{{- printf "%s-state" (include "kafka-monitor.fullname" . | trunc 57 | trimSuffix "-") }}
{{- end }}
{{- end }}

{{/* A probe with its httpGet scheme set (HTTPS when the service serves TLS). */}}
{{- define "kafka-monitor.probe" -}}
{{- $probe := deepCopy (index . 0) }}
{{- if $probe.httpGet }}
{{- $_ := set $probe.httpGet "scheme" (index . 1) }}
{{- end }}
{{- toYaml $probe }}
{{- end }}
