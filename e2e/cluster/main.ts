/**
 * `npm run cluster`: starts the test cluster for manual use and prints the kubeconfig
 * paths; Ctrl-C stops it. The same cluster the Kubernetes tests use.
 */
import { TestCluster } from "./cluster.js";

const cluster = await TestCluster.start();
console.log(`cluster up; files in ${cluster.dir}`);
console.log(`  admin:    KUBECONFIG=${cluster.adminKubeconfig}`);
console.log(`  operator: KUBECONFIG=${cluster.operatorKubeconfig}`);
const stop = (): void => void cluster.stop().then(() => process.exit(0));
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
