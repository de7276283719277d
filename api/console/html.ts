// The console's one way to write HTML: a tagged template that escapes every interpolated value
// unless it is already Html (the result of another `html` template). Forgetting to escape then
// takes effort instead of the other way round.

export class Html {
  constructor(readonly text: string) {}

  toString(): string {
    return this.text;
  }
}

const ENTITIES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;', '`': '&#96;' };

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`]/g, (character) => ENTITIES[character]!);
}

/** Values render as: Html verbatim; arrays item by item; null, undefined and false as nothing;
 * anything else as escaped text. */
export type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(String(value));
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  let text = strings[0]!;
  values.forEach((value, index) => {
    text += render(value) + strings[index + 1]!;
  });
  return new Html(text);
}

/** Only http(s) and same-site paths may become links: a `javascript:` URL from a vendor or a
 * caller must never be one click away in an operator's browser. */
export function safeHref(url: string | null | undefined): string | null {
  if (!url) return null;
  if (url.startsWith('/') && !url.startsWith('//')) return url;
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'http:' || parsed.protocol === 'https:' ? parsed.href : null;
  } catch {
    return null;
  }
}
