import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { parseAllDocuments } from "yaml";
import { helmBinary, requireHelm } from "../../../e2e/support/prerequisites.js";
import { REPO_ROOT } from "../../../dataplane/test/fixtures/paths.js";
import type { OwnedKind } from "../../src/kube/owned.js";
import { OWNED_KINDS } from "../../src/operator.js";

const CHART = join(REPO_ROOT, "helm", "dynamo-kserve");

/** What the manager does with an owned kind: caches it (get, list, watch), applies (create, patch), prunes (delete). */
const OWNED_VERBS = ["get", "list", "watch", "create", "patch", "delete"] as const;

interface PolicyRule {
  readonly apiGroups?: string[];
  readonly resources?: string[];
  readonly verbs?: string[];
}

interface RbacObject {
  readonly kind: string;
  readonly metadata: { readonly name: string; readonly namespace?: string };
  readonly rules?: PolicyRule[];
}

/** The chart's roles as `helm template` renders them. */
function renderedRoles(...set: string[]): RbacObject[] {
  const text = execFileSync(
    helmBinary(),
    [
      "template",
      "dks",
      CHART,
      "--namespace",
      "dks-system",
      "--kube-version",
      "1.34.4",
      "--show-only",
      "templates/rbac.yaml",
      ...set,
    ],
    { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] },
  );
  return parseAllDocuments(text)
    .map((document) => document.toJS() as RbacObject | null)
    .filter((object): object is RbacObject => object?.kind === "Role" || object?.kind === "ClusterRole");
}

const groupOf = (kind: OwnedKind): string => (kind.apiVersion.includes("/") ? kind.apiVersion.split("/")[0]! : "");

const grants = (rule: PolicyRule, group: string, resource: string, verb: string): boolean =>
  (rule.apiGroups ?? []).some((candidate) => candidate === group || candidate === "*") &&
  (rule.resources ?? []).some((candidate) => candidate === resource || candidate === "*") &&
  (rule.verbs ?? []).some((candidate) => candidate === verb || candidate === "*");

/** `controller: Kind verb` for every verb on an owned kind that none of `rules` grants. */
function missingGrants(rules: readonly PolicyRule[]): string[] {
  const missing: string[] = [];
  for (const [controller, kinds] of OWNED_KINDS) {
    for (const kind of kinds) {
      for (const verb of OWNED_VERBS) {
        if (!rules.some((rule) => grants(rule, groupOf(kind), kind.plural, verb))) {
          missing.push(`${controller}: ${kind.kind} (${groupOf(kind) || "core"}/${kind.plural}) ${verb}`);
        }
      }
    }
  }
  return missing;
}

describe("the chart's RBAC against the kinds the controllers own", function () {
  this.timeout(30_000);
  before(function () {
    requireHelm(this);
  });

  it("grants every verb the manager uses on every owned kind, cluster-wide (no watchNamespaces)", () => {
    const clusterRoles = renderedRoles().filter((role) => role.kind === "ClusterRole");
    assert.equal(clusterRoles.length, 1);
    assert.deepEqual(missingGrants(clusterRoles[0]!.rules ?? []), []);
  });

  it("grants them in each watched namespace's Role (watchNamespaces)", () => {
    const watched = ["team-a", "team-b"];
    // The release namespace has a Role of its own too (the leader election Lease).
    const roles = renderedRoles("--set", `watchNamespaces={${watched.join(",")}}`).filter(
      (role) => role.kind === "Role" && watched.includes(role.metadata.namespace ?? ""),
    );
    assert.equal(roles.length, watched.length);
    for (const role of roles) assert.deepEqual(missingGrants(role.rules ?? []), [], role.metadata.namespace);
  });

  it("notices a missing verb (the check can fail)", () => {
    const clusterRole = renderedRoles().find((role) => role.kind === "ClusterRole");
    const withoutDelete = (clusterRole?.rules ?? []).map((rule) => ({
      ...rule,
      verbs: (rule.verbs ?? []).filter((verb) => verb !== "delete"),
    }));
    assert.ok(missingGrants(withoutDelete).includes("dynamokservemodel: Deployment (apps/deployments) delete"));
  });
});
