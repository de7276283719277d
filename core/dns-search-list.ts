import { readFileSync } from 'node:fs';

// How a fetcher's resolver completes a name: getaddrinfo (glibc, musl) tries the domains of
// resolv.conf's `search` line after a name, so `http://metadata/` reaches
// `metadata.google.internal` on a GCE machine and `http://vllm.default/` a Kubernetes service.
// Node's c-ares queries (core/host-names.ts) take names as given, so the api applies the list
// itself, in glibc's order: a name with at least `ndots` dots is tried as given first, others
// after the search domains; the first that has an address is the one fetched.

export interface SearchList {
  domains: string[];
  /** Dots a name needs to be tried as given before the search domains (glibc: 1, at most 15). */
  ndots: number;
}

/** The search list of a resolv.conf text, with glibc's environment overrides: LOCALDOMAIN
 * (the domains) and RES_OPTIONS (`ndots:N`). The last `search` or `domain` line counts. */
export function parseSearchList(resolvConf: string, environment: NodeJS.ProcessEnv = {}): SearchList {
  let domains: string[] = [];
  let ndots = 1;
  const options = (words: string[]) => {
    for (const word of words) {
      const match = /^ndots:(\d+)$/.exec(word);
      if (match) ndots = Math.min(15, Number(match[1]));
    }
  };
  for (const line of resolvConf.split('\n')) {
    const [keyword, ...words] = line.replace(/[#;].*/, '').trim().split(/\s+/);
    if (keyword === 'search') domains = words;
    else if (keyword === 'domain') domains = words.slice(0, 1);
    else if (keyword === 'options') options(words);
  }
  if (environment.LOCALDOMAIN !== undefined) domains = environment.LOCALDOMAIN.trim().split(/\s+/).filter(Boolean);
  if (environment.RES_OPTIONS !== undefined) options(environment.RES_OPTIONS.trim().split(/\s+/));
  // A domain written with its root dot is the same domain.
  return { domains: domains.map((domain) => domain.replace(/\.$/, '')).filter((domain) => domain !== ''), ndots };
}

/** This machine's search list (none when resolv.conf cannot be read). */
export function systemSearchList(path = '/etc/resolv.conf', environment: NodeJS.ProcessEnv = process.env): SearchList {
  let text = '';
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    // No resolv.conf: glibc then searches nothing but the host's own domain, rarely set.
  }
  return parseSearchList(text, environment);
}

/** The names a resolver tries for `hostname`, in its order. A name ending in a dot is absolute. */
export function namesTried(hostname: string, list: SearchList): string[] {
  if (hostname.endsWith('.')) return [hostname.slice(0, -1)];
  const completed = list.domains.map((domain) => `${hostname}.${domain}`);
  const dots = hostname.split('.').length - 1;
  return dots >= list.ndots ? [hostname, ...completed] : [...completed, hostname];
}
