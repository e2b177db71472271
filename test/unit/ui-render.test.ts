/**
 * The inbox's HTML building and artefact renderers against hostile artefacts: script tags, event-handler
 * attributes, javascript:/data: links in Markdown and in JSON strings, `</script>` inside JSON, bidi controls
 * and a 5 MB single line. The output must contain no executable markup and still show the text, escaped.
 */
import { canonicalJson, renderDiff } from '../../src/ui/render/diff';
import { html, trusted } from '../../src/ui/html';
import { renderArtefact } from '../../src/ui/render/artefact';
import { renderJsonTree } from '../../src/ui/render/json-tree';
import { renderMarkdown } from '../../src/ui/render/markdown';
import { renderText } from '../../src/ui/render/text';

const CORPUS = [
  '<script>alert(1)</script>',
  '<img src=x onerror="alert(2)">',
  '<a href="javascript:alert(3)">click</a>',
  '[md link](javascript:alert(4))',
  '[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCg1KTwvc2NyaXB0Pg==)',
  '![tracker](https://evil.example/pixel.png)',
  '<svg onload=alert(6)>',
  '</script><script>alert(7)</script>',
  '"><iframe src=javascript:alert(8)>',
  'bidi \u202Egnp.exe\u202C end',
];

/** No executable markup: no script element, no event-handler attribute, no javascript:/data: link, no image. */
function expectInert(out: string): void {
  expect(out).not.toMatch(/<script/i);
  expect(out).not.toMatch(/<(iframe|svg|img|object|embed)\b/i);
  expect(out).not.toMatch(/<[^>]*\son\w+\s*=/i);
  expect(out).not.toMatch(/<[^>]*\shref\s*=\s*["']?\s*(javascript|data|vbscript):/i);
  expect(out).not.toMatch(/<[^>]*\ssrc\s*=/i);
  expect(out).not.toMatch(/[\u202A-\u202E\u2066-\u2069]/);
}

describe('html', () => {
  it('escapes every interpolation; trusted() alone passes markup', () => {
    const out = html`<p title="${'" onmouseover="x'}">${'<b>'}${trusted('<i>ok</i>')}${[1, '<', null]}</p>`.value;
    expect(out).toBe('<p title="&quot; onmouseover=&quot;x">&lt;b&gt;<i>ok</i>1&lt;</p>');
  });
});

describe('renderMarkdown', () => {
  it.each(CORPUS)('leaves nothing executable in %j', (source) => {
    expectInert(renderMarkdown(source).value);
  });

  it('keeps the text, escaped, and safe links with rel noopener noreferrer nofollow', () => {
    const out = renderMarkdown(
      '# Title\n\n<script>alert(1)</script>\n\n[docs](https://example.com/a) ![chart](https://x/y.png)',
    ).value;
    expect(out).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    expect(out).toContain(
      '<a href="https://example.com/a" rel="noopener noreferrer nofollow" target="_blank">docs</a>',
    );
    expect(out).toContain('[image: chart]');
    expect(out).toContain('<h1>Title</h1>');
  });

  it('shows bidi controls as code points', () => {
    expect(renderMarkdown('a\u202Eb').value).toContain('&lt;U+202E&gt;');
  });
});

describe('renderJsonTree', () => {
  it('renders hostile strings as escaped text', () => {
    const value = { link: 'javascript:alert(1)', nested: { html: '</script><script>alert(2)</script>' }, list: CORPUS };
    const out = renderJsonTree(value).value;
    expectInert(out);
    expect(out).toContain('&lt;/script&gt;&lt;script&gt;alert(2)&lt;/script&gt;');
    expect(out).toContain('javascript:alert(1)');
    expect(out).not.toMatch(/<a\b/);
  });

  it('folds a long string behind its first characters', () => {
    const out = renderJsonTree({ big: 'x'.repeat(2_000) }).value;
    expect(out).toContain('class="json-long"');
    expect(out).toContain('2,000 characters');
  });
});

describe('renderText', () => {
  it('escapes text and folds a 5 MB single line', () => {
    const line = '<script>'.repeat(5 * 1024 * 128);
    const out = renderText(`first <img src=x onerror=alert(1)>\n${line}`).value;
    expectInert(out);
    expect(out).toContain('first &lt;img src=x onerror=alert(1)&gt;');
    expect(out).toContain('<details class="long-line"><summary>line 2: 5,242,880 characters');
  });
});

describe('renderDiff', () => {
  it('compares JSON by canonical form: key order is no change', () => {
    expect(canonicalJson({ b: 1, a: { d: 2, c: 3 } })).toBe(canonicalJson({ a: { c: 3, d: 2 }, b: 1 }));
    expect(renderDiff({ b: 1, a: 2 }, { a: 2, b: 1 }).value).not.toMatch(/diff-(add|del)/);
  });

  it('marks changed lines and escapes them', () => {
    const out = renderDiff({ a: '<script>x</script>' }, { a: 'safe' }).value;
    expectInert(out);
    expect(out).toContain(
      '<span class="diff-del">-   &quot;a&quot;: &quot;&lt;script&gt;x&lt;/script&gt;&quot;\n</span>',
    );
    expect(out).toContain('<span class="diff-add">+   &quot;a&quot;: &quot;safe&quot;\n</span>');
  });

  it('gives up with a notice when the pair differs too much', () => {
    const a = Array.from({ length: 30_000 }, (_, i) => `a${i}`).join('\n');
    const b = Array.from({ length: 30_000 }, (_, i) => `b${i}`).join('\n');
    expect(renderDiff(a, b).value).toContain('differ too much to diff here');
  });
});

describe('renderArtefact', () => {
  it('chooses the renderer by media type and says when the artefact was cut', () => {
    const out = renderArtefact({
      mediaType: 'text/markdown',
      bytes: 9_000_000,
      content: '**b**',
      truncated: true,
    }).value;
    expect(out).toContain('<strong>b</strong>');
    expect(out).toContain('9,000,000 bytes');
    expect(renderArtefact({ mediaType: 'application/json', bytes: 2, content: {} }).value).toContain('json-tree');
  });

  it('shows a JSON artefact cut short as its text, not as one quoted string', () => {
    const out = renderArtefact({
      mediaType: 'application/json',
      bytes: 5_000_000,
      content: '{"a":"</script><b>","long":"LLLL',
      truncated: true,
    }).value;
    expect(out).not.toContain('json-tree');
    expect(out).toContain('{&quot;a&quot;:&quot;&lt;/script&gt;&lt;b&gt;&quot;');
    expect(out).toContain('5,000,000 bytes');
  });
});
