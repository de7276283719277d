import { z } from 'zod';

// The error body vendors and OpenAI-compatible upstreams send: {error: "text"} or
// {error: {message, code, type, param}}. Lenient, because a proxy in front of an upstream may
// answer with anything; what does not fit falls back to the first 300 characters of the text.

const upstreamErrorBody = z.looseObject({
  error: z.union([
    z.string(),
    z.looseObject({
      message: z.string().nullish(),
      code: z.union([z.string(), z.number()]).nullish(),
      type: z.string().nullish(),
      param: z.string().nullish(),
    }),
  ]),
});

export interface UpstreamErrorDetail {
  message: string;
  /** The upstream's code; OpenAI sends null on server errors, so its `type` stands in. */
  code?: string;
  param?: string;
}

export function readUpstreamError(text: string): UpstreamErrorDetail {
  const fallback = text.trim().slice(0, 300) || '(empty body)';
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { message: fallback };
  }
  const result = upstreamErrorBody.safeParse(parsed);
  if (!result.success) return { message: fallback };
  const { error } = result.data;
  if (typeof error === 'string') return { message: error };
  const detail: UpstreamErrorDetail = { message: error.message ?? fallback };
  const code = error.code ?? error.type;
  if (code !== undefined && code !== null) detail.code = String(code);
  if (error.param) detail.param = error.param;
  return detail;
}
