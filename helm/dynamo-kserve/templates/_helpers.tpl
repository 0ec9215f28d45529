{{- define "dynamo-kserve.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "dynamo-kserve.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "dynamo-kserve.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "dynamo-kserve.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "dynamo-kserve.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "dynamo-kserve.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/*
The rules the operator needs in the namespaces it manages: exactly the verbs its code uses.
Server-side apply needs create and patch; every owned kind (a controller's `owns`) is
cached (get, list, watch) and pruned when its owner no longer wants it (delete):
operator/test/unit/rbac.unit.test.ts fails when a rule here misses one. Secrets are read
one by one, never listed.
*/}}
{{- define "dynamo-kserve.namespacedRules" -}}
- apiGroups: [dynamokserve.dev]
  resources: [dynamokservemodels, dynamokserverepositories]
  verbs: [get, list, watch]
- apiGroups: [dynamokserve.dev]
  resources: [dynamokservemodels/status, dynamokserverepositories/status]
  verbs: [patch]
- apiGroups: [dynamokserve.dev]
  resources: [dynamokservemodels/finalizers, dynamokserverepositories/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [autoscaling]
  resources: [horizontalpodautoscalers]
  verbs: [get, list, watch, create, patch, delete]
# A repository's data-plane pods: the operator asks a ready one for its models' states.
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [inference.networking.k8s.io]
  resources: [inferencepools]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [inference.networking.k8s.io]
  resources: [inferencepools/finalizers]
  verbs: [update]
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors]
  verbs: [get, list, watch, create, patch, delete]
# autoscaling.class KEDA: its ScaledObject; minReplicas 0: the activator's identity and its Role
# (which grants only pods get/list/watch, rights the operator holds itself, as RBAC requires).
- apiGroups: [keda.sh]
  resources: [scaledobjects]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [cert-manager.io]
  resources: [certificates]
  verbs: [get, list, watch, create, patch, delete]
# spec.inferencePool.objective; and the endpoint picker's Role grants reads of these (and of
# pods and InferencePools, above): RBAC lets the operator grant only what it holds itself.
- apiGroups: [inference.networking.x-k8s.io]
  resources: [inferenceobjectives]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [inference.networking.x-k8s.io]
  resources: [inferencemodelrewrites]
  verbs: [get, list, watch]
# spec.routes: the routes it writes, and the Gateways they attach to (read, to say one is missing).
- apiGroups: [gateway.networking.k8s.io]
  resources: [grpcroutes, httproutes]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways]
  verbs: [get, list, watch]
{{- end -}}
