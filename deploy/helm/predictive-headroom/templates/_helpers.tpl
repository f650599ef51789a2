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
{{- if $image.digest -}}
{{- printf "%s:%s@%s" $repo $image.tag $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo $image.tag -}}
{{- end -}}
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

{{/* The daemon image: repository:tag, repository:tag@digest, or repository@digest (image.digest
set, image.tag empty); the tag defaults to the chart's appVersion. */}}
{{- define "ph.image" -}}
{{- $image := .Values.image -}}
{{- if and $image.digest (not $image.tag) -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else if $image.digest -}}
{{- printf "%s:%s@%s" $image.repository $image.tag $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository ($image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/*
Where the main port's certificate comes from (a dict): source "" (httpAuth off), "mounted"
(httpAuth.tlsSecret, yours), "certManager" (tls.certManager), "chart" (tls.generate: Helm's genCA
and genSignedCert) or "daemon" (self-signed at start); secretName (the Secret mounted, if any);
serverName (the name Prometheus verifies) and dnsNames (the certificate's names).
*/}}
{{- define "ph.tls" -}}
{{- $fullname := include "ph.fullname" . -}}
{{- $tls := .Values.tls | default dict -}}
{{- $source := "" -}}
{{- $secret := "" -}}
{{- if (.Values.httpAuth | default dict).enabled -}}
{{- if .Values.httpAuth.tlsSecret -}}
{{- $source = "mounted" -}}{{- $secret = .Values.httpAuth.tlsSecret -}}
{{- else if ($tls.certManager | default dict).enabled -}}
{{- $source = "certManager" -}}{{- $secret = printf "%s-tls" $fullname -}}
{{- else if $tls.generate -}}
{{- $source = "chart" -}}{{- $secret = printf "%s-tls" $fullname -}}
{{- else -}}
{{- $source = "daemon" -}}
{{- end -}}
{{- end -}}
{{- $ns := .Release.Namespace -}}
{{- $names := list $fullname (printf "%s.%s" $fullname $ns) (printf "%s.%s.svc" $fullname $ns) (printf "%s.%s.svc.cluster.local" $fullname $ns) -}}
{{- toYaml (dict "source" $source "secretName" $secret "serverName" (printf "%s.%s.svc" $fullname $ns) "dnsNames" $names) -}}
{{- end -}}

{{/*
Where the daemon reaches the API server (a dict: cidrs, ports, lookedUp): networkPolicy.apiServer.cidrs
on its ports when set; any address on those ports with allowAny; otherwise the addresses and ports of
the `kubernetes` endpoints, looked up at install and upgrade (the EndpointSlice `kubernetes` in
`default`, or the Endpoints of that name). A render that cannot look (helm template) fails, so
egress to any address is never rendered by default.
*/}}
{{- define "ph.apiServerEgress" -}}
{{- $api := .Values.networkPolicy.apiServer | default dict -}}
{{- if $api.cidrs -}}
{{- toYaml (dict "cidrs" $api.cidrs "ports" $api.ports "lookedUp" false) -}}
{{- else if $api.allowAny -}}
{{- toYaml (dict "cidrs" list "ports" $api.ports "lookedUp" false) -}}
{{- else -}}
{{- $cidrs := list -}}
{{- $ports := list -}}
{{- $slice := lookup "discovery.k8s.io/v1" "EndpointSlice" "default" "kubernetes" -}}
{{- if $slice -}}
{{- range $slice.endpoints | default list -}}
{{- range .addresses | default list -}}
{{- $cidrs = append $cidrs (printf "%s/%s" . (ternary "128" "32" (contains ":" .))) -}}
{{- end -}}
{{- end -}}
{{- range $slice.ports | default list -}}
{{- $ports = append $ports (int .port) -}}
{{- end -}}
{{- else -}}
{{- $endpoints := lookup "v1" "Endpoints" "default" "kubernetes" -}}
{{- range ($endpoints | default dict).subsets | default list -}}
{{- range .addresses | default list -}}
{{- $cidrs = append $cidrs (printf "%s/%s" .ip (ternary "128" "32" (contains ":" .ip))) -}}
{{- end -}}
{{- range .ports | default list -}}
{{- $ports = append $ports (int .port) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if or (not $cidrs) (not $ports) -}}
{{- fail "networkPolicy.apiServer: the API server's addresses are not known: no `kubernetes` endpoints were found in namespace default (a render without a cluster finds none: helm template, --dry-run without =server, Argo CD). Set networkPolicy.apiServer.cidrs (e.g. from `kubectl get endpointslice -n default kubernetes -o jsonpath='{.endpoints[*].addresses}'`, each as a /32), or networkPolicy.apiServer.allowAny: true to allow any address on networkPolicy.apiServer.ports, or install with a cluster (helm install, helm template --dry-run=server)" -}}
{{- end -}}
{{- toYaml (dict "cidrs" (uniq $cidrs | sortAlpha) "ports" (uniq $ports) "lookedUp" true) -}}
{{- end -}}
{{- end -}}


{{/*
The Secret whose token the ServiceMonitor presents (a dict: create, secretName, key, account):
serviceMonitor.token.create makes the ServiceAccount <fullname>-scraper and its token Secret
<fullname>-scraper-token; otherwise the Secret named by serviceMonitor.token.secretName.
*/}}
{{- define "ph.scrapeToken" -}}
{{- $fullname := include "ph.fullname" . -}}
{{- $token := .Values.serviceMonitor.token | default dict -}}
{{- $create := ne (toString $token.create) "false" -}}
{{- $name := $token.secretName -}}
{{- if $create -}}
{{- $name = default (printf "%s-scraper-token" $fullname) $name -}}
{{- else if not $name -}}
{{- fail "serviceMonitor.token.secretName: with serviceMonitor.token.create: false, name the Secret (in the release namespace) holding the token Prometheus presents, and bind its holder with httpAuth.readers; or leave create: true to let the chart make a ServiceAccount that may only read the daemon's endpoints" -}}
{{- end -}}
{{- toYaml (dict "create" $create "secretName" $name "key" (default "token" $token.key) "account" (printf "%s-scraper" $fullname)) -}}
{{- end -}}
