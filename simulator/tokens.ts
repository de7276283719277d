// The simulator's token: one whitespace-separated word. Real tokenizers differ, but usage
// figures only need to be plausible, stable and easy to predict in a test.
export function countTokens(text: string): number {
  return text.match(/\S+/g)?.length ?? 0;
}
