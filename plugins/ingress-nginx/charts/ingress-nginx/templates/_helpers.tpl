{{/* The chart name, or nameOverride. */}}
{{- define "ingress-nginx.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/*
The prefix of every object name: fullnameOverride, or the release name when it
already contains the chart name, or release-chart. Truncated so that suffixes
such as "-controller" still fit in 63 characters.
*/}}
{{- define "ingress-nginx.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "ingress-nginx.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The controller's object name. */}}
{{- define "ingress-nginx.controller.fullname" -}}
{{- printf "%s-controller" (include "ingress-nginx.fullname" .) -}}
{{- end -}}

{{/* Labels that select the controller's pods; they never change after install. */}}
{{- define "ingress-nginx.selectorLabels" -}}
app.kubernetes.io/name: {{ include "ingress-nginx.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Labels on every object. */}}
{{- define "ingress-nginx.labels" -}}
{{ include "ingress-nginx.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The leader-election lease name. */}}
{{- define "ingress-nginx.electionID" -}}
{{- default (printf "%s-leader" (include "ingress-nginx.fullname" .)) .Values.controller.electionID -}}
{{- end -}}

{{/* The controller image reference. */}}
{{- define "ingress-nginx.image" -}}
{{- $tag := default (printf "v%s" .Chart.AppVersion) (toString .Values.controller.image.tag) -}}
{{- printf "%s:%s" .Values.controller.image.repository $tag -}}
{{- end -}}

{{/* "true" when v is true or the string "true" (values may arrive as text). */}}
{{- define "ingress-nginx.isTrue" -}}
{{- if eq (toString .) "true" }}true{{ end -}}
{{- end -}}
