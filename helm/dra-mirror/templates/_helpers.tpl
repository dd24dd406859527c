{{/* Names, labels and the pieces every dra-mirror container shares. */}}

{{- define "dra-mirror.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dra-mirror.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "dra-mirror.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "dra-mirror.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "dra-mirror.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dra-mirror.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "dra-mirror.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "dra-mirror.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "dra-mirror.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "dra-mirror.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "dra-mirror.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "dra-mirror.extraArgs" -}}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/* Settings reach the process as DRA_MIRROR_<GROUP>_<FIELD> variables (service/settings.py);
URLs come only from Secrets. */}}
{{- define "dra-mirror.env" -}}
- name: DRA_MIRROR_HTTP_HOST
  value: "0.0.0.0"
- name: DRA_MIRROR_HTTP_PORT
  value: {{ .Values.service.port | quote }}
- name: DRA_MIRROR_LOG_JSON
  value: {{ .Values.log.json | quote }}
- name: DRA_MIRROR_LOG_LEVEL
  value: {{ .Values.log.level | quote }}
{{- if .Values.clusters.kubeconfigSecret.name }}
- name: DRA_MIRROR_CLUSTERS_KUBECONFIG
  value: /etc/dra-mirror/kubeconfig/{{ .Values.clusters.kubeconfigSecret.key }}
{{- end }}
{{- with .Values.clusters.contexts }}
- name: DRA_MIRROR_CLUSTERS_CONTEXTS
  value: {{ join "," . | quote }}
{{- end }}
- name: DRA_MIRROR_CLUSTERS_IDLE_GRACE
  value: {{ .Values.clusters.idleGraceSeconds | quote }}
{{- if .Values.redis.urlSecret.name }}
- name: DRA_MIRROR_STORE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.redis.urlSecret.name }}
      key: {{ .Values.redis.urlSecret.key }}
{{- else if .Values.redis.deploy.enabled }}
- name: DRA_MIRROR_STORE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "dra-mirror.fullname" . }}-redis-url
      key: url
{{- end }}
{{- if .Values.database.urlSecret.name }}
- name: DRA_MIRROR_HISTORY_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.database.urlSecret.name }}
      key: {{ .Values.database.urlSecret.key }}
- name: DRA_MIRROR_HISTORY_RETENTION_DAYS
  value: {{ .Values.database.retentionDays | quote }}
- name: DRA_MIRROR_HISTORY_PEAK_WARM_DAYS
  value: {{ .Values.database.peakWarmDays | quote }}
{{- with .Values.database.prices }}
- name: DRA_MIRROR_HISTORY_PRICES
  value: {{ . | quote }}
{{- end }}
{{- end }}
{{- if .Values.access.secret.name }}
- name: DRA_MIRROR_ACCESS_CONFIG
  value: /etc/dra-mirror/access/{{ .Values.access.secret.key }}
{{- else if .Values.access.config }}
- name: DRA_MIRROR_ACCESS_CONFIG
  value: {{ .Values.access.config | quote }}
{{- end }}
{{- if .Values.access.insecureNoAuth }}
- name: DRA_MIRROR_ACCESS_INSECURE_NO_AUTH
  value: "true"
{{- end }}
{{- if .Values.alerts.configMap.name }}
- name: DRA_MIRROR_ALERTS_CONFIG
  value: /etc/dra-mirror/alerts/{{ .Values.alerts.configMap.key }}
{{- else if .Values.alerts.config }}
- name: DRA_MIRROR_ALERTS_CONFIG
  value: {{ .Values.alerts.config | quote }}
{{- end }}
{{- if .Values.slack.botToken.secretName }}
- name: DRA_MIRROR_SLACK_BOT_TOKEN
  valueFrom:
    secretKeyRef:
      name: {{ .Values.slack.botToken.secretName }}
      key: {{ .Values.slack.botToken.key }}
{{- end }}
{{- if .Values.slack.signingSecret.secretName }}
- name: DRA_MIRROR_SLACK_SIGNING_SECRET
  valueFrom:
    secretKeyRef:
      name: {{ .Values.slack.signingSecret.secretName }}
      key: {{ .Values.slack.signingSecret.key }}
{{- end }}
{{- with .Values.utilization.config }}
- name: DRA_MIRROR_UTILIZATION_CONFIG
  value: {{ . | quote }}
{{- end }}
{{- end }}

