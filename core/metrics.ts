import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';

// Every Prometheus metric Framegate exports, defined once. The api serves them at /metrics on
// its port; the worker, a separate process, serves its own on WORKER_METRICS_PORT. A metric only
// one process moves is still defined here for both, so each name has one meaning and one set
// of labels; a scrape of a process shows zeros for what the other process counts.
//
// Labels are bounded: `route` is the route pattern (never the raw URL), `model` a catalog id,
// `vendor` a catalog upstream name, the rest small fixed sets.

export const metricsRegistry = new Registry();

const SECONDS_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** api: every answered request, by route pattern and status. */
export const httpRequestDuration = new Histogram({
  name: 'framegate_http_request_duration_seconds',
  help: 'Time from request to the end of the answer, by method, route pattern and status code.',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: SECONDS_BUCKETS,
  registers: [metricsRegistry],
});

/** api (chat proxy): from receiving a streamed chat request to sending its first text. */
export const chatTimeToFirstToken = new Histogram({
  name: 'framegate_chat_time_to_first_token_seconds',
  help: 'Streamed chat completions: time from the request to the first chunk carrying text sent to the caller, by model.',
  labelNames: ['model'] as const,
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30],
  registers: [metricsRegistry],
});

/** api (chat proxy): tokens of billed chat calls, as the upstream reported (or we estimated) them. */
export const chatTokens = new Counter({
  name: 'framegate_chat_tokens_total',
  help: 'Tokens of billed chat completions, by model and direction (input or output).',
  labelNames: ['model', 'direction'] as const,
  registers: [metricsRegistry],
});

/** api (chat, images) and worker (video): money captured from balances, in micro-USD. */
export const spendMicros = new Counter({
  name: 'framegate_spend_micro_usd_total',
  help: 'Money charged to balances, in micro-USD, by kind (chat, image, video) and model.',
  labelNames: ['kind', 'model'] as const,
  registers: [metricsRegistry],
});

/** api (submitted) and worker (running, succeeded, failed): a task entering each state. Tasks
 * in flight are submitted − succeeded − failed. */
export const videoTaskTransitions = new Counter({
  name: 'framegate_video_task_transitions_total',
  help: 'Video tasks entering a state (submitted, running, succeeded, failed), by model.',
  labelNames: ['state', 'model'] as const,
  registers: [metricsRegistry],
});

/** worker: one webhook delivery attempt, by what came of it. */
export const webhookAttempts = new Counter({
  name: 'framegate_webhook_attempts_total',
  help: 'Webhook delivery attempts, by outcome (delivered, retry, gone, refused; exhausted: the last attempt failed, the webhook given up).',
  labelNames: ['outcome'] as const,
  registers: [metricsRegistry],
});

/** worker (video vendors) and api (clip downloads, and the chat and image upstreams). */
export const vendorErrors = new Counter({
  name: 'framegate_vendor_errors_total',
  help: 'Failed calls to a vendor, by upstream and kind (transient: retried; rejected: final).',
  labelNames: ['vendor', 'kind'] as const,
  registers: [metricsRegistry],
});

/** A billed chat call: its tokens, and the micro-USD actually charged (what charge() returned). */
export function countChatCharge(modelId: string, tokens: { inputTokens: number; outputTokens: number }, chargedMicros: number): void {
  chatTokens.inc({ model: modelId, direction: 'input' }, tokens.inputTokens);
  chatTokens.inc({ model: modelId, direction: 'output' }, tokens.outputTokens);
  spendMicros.inc({ kind: 'chat', model: modelId }, chargedMicros);
}

/** A billed image call: the micro-USD actually charged. */
export function countImageCharge(modelId: string, chargedMicros: number): void {
  spendMicros.inc({ kind: 'image', model: modelId }, chargedMicros);
}

/** The first text of a streamed completion went out; `startedAt` is performance.now() when the
 * request arrived. */
export function observeTimeToFirstToken(modelId: string, startedAt: number): void {
  chatTimeToFirstToken.observe({ model: modelId }, (performance.now() - startedAt) / 1000);
}

let processMetricsOn = false;

/** Adds the process's own figures (CPU, memory, event loop lag, ...) to the registry, once. */
export function enableProcessMetrics(): void {
  if (processMetricsOn) return;
  processMetricsOn = true;
  // The event loop lag is sampled every 50 ms, not prom-client's 10: the 100 Hz timer cost a
  // bare idle process 4.5 ms of CPU a second, and an idle api 2 to 3.5 ms of its 13.5 to 16.5
  // (two builds side by side). 20 samples a second still catch every stall long enough to matter.
  collectDefaultMetrics({ register: metricsRegistry, eventLoopMonitoringPrecision: 50 });
}
