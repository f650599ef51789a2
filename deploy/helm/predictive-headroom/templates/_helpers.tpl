{{/* The release's full name: the release name, or "<release>-predictive-headroom". */}}
{{- define "ph.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ph.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "ph.labels" -}}
{{ include "ph.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "ph.serviceAccountName" -}}
{{- default (include "ph.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "ph.leaseName" -}}
{{- default (include "ph.fullname" .) .Values.leaseName -}}
{{- end -}}

{{- define "ph.priorityClassName" -}}
{{- default (printf "%s-placeholder" (include "ph.fullname" .)) .Values.priorityClass.name -}}
{{- end -}}

{{- define "ph.prometheusSecretName" -}}
{{- default (printf "%s-prometheus" (include "ph.fullname" .)) .Values.prometheus.bearerToken.secretName -}}
{{- end -}}

{{/*
The pools with defaults filled in and checked: a list of dicts with name, namespace, kind,
targetName, and the pool's own values. Render errors name the pool by index.
Usage: {{ $pools := include "ph.pools" . | fromYamlArray }}
*/}}
{{- define "ph.pools" -}}
{{- $root := . -}}
{{- $out := list -}}
{{- $names := dict -}}
{{- if not .Values.pools -}}
{{- fail "pools: at least one pool is required (see values.yaml)" -}}
{{- end -}}
{{- range $i, $pool := .Values.pools -}}
{{- $name := required (printf "pools[%d].name is required (a DNS label such as \"general\")" $i) $pool.name -}}
{{- if hasKey $names $name -}}
{{- fail (printf "pools[%d].name: duplicate pool name %q" $i $name) -}}
{{- end -}}
{{- $_ := set $names $name true -}}
{{- $min := int (default 0 $pool.minReplicas) -}}
{{- if not (hasKey $pool "maxReplicas") -}}
{{- fail (printf "pools[%d] (%s): maxReplicas is required" $i $name) -}}
{{- end -}}
{{- $max := int $pool.maxReplicas -}}
{{- if or (lt $min 0) (lt $max 0) -}}
{{- fail (printf "pools[%d] (%s): minReplicas and maxReplicas must not be negative (got %d and %d)" $i $name $min $max) -}}
{{- end -}}
{{- if gt $min $max -}}
{{- fail (printf "pools[%d] (%s): minReplicas %d is greater than maxReplicas %d" $i $name $min $max) -}}
{{- end -}}
{{- $kind := default "Deployment" $pool.kind -}}
{{- if and $pool.apiVersion (ne $kind "CapacityBuffer") -}}
{{- fail (printf "pools[%d] (%s): apiVersion only pins a CapacityBuffer version; remove it or set kind: CapacityBuffer" $i $name) -}}
{{- end -}}
{{- if and (eq $kind "Deployment") (not $pool.resources) -}}
{{- fail (printf "pools[%d] (%s): resources is required for kind Deployment: what one placeholder pod requests, e.g. resources: {cpu: \"1\", memory: 1Gi}" $i $name) -}}
{{- end -}}
{{- $target := default (printf "%s-placeholder-%s" (include "ph.fullname" $root) $name) $pool.targetName -}}
{{- $p := deepCopy $pool -}}
{{- $_ := set $p "name" $name -}}
{{- $_ := set $p "namespace" (default $root.Release.Namespace $pool.namespace) -}}
{{- $_ := set $p "kind" $kind -}}
{{- $_ := set $p "targetName" ($target | trunc 63 | trimSuffix "-") -}}
{{- $_ := set $p "minReplicas" $min -}}
{{- $_ := set $p "maxReplicas" $max -}}
{{- $out = append $out $p -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The target namespaces (sorted, unique) with the pools in each. */}}
{{- define "ph.targetNamespaces" -}}
{{- $byNs := dict -}}
{{- range $pool := include "ph.pools" . | fromYamlArray -}}
{{- $_ := set $byNs $pool.namespace (append (get $byNs $pool.namespace | default list) $pool) -}}
{{- end -}}
{{- toYaml $byNs -}}
{{- end -}}
