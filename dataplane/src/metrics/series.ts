import { Counter, Gauge, type Metric, type Registry } from "prom-client";

/**
 * Per-series slots: the numbers of one labelled series, found once for a label set (a
 * model's entry, a gRPC method) and kept by whoever counts; a request then only adds to
 * plain number fields. prom-client keeps the registry, the names, the help and the
 * exposition: a counter's or gauge's slots are written into its prom-client metric when
 * /metrics is read (its `collect`), and a histogram is a small metric of our own whose
 * `get()` gives prom-client's own shape. Looking a series up by its labels (prom-client
 * hashes the label object on every call) and the label objects themselves were about a
 * sixth of the data plane's time per request (design/issue-39.md §0.2).
 *
 * A series shows from its first use on, in the order of first use, as prom-client shows
 * them (the golden exposition test holds the bytes).
 */

type Labels<L extends string> = Readonly<Record<L, string>>;

/** The series of one family, by their label values; each listed at its first use. */
class SeriesTable<L extends string, S extends { readonly labels: Labels<L> }> {
  private readonly byKey = new Map<string, S>();
  /** In order of first use: the exposition's order. */
  readonly listed: S[] = [];

  constructor(
    private readonly labelNames: readonly L[],
    private readonly create: (labels: Labels<L>) => S,
  ) {}

  /** The series of these labels (made once; counts nothing until it is used). */
  get(labels: Labels<L>): S {
    const key = this.labelNames.map((name) => labels[name]).join("\u0000");
    let series = this.byKey.get(key);
    if (series === undefined) {
      series = this.create(labels);
      this.byKey.set(key, series);
    }
    return series;
  }
}

/**
 * What a family keeps per model and key (an endpoint): made once by `make`, found again
 * with two lookups and no allocation. Keyed by the model's spec object: a reloaded model
 * is a new one, whose `make` finds the same series again by their labels.
 */
export class KeptPerModel<M extends object, K, V> {
  private readonly byModel = new WeakMap<M, Map<K, V>>();

  constructor(private readonly make: (model: M, key: K) => V) {}

  get(model: M, key: K): V {
    let byKey = this.byModel.get(model);
    if (byKey === undefined) {
      byKey = new Map();
      this.byModel.set(model, byKey);
    }
    let kept = byKey.get(key);
    if (kept === undefined) {
      kept = this.make(model, key);
      byKey.set(key, kept);
    }
    return kept;
  }
}

/** One counter or gauge series: `add` moves its value (the first call lists it). */
export class ValueSlot<L extends string = string> {
  value = 0;
  private listed = false;

  constructor(
    readonly labels: Labels<L>,
    private readonly table: { readonly listed: ValueSlot<L>[] },
  ) {}

  add(amount: number): void {
    if (!this.listed) {
      this.listed = true;
      this.table.listed.push(this);
    }
    this.value += amount;
  }
}

/** One histogram series: counts per bucket (not cumulative), sum and count. */
export class HistogramSlot<L extends string = string> {
  sum = 0;
  count = 0;
  readonly buckets: number[];
  private listed = false;

  constructor(
    readonly labels: Labels<L>,
    private readonly family: { readonly listed: HistogramSlot<L>[]; readonly upperBounds: readonly number[] },
  ) {
    this.buckets = new Array<number>(family.upperBounds.length).fill(0);
  }

  observe(value: number): void {
    if (!this.listed) {
      this.listed = true;
      this.family.listed.push(this);
    }
    const bounds = this.family.upperBounds;
    // The first bucket whose upper bound holds the value (past the last: only +Inf).
    for (let i = 0; i < bounds.length; i++) {
      if (value <= bounds[i]!) {
        this.buckets[i]!++;
        break;
      }
    }
    this.sum += value;
    this.count++;
  }
}

interface FamilyOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
}

/** A prom-client Counter whose series are slots, written into it when /metrics is read. */
export class SlotCounter<L extends string> {
  private readonly table: SeriesTable<L, ValueSlot<L>>;

