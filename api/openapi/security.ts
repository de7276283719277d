// The two credentials the gateway knows, as OpenAPI security schemes. Routes name the one they
// demand in their schema (`security`), next to the hook that enforces it, so the document says
// what the code does: /v1 wants an API key, /admin the operator's token, probes want nothing.

export const securitySchemes = {
  apiKey: {
    type: 'http',
    scheme: 'bearer',
    description: 'An API key (`fg_…`), sent as `Authorization: Bearer <key>`. One key works on every /v1 endpoint.',
  },
  adminToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'The operator token (`ADMIN_TOKEN`), sent as `Authorization: Bearer <token>`.',
  },
  metricsToken: {
    type: 'http',
    scheme: 'bearer',
    description: 'The scrape token (`METRICS_TOKEN`), sent as `Authorization: Bearer <token>`; only when the operator set one.',
  },
} as const;

export const apiKeySecurity = [{ apiKey: [] as string[] }];
export const adminTokenSecurity = [{ adminToken: [] as string[] }];
/** The metrics token when METRICS_TOKEN is set, nothing otherwise (the empty alternative). */
export const metricsTokenSecurity: Array<Record<string, string[]>> = [{ metricsToken: [] }, {}];
/** Open to anyone: liveness and readiness probes. */
export const openAccess: Array<Record<string, string[]>> = [];
