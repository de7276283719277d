import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { html, safeHref } from '../../api/console/html.ts';
import { formatUsd } from '../../api/console/views/format.ts';

describe('console html template', () => {
  it('escapes every interpolated value unless it is itself html', () => {
    const hostile = `<script>alert("x")</script>' onmouseover='y' \`z\` &amp;`;
    const rendered = html`<p title="${hostile}">${hostile}</p>`.text;
    assert.equal(rendered, '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;y&#39; &#96;z&#96; &amp;amp;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&#39; onmouseover=&#39;y&#39; &#96;z&#96; &amp;amp;</p>');
    assert.equal(html`<b>${html`<i>${'<'}</i>`}</b>`.text, '<b><i>&lt;</i></b>', 'nested templates are not escaped twice');
  });

  it('renders lists item by item and leaves out null, undefined and false', () => {
    assert.equal(html`<ul>${['a<', 'b'].map((item) => html`<li>${item}</li>`)}</ul>`.text, '<ul><li>a&lt;</li><li>b</li></ul>');
    assert.equal(html`[${null}${undefined}${false}${0}${true}]`.text, '[0true]');
  });

  it('lets only http(s) URLs and same-site paths become links', () => {
    assert.equal(safeHref('https://cdn.example/clip.mp4'), 'https://cdn.example/clip.mp4');
    assert.equal(safeHref('/console/keys'), '/console/keys');
    for (const hostile of ['javascript:alert(1)', 'JAVASCRIPT:alert(1)', 'data:text/html,<b>', '//evil.example/x', 'not a url', '', null, undefined]) {
      assert.equal(safeHref(hostile), null, String(hostile));
    }
  });

  it('writes money from micro-USD without float rounding', () => {
    assert.equal(formatUsd(0), '$0.00');
    assert.equal(formatUsd(1), '$0.000001');
    assert.equal(formatUsd(1_500_000), '$1.50');
    assert.equal(formatUsd(12_345_678), '$12.345678');
    assert.equal(formatUsd(1_234_567_000_000), '$1,234,567.00');
    assert.equal(formatUsd(-250_000), '-$0.25');
  });
});
