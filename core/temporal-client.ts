import { Client, Connection } from '@temporalio/client';

export interface TemporalHandle {
  connection: Connection;
  client: Client;
  /** Resolves when the server answers within two seconds (used by /readyz). */
  check(): Promise<void>;
  close(): Promise<void>;
}

const GRPC_NOT_FOUND = 5;

// Connections are lazy so the API can start (and answer 503 on video routes) while the
// Temporal server is still coming up or briefly down.
export function createTemporalHandle(options: { address: string; namespace: string }): TemporalHandle {
  const connection = Connection.lazy({ address: options.address });
  const client = new Client({ connection, namespace: options.namespace });
  // Readiness probes get a connection without the client's gRPC retry interceptor: a probe
  // should report the outage, and a retry timer left armed would fire after close() and crash.
  const probe = Connection.lazy({ address: options.address, interceptors: [] });
  return {
    connection,
    client,
    async check() {
      // The namespace, not just the server: against a server without it (a typo in
      // TEMPORAL_NAMESPACE, or compose's auto-setup still registering it) every submission fails.
      try {
        await probe.withDeadline(Date.now() + 2_000, () => probe.workflowService.describeNamespace({ namespace: options.namespace }));
      } catch (error) {
        if ((error as { code?: number }).code === GRPC_NOT_FOUND) throw new Error(`Temporal at ${options.address} has no namespace '${options.namespace}' (TEMPORAL_NAMESPACE)`);
        throw error;
      }
    },
    async close() {
      await Promise.all([connection.close(), probe.close()]);
    },
  };
}
