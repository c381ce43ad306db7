{{/* Labels of every object. */}}
{{- define "skiff.labels" -}}
app.kubernetes.io/part-of: skiff
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The image of a Skiff binary: include "skiff.image" (list . "skiff-controller"); with its
     digest from imageDigests when that names one. */}}
{{- define "skiff.image" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- printf "%s/%s:%s" $root.Values.imageRegistry $name (default $root.Chart.AppVersion $root.Values.imageTag) -}}
{{- with index (default dict $root.Values.imageDigests) $name }}@{{ . }}{{ end -}}
{{- end -}}

{{/* Pod and container security settings shared by the Deployments. */}}
{{- define "skiff.podSecurity" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}
{{- define "skiff.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}
