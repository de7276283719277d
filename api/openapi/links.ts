// OpenAPI links: which answer feeds which request. They tell a reader that the task_id of a
// submission is what GET /v1/video/generations/{task_id} wants, and they let a stateful
// fuzzer (Schemathesis) follow real workflows (create an account, give it a key, revoke it;
// submit a task, poll it, download it) instead of guessing identifiers that never exist.

interface ResponseLink {
  from: string;
  status: string;
  name: string;
  to: string;
  parameters: Record<string, string>;
}

const responseLinks: ResponseLink[] = [
  { from: 'createVideoTask', status: '200', name: 'GetVideoTask', to: 'getVideoTask', parameters: { task_id: '$response.body#/task_id' } },
  { from: 'createVideoTask', status: '200', name: 'DownloadVideoContent', to: 'downloadVideoContent', parameters: { task_id: '$response.body#/task_id' } },
  { from: 'createAccount', status: '201', name: 'GetAccount', to: 'getAccount', parameters: { id: '$response.body#/id' } },
  { from: 'createAccount', status: '201', name: 'AddCredits', to: 'addCredits', parameters: { id: '$response.body#/id' } },
  { from: 'createAccount', status: '201', name: 'CreateKey', to: 'createKey', parameters: { id: '$response.body#/id' } },
  { from: 'createKey', status: '201', name: 'RevokeKey', to: 'revokeKey', parameters: { id: '$response.body#/id' } },
];

interface Operation {
  operationId?: string;
  responses?: Record<string, { links?: Record<string, unknown> }>;
}

/** Adds the links to a finished document; a link whose operations are absent is left out. */
export function withResponseLinks<Document extends object>(document: Document): Document {
  const operations = new Map<string, Operation>();
  const paths = (document as { paths?: Record<string, Record<string, unknown>> }).paths ?? {};
  for (const pathItem of Object.values(paths)) {
    for (const operation of Object.values(pathItem) as Operation[]) {
      if (operation && typeof operation === 'object' && operation.operationId) operations.set(operation.operationId, operation);
    }
  }
  for (const link of responseLinks) {
    const response = operations.get(link.from)?.responses?.[link.status];
    if (!response || !operations.has(link.to)) continue;
    response.links = { ...response.links, [link.name]: { operationId: link.to, parameters: link.parameters } };
  }
  return document;
}
