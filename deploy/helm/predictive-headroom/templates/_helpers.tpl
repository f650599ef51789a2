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
{{- if and (not .Values.priorityClass.create) (not .Values.priorityClass.name) -}}
{{- fail "priorityClass.name: with priorityClass.create: false, name the existing PriorityClass the placeholder pods use (e.g. overprovisioning, the cluster-overprovisioner chart's)" -}}
{{- end -}}
{{- default (printf "%s-placeholder" (include "ph.fullname" .)) .Values.priorityClass.name -}}
{{- end -}}

{{- define "ph.prometheusSecretName" -}}
{{- default (printf "%s-prometheus" (include "ph.fullname" .)) .Values.prometheus.bearerToken.secretName -}}
{{- end -}}

{{/*
The pools with their targets filled in and checked: a list of dicts with name, kind, namespace,
targetName, existing (placeholder.existing: the Deployment exists, the chart renders none) and `pool`, the pool as the policy file gets it (the values' pool with its target
filled in: pools take exactly the policy file's pool fields). Render errors name the pool by index.
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
{{- if gt $min $max -}}
{{- fail (printf "pools[%d] (%s): minReplicas %d is greater than maxReplicas %d" $i $name $min $max) -}}
{{- end -}}
{{- $target := deepCopy ($pool.target | default dict) -}}
{{- $kind := default "Deployment" $target.kind -}}
{{- if and $target.apiVersion (ne $kind "CapacityBuffer") -}}
{{- fail (printf "pools[%d] (%s): target.apiVersion only pins a CapacityBuffer version; remove it or set target.kind: CapacityBuffer" $i $name) -}}
{{- end -}}
{{- $ph := $pool.placeholder | default dict -}}
{{- $existing := and (kindIs "map" $ph) (eq (toString (get $ph "existing")) "true") -}}
{{- if $existing -}}
{{- if ne $kind "Deployment" -}}
{{- fail (printf "pools[%d].placeholder.existing: existing: true adopts a placeholder Deployment, and the target is a %s: remove placeholder.existing (a %s you create is used as it is) or point target at the Deployment" $i $kind $kind) -}}
{{- end -}}
{{- if not $target.name -}}
{{- fail (printf "pools[%d].placeholder.existing: existing: true needs target.name: the name of the Deployment to adopt (left out, the target is the Deployment the chart would create)" $i) -}}
{{- end -}}
{{- range $key := list "limits" "labels" "annotations" "nodeSelector" "tolerations" "affinity" "topologySpreadConstraints" "spread" "imagePullSecrets" -}}
{{- if hasKey $ph $key -}}
{{- fail (printf "pools[%d].placeholder.%s: %s is ignored with existing: true (the chart renders no placeholder pods; the existing Deployment keeps its own pod template): remove %s, or existing: true to let the chart create the placeholder" $i $key $key $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $targetName := default (printf "%s-placeholder-%s" (include "ph.fullname" $root) $name | trunc 63 | trimSuffix "-") $target.name -}}
{{- $_ := set $target "kind" $kind -}}
{{- $_ := set $target "namespace" (default $root.Release.Namespace $target.namespace) -}}
{{- $allowed := prepend ($root.Values.allowedNamespaces | default list) $root.Release.Namespace -}}
{{- if eq $target.namespace "kube-system" -}}
{{- fail (printf "pools[%d].target.namespace: %q is refused: the daemon never scales in kube-system; put the placeholder in a namespace of its own" $i $target.namespace) -}}
{{- end -}}
{{- if not (has $target.namespace $allowed) -}}
{{- fail (printf "pools[%d].target.namespace: %q is not in allowedNamespaces (allowed: %s, the release namespace first); add it to allowedNamespaces to let the chart grant the daemon rights there" $i $target.namespace (join ", " $allowed)) -}}
{{- end -}}
{{- $_ := set $target "name" $targetName -}}
{{- $p := deepCopy $pool -}}
{{- $_ := set $p "target" $target -}}
{{- $out = append $out (dict "name" $name "kind" $kind "namespace" $target.namespace "targetName" $targetName "existing" $existing "pool" $p) -}}
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


{{/* The placeholder image: placeholder.image.registry, when set, replaces the registry of the
repository (or is put in front of a repository that names none). */}}
{{- define "ph.placeholderImage" -}}
{{- $image := .Values.placeholder.image -}}
{{- $repo := $image.repository -}}
{{- $parts := splitList "/" $repo -}}
{{- $host := first $parts -}}
{{- $hasHost := and (gt (len $parts) 1) (or (contains "." $host) (contains ":" $host) (eq $host "localhost")) -}}
{{- if $image.registry -}}
{{- if $hasHost -}}{{- $repo = join "/" (rest $parts) -}}{{- end -}}
{{- $repo = printf "%s/%s" (trimSuffix "/" $image.registry) $repo -}}
{{- end -}}
{{- printf "%s:%s" $repo $image.tag -}}
{{- end -}}

{{/*
The replicas a placeholder Deployment is rendered with (dict: namespace, name, minReplicas).
The live object's own count when it exists, so `helm upgrade` never resets the daemon's choice
(leaving spec.replicas out would not do: Helm's three-way merge removes a field the previous
release set, and Kubernetes defaults it to 1). Otherwise the pool's minReplicas: on install, for
a pool added by an upgrade, and where there is no cluster to look at (`helm template`, GitOps
tools that render with it: tell those to ignore /spec/replicas, as for an HPA's target).
*/}}
{{- define "ph.placeholderReplicas" -}}
{{- $live := lookup "apps/v1" "Deployment" .namespace .name -}}
{{- if and $live (hasKey ($live.spec | default dict) "replicas") -}}
{{- $live.spec.replicas -}}
{{- else -}}
{{- int (.minReplicas | default 0) -}}
{{- end -}}
{{- end }}

{{/* The main port's name: https (TLS, authorised callers only) unless httpAuth.enabled is false. */}}
{{- define "ph.portName" -}}
{{- if (.Values.httpAuth | default dict).enabled -}}https{{- else -}}http{{- end -}}
{{- end -}}
