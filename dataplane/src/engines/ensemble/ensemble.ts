import {
  checkEnsembleSteps,
  type CheckedEnsemble,
  type EnsembleSettings,
  type StepModel,
} from "../../../../lib/engines/ensemble.js";
import { internal, unavailable } from "../../../../lib/errors.js";
import type { Engine, EngineRequest, EngineResponse, EngineRuntime, InferOptions } from "../engine.js";
import { Limiter } from "./limiter.js";
import { EnsembleRun, type EnsemblePlan } from "./run.js";

/**
 * `platform: "ensemble"`: Triton's ensemble scheduler. Each request runs the step graph, a
 * step as soon as its inputs are ready, each step a call of its model through the pipeline
 * (runtime.inference(), as a Python model's BLS call), so the step models' checks,
 * scheduling, statistics and metrics apply to it. The ensemble starts (is READY) once its
 * step models are loaded here and agree with its maps.
 */
export class EnsembleEngine implements Engine {
  private plan: EnsemblePlan | undefined;

  constructor(
    private readonly settings: EnsembleSettings,
    private readonly runtime: EngineRuntime,
  ) {}

  async start(): Promise<void> {
    const { models } = this.runtime;
    if (models === undefined) throw internal("ensembles need the model registry, which this data plane lacks");
    const { settings } = this;
    const distinct = [...new Set(settings.steps.map((step) => step.modelName))];
    // The step models' loads in the same scan run meanwhile (the registry bounds this by the load timeout).
    const found = new Map(
      await Promise.all(distinct.map(async (name) => [name, await models.dependency(name)] as const)),
    );
    const stepModels = settings.steps.map((step): StepModel => {
      const model = found.get(step.modelName)!;
      if ("reason" in model) {
        const why = model.reason === "" ? "" : ` (${model.reason})`;
        throw unavailable(`step ${step.index}: model '${step.modelName}' is not loaded${why}`);
      }
      return model.spec;
    });
    const checked = checkEnsembleSteps(settings, stepModels, `ensemble '${settings.name}'`);
    this.plan = planOf(settings, checked);
  }

  infer(request: EngineRequest, options: InferOptions): AsyncIterable<EngineResponse> {
    const inference = this.runtime.inference();
    if (this.plan === undefined || inference === undefined) {
      throw unavailable(`ensemble '${this.settings.name}' has not started`);
    }
    return new EnsembleRun(this.plan, inference, request, options).responses();
  }

  async close(): Promise<void> {}
}

function planOf(settings: EnsembleSettings, checked: CheckedEnsemble): EnsemblePlan {
  // The steps each step's outputs flow into, directly or through others (a decoupled step's
  // responses each run these again).
  const downstream = settings.steps.map(() => new Set<number>());
  for (const index of [...settings.order].reverse()) {
    for (const tensor of settings.steps[index]!.inputMap.values()) {
      const from = settings.producer.get(tensor);
      if (from === undefined) continue;
      downstream[from]!.add(index);
      for (const further of downstream[index]!) downstream[from]!.add(further);
    }
  }
  const limit = settings.maxInflightRequests;
  return {
    settings,
    decoupled: checked.models.map((model) => model.decoupled),
    downstream,
    limiters: settings.steps.map(() => (limit > 0 ? new Limiter(limit) : undefined)),
  };
}
