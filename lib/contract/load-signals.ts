/**
 * The load signals of the Gateway API Inference Extension's model-server protocol, as the
 * data plane publishes them (dataplane/src/metrics/load.ts) and the operator names them: an
 * endpoint picker scrapes them from every pod of an InferencePool and sends the next request
 * to the least loaded pod, and the operator generates the picker's EndpointPickerConfig from
 * these names (docs/guides/gateways.md, "Load signals"). One module, so the series a pod
 * publishes and the series its picker reads cannot drift apart.
 */

/**
 * Per model (label `model`): what a model's pool reads, its picker's config selecting the
 * model's series (`{model="<name>"}`).
 */
export const MODEL_LOAD_SIGNALS = {
  waiting: "dynamo_kserve_requests_waiting",
  running: "dynamo_kserve_requests_running",
  kvCacheUsage: "dynamo_kserve_kv_cache_usage_ratio",
} as const;

/**
 * The pod's totals over every model it serves (no labels): the picker reads exactly one
 * series per pod and signal, so a pool whose pods serve many models (a
 * DynamoKserveRepository's) is scored on these. Waiting and running are the sums over the
 * models; KV-cache usage is the largest ratio among the models that keep a KV cache (a sum of
 * ratios is no ratio, and a mean would hide one model's full cache), absent when none does.
 */
export const POD_LOAD_SIGNALS = {
  waiting: "dynamo_kserve_server_requests_waiting",
  running: "dynamo_kserve_server_requests_running",
  kvCacheUsage: "dynamo_kserve_server_kv_cache_usage_ratio",
} as const;
