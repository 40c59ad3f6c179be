{{/* Names and labels (the conventions of `helm create`). */}}
{{- define "specwatch.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "specwatch.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "specwatch.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "specwatch.labels" -}}
helm.sh/chart: {{ include "specwatch.chart" . }}
{{ include "specwatch.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "specwatch.selectorLabels" -}}
app.kubernetes.io/name: {{ include "specwatch.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "specwatch.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The Secret every process reads: yours (secret.existingSecret) or the chart's. */}}
{{- define "specwatch.secretName" -}}
{{- if .Values.secret.existingSecret }}
{{- .Values.secret.existingSecret }}
{{- else if .Values.secret.values }}
{{- include "specwatch.fullname" . }}
{{- else }}
{{- fail "specwatch needs its secrets: set secret.existingSecret to a Secret with SPECWATCH_SECRET_KEY, SPECWATCH_DATABASE_URL and SPECWATCH_REDIS_URL (recommended), or give them in secret.values" }}
{{- end }}
{{- end }}

{{- define "specwatch.apiUrl" -}}
http://{{ include "specwatch.fullname" . }}-api:{{ .Values.api.port }}
{{- end }}

{{/* The environment of every specwatch container: the ConfigMap, the secrets one by one from the Secret,
     and the wiring between the processes (not settable: the chart owns it). */}}
{{- define "specwatch.env" -}}
envFrom:
  - configMapRef:
      name: {{ include "specwatch.fullname" . }}
env:
  {{- range $key, $optional := dict "SPECWATCH_SECRET_KEY" false "SPECWATCH_DATABASE_URL" false "SPECWATCH_REDIS_URL" false "SPECWATCH_DATABASE_READ_URL" true "SPECWATCH_AUTH_PROXY_SECRET" true }}
  - name: {{ $key }}
    valueFrom:
      secretKeyRef:
        name: {{ include "specwatch.secretName" $ }}
        key: {{ $key }}
        {{- if $optional }}
        optional: true
        {{- end }}
  {{- end }}
  - name: SPECWATCH_API_BASE_URL
    value: {{ include "specwatch.apiUrl" . | quote }}
  - name: SPECWATCH_DATA_DIR
    value: /data
{{- end }}

{{- define "specwatch.volumeMounts" -}}
- name: data
  mountPath: /data
- name: tmp
  mountPath: /tmp
{{- if .Values.alertRules }}
- name: alert-rules
  mountPath: /etc/specwatch/alerts.yaml
  subPath: alerts.yaml
  readOnly: true
{{- end }}
{{- end }}

{{- define "specwatch.volumes" -}}
- name: data
  emptyDir: {}
- name: tmp
  emptyDir: {}
{{- if .Values.alertRules }}
- name: alert-rules
  configMap:
    name: {{ include "specwatch.fullname" . }}-alert-rules
{{- end }}
{{- end }}

{{/* An init container that waits until the API answers /api/v1/ready (the schema is at head). */}}
{{- define "specwatch.waitForApi" -}}
- name: wait-for-api
  image: {{ include "specwatch.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command:
    - python
    - -c
    - |
      import time, urllib.request
      url = "{{ include "specwatch.apiUrl" . }}/api/v1/ready"
      while True:
          try:
              urllib.request.urlopen(url, timeout=5)
              break
          except Exception as exc:
              print(f"waiting for {url}: {exc}", flush=True)
              time.sleep(3)
  securityContext:
    {{- toYaml .Values.containerSecurityContext | nindent 4 }}
  resources:
    {{- toYaml .Values.waitResources | nindent 4 }}
{{- end }}

{{/* Pod-level settings every Deployment shares. */}}
{{- define "specwatch.podSpec" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Restart the pods when the configuration changes. */}}
{{- define "specwatch.podAnnotations" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
{{- if not .Values.secret.existingSecret }}
checksum/secret: {{ include (print .Template.BasePath "/secret.yaml") . | sha256sum }}
{{- end }}
{{- with .Values.podAnnotations }}
{{ toYaml . }}
{{- end }}
{{- end }}
