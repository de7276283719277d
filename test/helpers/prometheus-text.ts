// Reads the Prometheus text format back into numbers, so tests can compare scrapes.

/** `name{label="value",...}` → value, for every sample line; labels keep the order they came in. */
export function parsePrometheusText(text: string): Map<string, number> {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const separator = line.lastIndexOf(' ');
    samples.set(line.slice(0, separator), Number(line.slice(separator + 1)));
  }
  return samples;
}

/** The sum of every sample of `name` whose labels include all of `labels`. */
export function sampleSum(samples: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const [series, value] of samples) {
    const match = /^([^{]+)(?:\{(.*)\})?$/.exec(series);
    if (!match || match[1] !== name) continue;
    const present = new Map([...(match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((label) => [label[1]!, label[2]!]));
    if (Object.entries(labels).every(([key, value]) => present.get(key) === value)) sum += value;
  }
  return sum;
}
