import { connect, createServer, type Server } from "node:net";

/**
 * TCP ports free on loopback right now (for processes that cannot report the ones they
 * picked), all different: each is held open until every one is taken, since a port closed
 * and asked for again at once is often handed out again.
 */
export async function freePorts(count: number): Promise<number[]> {
  const servers: Server[] = [];
  try {
    return await Promise.all(
      Array.from(
        { length: count },
        () =>
          new Promise<number>((resolve, reject) => {
            const server = createServer();
            servers.push(server);
            server.once("error", reject);
            server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
          }),
      ),
    );
  } finally {
    await Promise.all(servers.map((server) => new Promise((resolve) => server.close(resolve))));
  }
}

/** A TCP port free on loopback right now; several for one process come from freePorts. */
export async function freePort(): Promise<number> {
  const [port] = await freePorts(1);
  return port!;
}

/** True once something accepts connections on the loopback port (a daemon that reports nothing is up). */
export function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}