{{/* Writable places under a read-only root filesystem, and the kubeconfig Secret. */}}
{{- define "dra-mirror.volumeMounts" -}}
- name: tmp
  mountPath: /tmp
- name: data
  mountPath: /var/lib/dra-mirror
{{- if .Values.clusters.kubeconfigSecret.name }}
- name: kubeconfig
  mountPath: /etc/dra-mirror/kubeconfig
  readOnly: true
{{- end }}
{{- if .Values.alerts.configMap.name }}
- name: alerts
  mountPath: /etc/dra-mirror/alerts
  readOnly: true
{{- end }}
{{- if .Values.access.secret.name }}
- name: access
  mountPath: /etc/dra-mirror/access
  readOnly: true
{{- end }}
{{- end }}

{{- define "dra-mirror.volumes" -}}
- name: tmp
  emptyDir: {}
- name: data
  emptyDir: {}
{{- if .Values.clusters.kubeconfigSecret.name }}
- name: kubeconfig
  secret:
    secretName: {{ .Values.clusters.kubeconfigSecret.name }}
    items:
      - key: {{ .Values.clusters.kubeconfigSecret.key }}
        path: {{ .Values.clusters.kubeconfigSecret.key }}
{{- end }}
{{- if .Values.alerts.configMap.name }}
- name: alerts
  configMap:
    name: {{ .Values.alerts.configMap.name }}
    items:
      - key: {{ .Values.alerts.configMap.key }}
        path: {{ .Values.alerts.configMap.key }}
{{- end }}
{{- if .Values.access.secret.name }}
- name: access
  secret:
    secretName: {{ .Values.access.secret.name }}
    items:
      - key: {{ .Values.access.secret.key }}
        path: {{ .Values.access.secret.key }}
{{- end }}
{{- end }}

{{- define "dra-mirror.probes" -}}
livenessProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 10
  failureThreshold: 6
readinessProbe:
  httpGet:
    path: /readyz
    port: http
  periodSeconds: 5
  timeoutSeconds: 3  # the state store gets 1 s to answer (docs/operations.md, Probes)
  failureThreshold: 3
startupProbe:
  httpGet:
    path: /healthz
    port: http
  periodSeconds: 2
  failureThreshold: 60
{{- end }}

{{/* The pod template of every Deployment. Called with
(dict "root" $ "component" NAME "args" YAML-LIST-STRING "resources" MAP). */}}
{{- define "dra-mirror.podTemplate" -}}
{{- $root := .root -}}
metadata:
  labels:
    {{- include "dra-mirror.selectorLabels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  {{- with $root.Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "dra-mirror.serviceAccountName" $root }}
  {{- with $root.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml $root.Values.podSecurityContext | nindent 4 }}
  terminationGracePeriodSeconds: 30
  containers:
    - name: dra-mirror
      image: {{ include "dra-mirror.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        {{- .args | nindent 8 }}
      ports:
        - name: http
          containerPort: {{ $root.Values.service.port }}
      env:
        {{- include "dra-mirror.env" $root | nindent 8 }}
      {{- include "dra-mirror.probes" $root | nindent 6 }}
      resources:
        {{- toYaml .resources | nindent 8 }}
      securityContext:
        {{- toYaml $root.Values.securityContext | nindent 8 }}
      volumeMounts:
        {{- include "dra-mirror.volumeMounts" $root | nindent 8 }}
  volumes:
    {{- include "dra-mirror.volumes" $root | nindent 4 }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
