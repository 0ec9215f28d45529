import { mkdirSync, readdirSync } from "node:fs";
import { basename, join } from "node:path";
import { goModuleDir, pinnedVersion, type TestCluster } from "../cluster/cluster.js";
import { Daemons, waitFor } from "../cluster/daemons.js";
import { accepts } from "./ports.js";
import { TRAEFIK } from "./platform.js";

/**
 * A real Gateway API implementation for the gateway path: Traefik (built from its pinned Go
 * module by e2e/platform/build.sh), run on this machine with its Kubernetes Gateway provider
 * against the test cluster. It turns Gateways and HTTPRoutes into routes, and reaches a
 * Service's endpoints over h2c when the Service port's appProtocol is kubernetes.io/h2c.
 */

/** The controller name Traefik's Gateway provider takes GatewayClasses for. */
export const TRAEFIK_CONTROLLER = "traefik.io/gateway-controller";

/** The Gateway API's standard-channel CRDs, from its pinned Go module. */
export function gatewayApiCrdFiles(): string[] {
  const folder = join(
    goModuleDir("sigs.k8s.io/gateway-api", pinnedVersion("GATEWAY_API_VERSION")),
    "config",
    "crd",
    "standard",
  );
  return readdirSync(folder)
    .filter((name) => name.endsWith(".yaml"))
    .sort()
    .map((name) => join(folder, name));
}

/**
 * Installs the Gateway API's CRDs that the cluster does not have yet (a suite before may have
 * installed some or all of them; creating one that exists is refused).
 */
export async function installGatewayApi(cluster: Pick<TestCluster, "hasCrd" | "installCrdFile">): Promise<void> {
  for (const file of gatewayApiCrdFiles()) {
    // <group>_<plural>.yaml holds the CRD <plural>.<group>.
    const [group, plural] = basename(file, ".yaml").split("_");
    if (!(await cluster.hasCrd(`${plural}.${group}`))) await cluster.installCrdFile(file);
  }
}

/**
 * Traefik's GatewayClass and a Gateway of it in `default` with one HTTP listener, `web`, on
 * `port` (the entry point Traefik.start opens).
 */
export function traefikGateway(name: string, port: number): object[] {
  return [
    {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "GatewayClass",
      metadata: { name: "traefik" },
      spec: { controllerName: TRAEFIK_CONTROLLER },
    },
    {
      apiVersion: "gateway.networking.k8s.io/v1",
      kind: "Gateway",
      metadata: { name, namespace: "default" },
      spec: { gatewayClassName: "traefik", listeners: [{ name: "web", protocol: "HTTP", port }] },
    },
  ];
}

export class Traefik {
  private constructor(private readonly daemons: Daemons) {}

  /** Starts Traefik with one entry point on 127.0.0.1:`port` (a Gateway's listener on that port is bound to it). */
  static async start(cluster: Pick<TestCluster, "dir" | "adminKubeconfig">, port: number): Promise<Traefik> {
    const dir = join(cluster.dir, "traefik");
    mkdirSync(dir, { recursive: true });
    const daemons = new Daemons(dir);
    daemons.start(
      "traefik",
      TRAEFIK(),
      [
        `--entryPoints.web.address=127.0.0.1:${port}`,
        "--providers.kubernetesGateway=true",
        "--log.level=DEBUG",
        "--global.checkNewVersion=false",
        "--global.sendAnonymousUsage=false",
      ],
      // Its Kubernetes providers read the cluster from the kubeconfig KUBECONFIG names.
      { KUBECONFIG: cluster.adminKubeconfig },
    );
    await waitFor("Traefik's entry point", () => accepts(port));
    return new Traefik(daemons);
  }

  stop(): Promise<void> {
    return this.daemons.stop("traefik");
  }
}
