// Which methods each registered path answers, so a request for a path that exists with another
// method gets 405 and an `Allow` header (RFC 9110 15.5.6) instead of a 404 that would tell the
// caller the path does not exist. Fastify routes by method first and keeps no such index itself.

function escapeRegExp(text: string): string {
  return text.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
}

/** Fastify's path syntax as a regular expression: `:name` (with an optional `(regexp)`) is one
 * segment, `*` is the rest of the path. Approximate for exotic patterns, exact for ours. */
function patternOf(url: string): RegExp {
  const parts = url.split(/(:[A-Za-z0-9_]+(?:\([^)]*\))?|\*)/);
  const source = parts.map((part) => (part === '*' ? '.*' : part.startsWith(':') ? '[^/]+' : escapeRegExp(part))).join('');
  return new RegExp(`^${source}$`);
}

export class RouteMethodIndex {
  private readonly routes: Array<{ pattern: RegExp; methods: string[] }> = [];

  add(method: string | string[], url: string): void {
    this.routes.push({ pattern: patternOf(url), methods: (Array.isArray(method) ? method : [method]).map((name) => name.toUpperCase()) });
  }

  /** The methods some route answers on this path, sorted; empty when no route has the path. */
  allowedFor(path: string): string[] {
    const allowed = new Set<string>();
    for (const route of this.routes) {
      if (route.pattern.test(path)) route.methods.forEach((method) => allowed.add(method));
    }
    return [...allowed].sort();
  }
}
