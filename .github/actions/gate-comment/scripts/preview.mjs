// Renders a comparison.json as the pull request comment would show it, to an HTML page with
// GitHub-like styling, for a look or a screenshot (headless Chromium):
//   node scripts/preview.mjs COMPARISON.json OUT.html [--pages-url URL] [--run-url URL] [--open]
// (--open: every <details> block drawn open, as after a click)
// The comment's markdown comes from the action's own renderMarkdown; marked (GitHub-flavoured)
// turns it into HTML. Nothing here is part of the bundle.
import * as esbuild from 'esbuild'
import {marked} from 'marked'
import {writeFileSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const args = process.argv.slice(2)
const option = name => {
  const at = args.indexOf(name)
  return at >= 0 ? args.splice(at, 2)[1] : undefined
}
const pagesUrl = option('--pages-url')
const runUrl = option('--run-url')
const open = args.includes('--open') && args.splice(args.indexOf('--open'), 1).length > 0
const [input, output] = args
if (!input || !output) {
  console.error('usage: node scripts/preview.mjs COMPARISON.json OUT.html [--pages-url URL] [--run-url URL] [--open]')
  process.exit(2)
}

// the action's sources, bundled in memory and imported from a data: URL
const built = await esbuild.build({
  absWorkingDir: root,
  stdin: {
    contents: "export {loadComparison} from './src/comparison'\nexport {renderMarkdown} from './src/render'\n",
    resolveDir: root,
    loader: 'ts',
  },
  bundle: true,
  platform: 'node',
  format: 'esm',
  write: false,
  logLevel: 'warning',
})
const code = built.outputFiles[0].text
const {loadComparison, renderMarkdown} = await import(`data:text/javascript;base64,${Buffer.from(code).toString('base64')}`)

const doc = loadComparison(input, 64 * 1024 * 1024)
const markdown = renderMarkdown(doc, {maxChars: 60_000, pagesUrl, runUrl})
const parsed = marked.parse(markdown, {gfm: true, async: false})
// GitHub draws these shortcodes as emoji; a headless browser may have no emoji font
const EMOJI = {red_circle: '#d1242f', orange_circle: '#e16f24', green_circle: '#1a7f37', white_circle: '#d1d9e0', yellow_circle: '#d4a72c'}
const shown = parsed
  .replace(/:([a-z_]+_circle):/g, (all, name) => (EMOJI[name] ? `<span style="color:${EMOJI[name]}">&#9679;</span>` : all))
  .replace(/:warning:/g, '&#9888;')
const body = open ? shown.replaceAll('<details>', '<details open>') : shown

// a comment box as GitHub draws one: its system font, borders, code and table styles
const css = `
body { margin: 0; padding: 24px; background: #f6f8fa; font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; color: #1f2328; }
.box { max-width: 1180px; margin: 0 auto; background: #fff; border: 1px solid #d1d9e0; border-radius: 6px; }
.head { padding: 8px 16px; background: #f6f8fa; border-bottom: 1px solid #d1d9e0; border-radius: 6px 6px 0 0; font-size: 14px; color: #59636e; }
.head b { color: #1f2328; }
.body { padding: 16px; font-size: 14px; line-height: 1.5; }
h2 { font-size: 1.5em; font-weight: 600; padding-bottom: .3em; border-bottom: 1px solid #d1d9e0; margin: 0 0 16px; }
h3 { font-size: 1.25em; font-weight: 600; margin: 24px 0 16px; }
p, ul, table, pre, details { margin: 0 0 16px; }
a { color: #0969da; text-decoration: none; }
code { font-family: ui-monospace, SFMono-Regular, "SF Mono", Menlo, Consolas, "Liberation Mono", monospace; font-size: 85%; background: rgba(129,139,152,.12); border-radius: 6px; padding: .2em .4em; }
pre { background: #f6f8fa; border-radius: 6px; padding: 16px; overflow: auto; }
pre code { background: none; padding: 0; font-size: 85%; }
table { border-collapse: collapse; display: block; width: max-content; max-width: 100%; overflow: auto; }
th, td { border: 1px solid #d1d9e0; padding: 6px 13px; }
th { font-weight: 600; }
tr:nth-child(2n) { background: #f6f8fa; }
sub { font-size: 75%; }
details summary { cursor: pointer; }
`
const page = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>diskbench gate comment</title><style>${css}</style></head>
<body><div class="box"><div class="head"><b>github-actions</b> <span>bot</span> commented</div>
<div class="body">${body}</div></div></body></html>
`
writeFileSync(output, page)
console.log(`wrote ${output} (${markdown.length} characters of markdown)`)
