import * as fs from 'fs'
import * as os from 'os'
import * as path from 'path'
import {marked} from 'marked'
import {afterAll, describe, expect, it} from 'vitest'
import {loadComparison} from '../src/comparison'
import {code, md} from '../src/escape'
import {renderMarkdown, value} from '../src/render'
import {POISON, editedFixture, fixture, regressedScreen, renameMetric} from './helpers'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'render-test-'))
afterAll(() => fs.rmSync(dir, {recursive: true, force: true}))
const MB = 1024 * 1024

/** GitHub-flavoured markdown to HTML, autolinks of bare URLs, `www.` and e-mail included. */
function html(markdown: string): string {
  return marked.parse(markdown, {gfm: true, async: false})
}

/** The visible text of rendered HTML, entities resolved: what GitHub scans for @mentions. */
function visibleText(rendered: string): string {
  return rendered
    .replace(/<[^>]*>/g, ' ')
    .replace(/&#(\d+);/g, (_m, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&amp;/g, '&')
}

describe('md', () => {
  it.each(Object.entries(POISON))('renders %s as inert text', (_name, text) => {
    const rendered = html(`| a |\n| --- |\n| ${md(text)} |\n\n- ${md(text)}\n`)
    expect(rendered).not.toMatch(/<a |<img|<script|<h2|<code|<strong|<em/)
    const seen = visibleText(rendered)
    expect(seen).not.toMatch(/@octocat|me@evil|https?:\/\/|www\.evil/)
    // the reader still sees the text, less the zero-width spaces
    const plain = text.replace(/\s+/g, ' ').trim()
    expect(seen.replace(/\u200b/g, '').replace(/\s+/g, ' ')).toContain(plain.slice(0, 12))
  })

  it('keeps a table row one row: pipes and line breaks cannot split it', () => {
    const rendered = html(`| a | b |\n| --- | --- |\n| ${md('x | y\nz')} | 2 |\n`)
    expect(rendered.match(/<td>/g)).toHaveLength(2)
  })

  it('drops control and bidirectional-override characters and cuts long values', () => {
    expect(md('safe\u202egnp.exe\u0007')).toBe('safegnp.exe')
    expect(md('x'.repeat(1000), 10)).toBe(`${'x'.repeat(10)}…`)
  })

  it('escapes entities a value tries to bring in', () => {
    expect(html(md('&#64;octocat &lt;b&gt;'))).not.toContain('<b>')
    expect(visibleText(html(md('&#64;octocat'))).replace(/\u200b/g, '')).toContain('&#64;octocat')
  })

  it('puts code in an element that backticks cannot close', () => {
    expect(html(code('a`b <i>c</i>'))).toBe('<p><code>a&#96;b &lt;i&gt;c&lt;/i&gt;</code></p>\n')
  })
})

describe('renderMarkdown', () => {
  it('renders the regressions diskbench found, with their figures and reasons', () => {
    const text = renderMarkdown(loadComparison(fixture('regression.json'), MB), {
      maxChars: 60000,
      runUrl: 'https://github.test/acme/diskbench/actions/runs/4242',
      headSha: '9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d',
    })
    expect(text.split('\n')[0]).toBe(
      '## diskbench gate: :red_circle: REGRESSION (and changed: host.flushes -50.0% in qcow2-off-cs64k-2g.writeback-threads-nvme.dd-64m-2m-ext4)',
    )
    expect(text).toContain('6 cells (**3 regression**, **1 changed**, 1 unchanged, 1 error), under KVM.')
    expect(text).toContain('### What differs between base and head\n\n- no difference of policy, guest recipe or QEMU')
    // the changed cell's row shows the counter that moved; its fold has every figure with its p
    expect(text).toMatch(/\| <code>host\.flushes<\/code> \| 200 \| 100 \| -50\.0%<br><sub>-50\.0% … -50\.0%<\/sub> \| changed &#40;counter&#41; \|/)
    expect(text).toMatch(/\| <code>host\.flushes<\/code> \| 200 \| 100 \| -50\.0%<br><sub>.*<\/sub> \| &lt;0\.001 \| changed \|/)
    expect(text).toContain('[run](https://github.test/acme/diskbench/actions/runs/4242) on 9e8d7c6b5a4f')
    expect(text).toMatch(/\| <code>qcow2-off-cs64k-2g\.writeback-threads-ide\.dd-64m-2m-ext4<\/code> \| <code>total&#95;s<\/code> \| 100\.\d\d&nbsp;s \| 12\d\.\d\d&nbsp;s \| \+20\.8%<br><sub>\+17\.7% … \+23\.9%<\/sub> \| regression \|/)
    expect(text).toMatch(/\| <code>total&#95;s<\/code> \| 100\.\d\d&nbsp;s \| 12\d\.\d\d&nbsp;s \| \+20\.8%<br><sub>\+17\.7% … \+23\.9%<\/sub> \| &lt;0\.001 \| regression \|/)
    expect(text).toContain('base <code>base</code> (<code>3f1c2a9d0b7e</code>) vs head <code>head</code> (<code>9e8d7c6b5a4f</code>)')
    // in the table's order: head failed first (no figures: what happened, in words), the
    // regressions, the change, the error; each said once, no list under the headline says them again
    expect(text.split('\n').filter(l => l.startsWith('- **'))).toEqual([])
    const rows = text.split('\n').slice(0, text.indexOf('<details>')).filter(l => /^\| <code>(qcow2|raw)-/.test(l))
    expect(rows[0]).toBe(
      '| <code>raw-off-2g.writeback-threads-virtio-blk.dd-64m-2m-ext4</code> | - | - | - | head failed 4 of 4 samples | regression &#40;failure&#41; |',
    )
    expect(rows[1]).toMatch(/^\| <code>qcow2-off-cs64k-2g\.writeback-threads-ide\.dd-64m-2m-ext4<\/code> \| <code>total&#95;s<\/code> \| .* \| \+20\.8%<br><sub>\+17\.7% … \+23\.9%<\/sub> \| regression \|$/)
    expect(rows.slice(2).map(r => r.split(' | ').slice(-1)[0])).toEqual(
      expect.arrayContaining(['regression |', 'changed &#40;counter&#41; |', 'error &#40;both-failed&#41; |']),
    )
    expect(text).toContain('Why: both sides failed&#58; base failed 4 of 4 samples')
    expect(text).toContain('Counters: structural change&#58; host.flushes -50.0% &#40;200 → 100&#41;')
    expect(text).toContain('Host canary: 1500 → 1490 MiB/s (-0.7%): steady.')
    expect(text).toContain('<details><summary>1 cell unchanged (their figures)</summary>')
    expect(text).toMatch(/Settings: gated <code>total&#95;s<\/code>, minimum effect 5%, alpha 0\.05 family-wise \(holm, 1 tests\), 95% bootstrap CI/)
    // nothing in it is active but the run link
    expect(html(text).match(/<a /g)).toHaveLength(1)
  })

  it("warns when the comparison's head is not the run's head commit", () => {
    const doc = loadComparison(fixture('regression.json'), MB)
    const warning = "this comparison's head is not the commit the run was for (0123456789ab)"
    expect(renderMarkdown(doc, {maxChars: 60000, headSha: '0123456789abcdef0123456789abcdef01234567'})).toContain(warning)
    expect(renderMarkdown(doc, {maxChars: 60000, headSha: doc.head.rev ?? ''})).not.toContain('Warning')
    expect(renderMarkdown(doc, {maxChars: 60000})).not.toContain('Warning')
  })

  it('renders an unchanged comparison with its figures collapsed', () => {
    const doc = loadComparison(fixture('unchanged.json'), MB)
    const text = renderMarkdown(doc, {maxChars: 60000})
    expect(text).toContain(':white_circle: UNCHANGED')
    expect(text).toContain('3 cells (3 unchanged), under KVM.')
    const block = text.split('<details><summary>3 cells unchanged (their figures)</summary>')[1] ?? ''
    // one row per cell (its short name, here its id), then a fold per cell with every figure
    const rows = block.split('\n').filter(l => l.startsWith('| <code>qcow2-'))
    expect(rows).toHaveLength(doc.cells.length)
    const m = doc.cells[0]?.metrics[0]
    // a median on one line: its number and unit do not break apart
    const nobreak = (v: number | null | undefined): string => value(v ?? null, 's').replace(' ', '&nbsp;')
    expect(rows[0]).toContain(`| ${nobreak(m?.medianBase)} | ${nobreak(m?.medianHead)} |`)
    expect(rows[0]).toMatch(/\| unchanged \|$/)
    expect(block.match(/<details><summary><code>qcow2-[^<]*<\/code>: 1 figure, 8 rounds, id and reason<\/summary>/g)).toHaveLength(3)
    // GitHub renders the block's table: a blank line after the summary
    expect(html(text)).toMatch(/<details><summary>3 cells unchanged \(their figures\)<\/summary>\s*(<p>Each row: .*<\/p>\s*)?<table>/)
    expect(text).toContain('Budget: budget&#95;min 30, used&#95;min 8.5, rounds 8, stopped clear.')
  })

  it('says loudly when the numbers come from TCG', () => {
    const file = editedFixture(dir, 'unchanged.json', d => (d.accel = 'tcg'))
    expect(renderMarkdown(loadComparison(file, MB), {maxChars: 60000})).toContain('**under TCG (emulation)')
  })

  it('says the host disk model the work dir was on, as the summary does', () => {
    const disk = 'period-hdd: 60 MiB/s, 150 IOPS, flush 10 ms, throttled by blkio'
    const file = editedFixture(dir, 'unchanged.json', d => {
      d.accel = 'tcg'
      d.machine.host_disk = disk
    })
    const text = renderMarkdown(loadComparison(file, MB), {maxChars: 60000})
    // the model's words made inert as every string of the document is
    expect(text).toContain(
      `**under TCG (emulation), the work dir on host disk model ${md(disk, 120)}: times are the guest's waits on that modelled disk and QEMU's emulation together, not a real disk's**`
    )
    expect(md(disk, 120)).toContain('period-hdd')
    expect(text).not.toContain("times are about QEMU's emulation, not the disk")
  })

  it('fits a huge comparison in the limit and says how many rows it left out', () => {
    const file = editedFixture(dir, 'regression.json', d => {
      const one = d.cells[0]
      d.cells = Array.from({length: 3000}, (_v, i) => ({...one, cell_id: `${one.cell_id}-${i}`}))
      d.summary.cells = 3000
      d.summary.counts.regression = 3000
      d.summary.screen = regressedScreen(3000, 'total_s')
    })
    const text = renderMarkdown(loadComparison(file, 16 * MB), {maxChars: 60000})
    expect(text.length).toBeLessThanOrEqual(60000)
    expect(text).toMatch(/… \d+ more rows: the job summary and the artifact have them all\./)
    expect(text).toContain('</sub>')
  })

  it('renders a poisoned comparison inert', () => {
    const file = editedFixture(dir, 'regression.json', d => {
      d.warnings = Object.values(POISON)
      d.head.label = POISON.mention
      d.head.rev = POISON.link
      d.cells[0].cell_id = POISON.html
      d.cells[0].reason = POISON.image
      renameMetric(d, 0, 'total_s', POISON.script)
      d.cells[3].reason = POISON.bare
      d.cells[5].note = POISON.table
      d.summary.axis_sentence = POISON.mention
      d.machine.hostname = POISON.link
      d.budget = {[POISON.html]: POISON.mention}
      d.created_at = POISON.image
    })
    const text = renderMarkdown(loadComparison(file, MB), {maxChars: 60000})
    const rendered = html(text)
    expect(rendered).not.toMatch(/<a |<img|<script|<h2 id="heading|<h1/)
    expect(visibleText(rendered)).not.toMatch(/@octocat|me@evil|https?:\/\/|www\.evil/)
  })

  it('renders the figures not gated and their reasons inert, and shows only the kinds of cell it knows', () => {
    const file = editedFixture(dir, 'real-gate-pairs.json', d => {
      const figure = d.cells[0].information[0]
      figure.metric = POISON.script
      figure.information = POISON.link
      d.cells[0].information[1].information = POISON.mention
      d.cells[0].information[2].information = POISON.table
      d.cells[1].information[0].information = POISON.bare
      d.cells[1].title = POISON.html
      d.summary.sensitivity[0].measure = POISON.image
    })
    const text = renderMarkdown(loadComparison(file, MB), {maxChars: 60000})
    const rendered = html(text)
    expect(rendered).not.toMatch(/<a |<img|<script|<h2 id="heading|<h1/)
    expect(visibleText(rendered)).not.toMatch(/@octocat|me@evil|https?:\/\/|www\.evil/)
    expect(text).toContain(`| ${md(POISON.script, 80)}`.replace('| ', '| <code>'))
    // a row of an unknown kind of cell is left out of the line, not shown: 4 guest cells are left
    expect(text).toContain('Could see: 4 guest cells ≥ 3.9–8.4%; 3 replay cells ≥ 0.7–3.1% (a regression')
    // the fold's table is still one table of 26 rows
    expect(rendered.split('<summary>26 figures shown, not gated (they decide nothing)</summary>')[1]?.split('</table>')[0]?.match(/<tr>/g)).toHaveLength(27)
  })

  it('leaves out the rows of figures not gated before any row of a cell, to fit', () => {
    const doc = loadComparison(fixture('real-gate-pairs.json'), MB)
    const full = renderMarkdown(doc, {maxChars: 60000})
    const start = full.indexOf('<details><summary>26 figures shown')
    const fold = full.slice(start, full.indexOf('</details>', start))
    const text = renderMarkdown(doc, {maxChars: full.length - fold.length / 2})
    expect(text.length).toBeLessThanOrEqual(full.length - fold.length / 2)
    expect(text).toMatch(/<details><summary>26 figures shown, not gated \(they decide nothing\)<\/summary>\n\n\| cell \| metric \| change \| CI \| why not gated \|\n/)
    // some of its rows, then how many it left out
    expect(text).toMatch(/\| --- \| --- \| --- \| --- \| --- \|\n\| qcow2 none virtio-blk · fio raw \| <code>total&#95;s<\/code> \| /)
    expect(text).toMatch(/\|\n\n… (1[3-9]|2[0-5]) more rows: the job summary and the artifact have them all\.\n\n<\/details>\n/)
    // every cell's row and fold still there
    expect(text.match(/<details><summary>[^<]*: 4 figures, /g)).toHaveLength(5)
    expect(text).not.toMatch(/… \d+ more rows?: the job summary and the artifact have them all\.\n\n<details>/)
    // no room for any: the fold says how many there are, and where
    const none = renderMarkdown(doc, {maxChars: full.length - fold.length + 200})
    expect(none).toContain('<details><summary>26 figures shown, not gated (they decide nothing)</summary>\n\n… 26 more rows: the job summary and the artifact have them all.\n\n</details>')
    expect(none.match(/<details><summary>[^<]*: 4 figures, /g)).toHaveLength(5)
  })

  it('formats medians in their units', () => {
    expect(value(12.3456, 's')).toBe('12.35 s')
    expect(value(1500, 'MiB/s')).toBe('1500.0 MiB/s')
    expect(value(1.0284, 'ratio')).toBe('1.028')
    expect(value(3 * MB, 'B')).toBe('3.0 MiB')
    expect(value(240, 'count')).toBe('240')
    expect(value(null, 's')).toBe('-')
  })
})

describe('renderMarkdown of a change of the IO', () => {
  it('names the changed counters in the first line and the policy change before the table', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'render-changed-'))
    const file = editedFixture(dir, 'unchanged.json', (d: any) => {
      d.verdict = 'changed'
      d.summary.counts.unchanged = 2
      d.summary.counts.changed = 1
      d.summary.fails = true
      d.summary.changed = [{cell_id: d.cells[0].cell_id, name: 'policy-install', counters: ['host.flushes -100.0% (1901 → 0)']}]
      d.summary.subject_diff = [{what: 'cache', base: 'none', head: 'writethrough'}]
      d.summary.cell_id_changes = [{name: 'policy-install', base_id: 'a.none', head_id: d.cells[0].cell_id}]
      d.cells[0].verdict = 'changed'
      d.cells[0].kind = 'counter'
      d.cells[0].cell.base_id = 'a.none'
      // the screen of such a document (this synthetic cell has no counter of its own)
      const row = d.summary.screen.unchanged_rows.find((r: any) => r.cell === 0)
      row.label = 'changed (counter)'
      d.summary.screen.rows = [row]
      d.summary.screen.unchanged_rows = d.summary.screen.unchanged_rows.filter((r: any) => r.cell !== 0)
      d.summary.screen.first = [{cell: 0, metric: 'total_s', said: null}]
      d.summary.screen.unchanged = null
    })
    const text = renderMarkdown(loadComparison(file, MB), {maxChars: 60000})
    const lines = text.split('\n')
    expect(lines[0]).toBe('## diskbench gate: :orange_circle: CHANGED: host.flushes -100.0% in policy-install')
    const table = lines.findIndex(l => l.startsWith('| cell | '))
    expect(table).toBeGreaterThan(0)
    expect(lines.slice(0, table)).toContain('- cache: none → writethrough')
    expect(text).toContain(`(base: <code>a.none</code>)`)
  })
})
