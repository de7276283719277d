// Log probabilities for a text reply's tokens, as OpenAI returns them with `logprobs: true`
// (and `top_logprobs`: the N likeliest tokens at each place, the chosen one first). The values
// are made up but deterministic and plausible: a probability under 1, the alternatives less
// likely than the token chosen. A tool call gets none: its message has no content, and
// `logprobs.content` covers the content only.

export interface TokenLogprob {
  token: string;
  logprob: number;
  bytes: number[];
  top_logprobs: { token: string; logprob: number; bytes: number[] }[];
}

/** `logprobs` of a choice (or of a chunk's piece): its content entries, no refusal. */
export interface ChoiceLogprobs {
  content: TokenLogprob[];
  refusal: null;
}

const bytesOf = (token: string): number[] => [...Buffer.from(token, 'utf8')];

/** The entry of one piece of the reply, at `position` in it. */
export function tokenLogprob(piece: string, position: number, topLogprobs: number): TokenLogprob {
  // Rounded as OpenAI's figures are shown; between -0.01 and -0.61.
  const logprob = -Number((0.01 + (position % 7) * 0.1).toFixed(4));
  const alternatives = Array.from({ length: Math.max(0, topLogprobs - 1) }, (_unused, rank) => {
    const token = `${piece}~${rank + 1}`;
    return { token, logprob: Number((logprob - 1.5 * (rank + 1)).toFixed(4)), bytes: bytesOf(token) };
  });
  const top = topLogprobs > 0 ? [{ token: piece, logprob, bytes: bytesOf(piece) }, ...alternatives] : [];
  return { token: piece, logprob, bytes: bytesOf(piece), top_logprobs: top };
}

/** The logprobs of pieces `from` onwards of a reply (all of them for a whole answer). */
export function choiceLogprobs(pieces: string[], topLogprobs: number, from = 0): ChoiceLogprobs {
  return { content: pieces.map((piece, offset) => tokenLogprob(piece, from + offset, topLogprobs)), refusal: null };
}
