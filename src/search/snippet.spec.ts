import { LT_STAND_IN as L, MATCH_START as S, MATCH_STOP as E, renderSnippet } from './snippet';

describe('snippets', () => {
  it('escapes everything from the item and marks only the matches', () => {
    const out = renderSnippet(`<script>alert(1)</script> ${S}hello${E} & "x" 'y' <img src=x onerror=alert(1)>`);
    expect(out.snippet_html).toBe(
      '&lt;script&gt;alert(1)&lt;/script&gt; <mark>hello</mark> &amp; &quot;x&quot; &#39;y&#39; &lt;img src=x onerror=alert(1)&gt;',
    );
    expect(out.snippet).toBe(`<script>alert(1)</script> hello & "x" 'y' <img src=x onerror=alert(1)>`);
  });

  it('turns the stand-in ts_headline read for each `<` back into one', () => {
    expect(renderSnippet(`List${L}${S}bilby${E}> a${L}b`)).toEqual({ snippet: 'List<bilby> a<b', snippet_html: 'List&lt;<mark>bilby</mark>&gt; a&lt;b' });
  });

  it('collapses whitespace and copes with unbalanced or empty input', () => {
    expect(renderSnippet(`a \n\t ${S}b`)).toEqual({ snippet: 'a b', snippet_html: 'a <mark>b</mark>' });
    expect(renderSnippet(`${E}a${E}`)).toEqual({ snippet: 'a', snippet_html: 'a' });
    expect(renderSnippet(null)).toEqual({ snippet: '', snippet_html: '' });
  });

  it('escapes the five special characters', () => {
    expect(renderSnippet(`&<>"'`).snippet_html).toBe('&amp;&lt;&gt;&quot;&#39;');
  });
});
