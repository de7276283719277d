import type { z } from 'zod';

// Vendors name the one offending parameter in their 400s; the simulator does the same with
// the first zod issue so the gateway's error mapping is exercised with realistic bodies.
export interface ParameterProblem {
  param: string | null;
  /** A whole sentence naming the parameter, for OpenAI-style bodies. */
  message: string;
  /** What is wrong, without the parameter's name, for vendors that phrase it themselves. */
  reason: string;
}

export function firstProblem(error: z.ZodError): ParameterProblem {
  const issue = error.issues[0];
  if (!issue) return { param: null, message: 'The request body is invalid.', reason: 'invalid body' };
  if (issue.code === 'unrecognized_keys') {
    const key = issue.keys[0] ?? '';
    return { param: key, message: `Unknown parameter: '${key}'.`, reason: 'unknown parameter' };
  }
  const param = issue.path.map(String).join('.');
  if (!param) return { param: null, message: `Invalid request body: ${issue.message}`, reason: issue.message };
  return { param, message: `Invalid value for '${param}': ${issue.message}`, reason: issue.message };
}
