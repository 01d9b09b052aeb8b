/**
 * Text from comparison.json made inert for GitHub-flavoured markdown.
 *
 * Every character that markdown or HTML could act on becomes an HTML entity,
 * so it renders as itself and builds nothing: no link (`[x](...)`), image
 * (`![x](...)`), HTML tag (`<img onerror=...>`), code span, emphasis, heading
 * or table cell break. GitHub resolves @mentions, bare URLs, e-mail addresses,
 * `www.` links and `#123` references in the rendered text, where an entity is
 * a plain character again, so those get a zero-width space (after `@` and `#`, in
 * `://` and `www.`) that breaks the pattern while the reader still sees `@user`. Line breaks become spaces (a
 * value is one table cell or one line), control and bidirectional-override
 * characters are dropped, and a value is cut at `maxChars`.
 */

const ZWSP = '&#8203;'

const ENTITIES: Readonly<Record<string, string>> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '@': `&#64;${ZWSP}`,
  '#': `&#35;${ZWSP}`,
  ':': '&#58;',
  '[': '&#91;',
  ']': '&#93;',
  '(': '&#40;',
  ')': '&#41;',
  '!': '&#33;',
  '`': '&#96;',
  '|': '&#124;',
  '*': '&#42;',
  _: '&#95;',
  '\\': '&#92;',
  '~': '&#126;',
  '{': '&#123;',
  '}': '&#125;',
  $: '&#36;',
}

// C0 and C1 controls, zero-width and bidirectional formatting characters, BOM
// eslint-disable-next-line no-control-regex
const INVISIBLE = /[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]/g
const LINE_BREAKS = /\r\n|[\r\n\t\u2028\u2029\u0085]/g
const SPECIAL = /[&<>"'@#:[\]()!`|*_\\~{}$]/g
const WWW = /\b(w)(ww\.)/gi
const SCHEME = /&#58;\/\//g

export const DEFAULT_MAX_CHARS = 400

/** `value` as inert markdown text for a paragraph or a table cell. */
export function md(value: unknown, maxChars = DEFAULT_MAX_CHARS): string {
  let text = String(value).replace(LINE_BREAKS, ' ').replace(INVISIBLE, '')
  const chars = Array.from(text)
  if (chars.length > maxChars) {
    text = `${chars.slice(0, maxChars).join('')}…`
  }
  return text
    .replace(SPECIAL, c => ENTITIES[c] ?? c)
    .replace(SCHEME, `&#58;${ZWSP}//`)
    .replace(WWW, `$1${ZWSP}$2`)
}

/** `value` in a code element (monospace), inert like `md`: backticks cannot be escaped inside a code span. */
export function code(value: unknown, maxChars = DEFAULT_MAX_CHARS): string {
  return `<code>${md(value, maxChars)}</code>`
}
