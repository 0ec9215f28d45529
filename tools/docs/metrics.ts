import { collectDefaultMetrics, Registry } from "prom-client";
import { code, generatedNote, page, prose, table } from "./markdown.js";

/**
 * docs/reference/metrics.md: every metric family the data plane and the operator register,
 * read from their prom-client registries as the processes create them. prom-client's
 * default process and Node.js metrics are named in a sentence, not listed: which of them
 * exist depends on the platform and the Node version, not on this project's code.
 */

export interface MetricFamily {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly labels: readonly string[];
}

/** A process's metrics and where they are scraped. */
export interface MetricsSource {
  readonly title: string;
  /** Markdown: where /metrics is served. */
  readonly served: string;
  readonly registry: Registry;
}

/** prom-client keeps a metric's label names on the instance; its types do not declare them. */
function labelNamesOf(metric: object): string[] {
  const labels: unknown = "labelNames" in metric ? metric.labelNames : undefined;
  return Array.isArray(labels) ? labels.map(String) : [];
}

/** The names prom-client's collectDefaultMetrics registers here and now. */
function defaultMetricNames(): Set<string> {
  const scratch = new Registry();
  collectDefaultMetrics({ register: scratch });
  return new Set(scratch.getMetricsAsArray().map(({ name }) => name));
}

/** The families `registry` holds, by name, without prom-client's defaults. */
export function familiesOf(registry: Registry): MetricFamily[] {
  const defaults = defaultMetricNames();
  return registry
    .getMetricsAsArray()
    .filter(({ name }) => !defaults.has(name))
    .map((metric) => ({
      name: metric.name,
      type: String(metric.type),
      help: metric.help,
      labels: labelNamesOf(metric),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

function familyTable(families: readonly MetricFamily[]): string {
  return table(
    ["Family", "Type", "Labels", "Help"],
    families.map(({ name, type, help, labels }) => [code(name), type, labels.map(code).join(", "), prose(help)]),
  );
}

/** The page for `sources`, in the order given. */
export function metricsPage(sources: readonly MetricsSource[]): string {
  return page([
    "# Metrics",
    generatedNote(
      "the prom-client registries the data plane (`dataplane/src/metrics/`), the operator (`operator/src/kube/metrics.ts`) and the activator (`activator/src/metrics.ts`) create",
    ),
    "Every family in Prometheus's text format. A histogram `x` is scraped as `x_bucket` (with the label `le`), `x_sum` and `x_count`. Besides these, each process exports prom-client's default metrics (`process_*` and `nodejs_*`: CPU, memory, open files, event-loop lag, garbage collection, heap).",
    ...sources.flatMap(({ title, served, registry }) => [`## ${title}`, served, familyTable(familiesOf(registry))]),
  ]);
}
