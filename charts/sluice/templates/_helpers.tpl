{{/* The name: argo-rollouts, as the argo-helm chart's, so that a release keeps its objects. */}}
{{- define "sluice.name" -}}
{{- default "argo-rollouts" .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' name: the release's when it holds the name, else <release>-<name>. */}}
{{- define "sluice.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "sluice.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sluice.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "sluice.selectorLabels" -}}
app.kubernetes.io/name: {{ include "sluice.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "sluice.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "sluice.selectorLabels" . }}
app.kubernetes.io/version: {{ regexReplaceAll "@sha256:[a-f0-9]+" (default .Chart.AppVersion .Values.controller.image.tag) "" | trunc 63 | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: argo-rollouts
{{- end -}}

{{- define "sluice.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "sluice.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "sluice.image" -}}
{{- $tag := default .Chart.AppVersion .Values.controller.image.tag -}}
{{- if .Values.controller.image.registry -}}
{{- printf "%s/%s:%s" .Values.controller.image.registry .Values.controller.image.repository $tag -}}
{{- else -}}
{{- printf "%s:%s" .Values.controller.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/*
The controller's rules: what Sluice uses (manifests/install/cluster-role.yaml says why each is
there), the traffic routers' by providerRBAC, then providerRBAC.additionalRules.
*/}}
{{- define "sluice.controller.rules" -}}
- apiGroups: [argoproj.io]
  resources: [rollouts, rollouts/status, rollouts/finalizers]
  verbs: [get, list, watch, update, patch]
- apiGroups: [argoproj.io]
  resources: [analysisruns, experiments]
  verbs: [create, get, list, watch, update, patch, delete]
- apiGroups: [argoproj.io]
  resources: [analysistemplates, clusteranalysistemplates]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [replicasets]
  verbs: [create, get, list, watch, update, patch, delete]
# workloadRef: the Deployment, ReplicaSet or PodTemplate a Rollout takes its template from is
# watched (metadata only) and read; a Deployment migrated from is scaled down (scaleDown) with an
# update carrying the resourceVersion read, as Argo's rules allow.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, update]
- apiGroups: [""]
  resources: [podtemplates]
  verbs: [get, list, watch]
# rollouts.sluice.dev/statefulset and rollouts.sluice.dev/daemonset: the StatefulSet or
# DaemonSet a Rollout drives is watched (metadata only), read, and updated (a StatefulSet's
# partition; on abort the template) carrying the resourceVersion read; its
# ControllerRevisions are listed for the update and stable revisions' templates; a
# DaemonSet's pods are evicted node by node (pods/eviction, below).
- apiGroups: [apps]
  resources: [statefulsets, daemonsets]
  verbs: [get, list, watch, update]
- apiGroups: [apps]
  resources: [controllerrevisions]
  verbs: [list]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, patch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
- apiGroups: [""]
  resources: [pods/eviction]
  verbs: [create]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch, patch, create, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create, get, update]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, get, list, watch, update, patch, delete]
{{- if .Values.providerRBAC.enabled }}
{{- with .Values.providerRBAC.providers }}
{{- if .istio }}
- apiGroups: [networking.istio.io]
  resources: [virtualservices, destinationrules]
  verbs: [get, update]
{{- end }}
{{- if true }}
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [get, create, update]
{{- end }}
{{- if .smi }}
- apiGroups: [split.smi-spec.io]
  resources: [trafficsplits]
  verbs: [get, create, update]
{{- end }}
{{- if .gatewayAPI }}
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes, grpcroutes, tcproutes, tlsroutes]
  verbs: [get, list, update]
{{- end }}
{{- if .traefik }}
- apiGroups: [traefik.io, traefik.containo.us]
  resources: [traefikservices]
  verbs: [get, update]
{{- end }}
{{- if .ambassador }}
- apiGroups: [getambassador.io]
  resources: [mappings]
  verbs: [get, create, update, delete]
- apiGroups: [x.getambassador.io]
  resources: [ambassadormappings]
  verbs: [get, create, update, delete]
{{- end }}
{{- if .apisix }}
- apiGroups: [apisix.apache.org]
  resources: [apisixroutes]
  verbs: [get, create, update, delete]
{{- end }}
{{- if .awsAppMesh }}
- apiGroups: [appmesh.k8s.aws]
  resources: [virtualservices]
  verbs: [get]
- apiGroups: [appmesh.k8s.aws]
  resources: [virtualrouters, virtualnodes]
  verbs: [get, update]
{{- end }}
{{- end }}
{{- if .Values.controller.configRollouts }}
# Config rollouts: the referenced ConfigMaps and Secrets read and watched, their copies made
# and handed to the ReplicaSets that read them.
- apiGroups: [""]
  resources: [configmaps, secrets]
  verbs: [get, list, watch, create, patch]
{{- end }}
{{- if .Values.controller.awsVerifyTargetGroup }}
- apiGroups: [elbv2.k8s.aws]
  resources: [targetgroupbindings]
  verbs: [list]
- apiGroups: [""]
  resources: [endpoints]
  verbs: [get]
{{- end }}
{{- with .Values.providerRBAC.additionalRules }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Reading the argo-rollouts-config ConfigMap by name, and watching the notifications'
ConfigMap and Secret by name, in the controller's namespace. */}}
{{- define "sluice.configRule" -}}
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [argo-rollouts-config]
  verbs: [get]
- apiGroups: [""]
  resources: [configmaps]
  resourceNames: [argo-rollouts-notification-configmap]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [argo-rollouts-notification-secret]
  verbs: [get, list, watch]
{{- end -}}