  constructor(register: Registry, options: FamilyOptions<L>) {
    const table: SeriesTable<L, ValueSlot<L>> = new SeriesTable(
      options.labelNames,
      (labels) => new ValueSlot(labels, table),
    );
    this.table = table;
    new Counter<L>({
      ...options,
      registers: [register],
      collect() {
        this.reset();
        for (const slot of table.listed) this.inc(slot.labels, slot.value);
      },
    });
  }

  /** The slot of a label set: look it up once, keep it, add to it per request. */
  series(labels: Labels<L>): ValueSlot<L> {
    return this.table.get(labels);
  }
}

/**
 * A prom-client Gauge whose series are slots. `beforeScrape` may add series (with
 * `series(labels).add(0)`) that must show even when nothing moved them.
 */
export class SlotGauge<L extends string> {
  private readonly table: SeriesTable<L, ValueSlot<L>>;

  constructor(
    register: Registry,
    options: FamilyOptions<L> & { readonly beforeScrape?: (series: (labels: Labels<L>) => ValueSlot<L>) => void },
  ) {
    const table: SeriesTable<L, ValueSlot<L>> = new SeriesTable(
      options.labelNames,
      (labels) => new ValueSlot(labels, table),
    );
    this.table = table;
    const { beforeScrape, ...family } = options;
    new Gauge<L>({
      ...family,
      registers: [register],
      collect() {
        beforeScrape?.((labels) => table.get(labels));
        this.reset();
        for (const slot of table.listed) this.set(slot.labels, slot.value);
      },
    });
  }

  series(labels: Labels<L>): ValueSlot<L> {
    return this.table.get(labels);
  }
}

/** One exposed sample, as prom-client's metrics give them to its registry (`get()`). */
interface Sample {
  readonly value: number;
  readonly labels: Readonly<Record<string, string | number>>;
  readonly metricName: string;
}

/**
 * A histogram whose series are slots: registered with prom-client's registry as a metric
 * of its own (prom-client has no way to add observations in bulk). prom-client's registry
 * and its cluster aggregation read a metric through `get()` only; this one answers in the
 * shape prom-client's Histogram answers: per series, the cumulative buckets labelled `le`
 * first, `+Inf`, then `_sum` and `_count`.
 */
export class SlotHistogram<L extends string> {
  readonly type = "histogram";
  readonly aggregator = "sum";
  readonly name: string;
  readonly help: string;
  /** As prom-client's metrics name them (the generated metrics reference reads them). */
  readonly labelNames: readonly L[];
  readonly upperBounds: readonly number[];
  readonly listed: HistogramSlot<L>[] = [];
  private readonly table: SeriesTable<L, HistogramSlot<L>>;

  constructor(register: Registry, options: FamilyOptions<L> & { readonly buckets: readonly number[] }) {
    this.name = options.name;
    this.help = options.help;
    this.labelNames = options.labelNames;
    this.upperBounds = [...options.buckets];
    this.table = new SeriesTable<L, HistogramSlot<L>>(options.labelNames, (labels) => new HistogramSlot(labels, this));
    register.registerMetric(this as unknown as Metric);
  }

  series(labels: Labels<L>): HistogramSlot<L> {
    return this.table.get(labels);
  }

  /** prom-client awaits every metric's get(). */
  async get(): Promise<{ name: string; help: string; type: string; aggregator: string; values: Sample[] }> {
    const values: Sample[] = [];
    const bucket = `${this.name}_bucket`;
    for (const slot of this.listed) {
      let cumulative = 0;
      this.upperBounds.forEach((le, i) => {
        cumulative += slot.buckets[i]!;
        values.push({ value: cumulative, labels: { le, ...slot.labels }, metricName: bucket });
      });
      values.push({ value: slot.count, labels: { le: "+Inf", ...slot.labels }, metricName: bucket });
      values.push({ value: slot.sum, labels: { ...slot.labels }, metricName: `${this.name}_sum` });
      values.push({ value: slot.count, labels: { ...slot.labels }, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: this.type, aggregator: this.aggregator, values };
  }

  /** prom-client's Registry.resetMetrics: every series back to zero (the slots stay where they are kept). */
  reset(): void {
    for (const slot of this.listed) {
      slot.sum = 0;
      slot.count = 0;
      slot.buckets.fill(0);
    }
  }
}
