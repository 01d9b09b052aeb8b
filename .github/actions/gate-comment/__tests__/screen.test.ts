/**
 * The comment says first what regressed, in the order the document's `summary.screen` gives:
 * diskbench decided it (harness/compare/screen.py, the same for its summary.md), the action only
 * renders it. Real comparisons (fixtures/real-*.json) and two derived from real ones
 * (fixtures/derived-*.json: no real gate has yet ended inconclusive or with a head that timed out;
 * tests/unit/test_comment_fixtures.py says how they were made).
 */
import * as fs from 'fs'
import * as os from 'os'
import * as path from 'path'
import {afterAll, describe, expect, it} from 'vitest'
import {loadComparison} from '../src/comparison'
import {renderMarkdown} from '../src/render'
import {editedFixture, fixture} from './helpers'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'screen-test-'))
afterAll(() => fs.rmSync(dir, {recursive: true, force: true}))
const MB = 1024 * 1024

function render(file: string): string {
  return renderMarkdown(loadComparison(file, MB), {maxChars: 60000})
}

/** The lines between the count of cells and what differs: what a reader sees first. */
function firstScreen(text: string): string[] {
  const lines = text.split('\n')
  return lines.slice(3, lines.indexOf('### What differs between base and head')).filter(l => l !== '')
}

describe('the first screen of a real comparison', () => {
  it('a regression: one line per regressed cell, the largest change first, the axis, the inconclusive cells', () => {
    expect(firstScreen(render(fixture('real-regression.json')))).toEqual([
      '- **qcow2 writeback ide · dd 16M**: <code>total&#95;s</code> **+637.9%** (+360.3% … +857.0%), regression',
      '- **raw writeback ide · dd 16M**: <code>total&#95;s</code> **+481.1%** (+337.3% … +622.8%), regression',
      '- **raw none ide · dd 16M**: <code>total&#95;s</code> **+446.4%** (+314.6% … +713.1%), regression',
      '- **qcow2 none ide · dd 16M**: <code>total&#95;s</code> **+415.2%** (+235.5% … +811.5%), regression',
      'Every regressed cell has interface=ide &#40;4 of 4 such cells regressed, 0 of 4 others&#41;.',
      '**4 inconclusive**: qcow2 none virtio-blk · dd 16M, raw none virtio-blk · dd 16M, qcow2 writeback virtio-blk · dd 16M, ' +
        'raw writeback virtio-blk · dd 16M. About 99 samples per side would decide them: record them (<code>--repeat 99</code>) and compare again.',
    ])
  })

  it('unchanged: one line with what it could have seen, every figure folded', () => {
    const text = render(fixture('real-unchanged.json'))
    expect(firstScreen(text)).toEqual(['All 8 cells unchanged: each would have caught a regression of 2.0% or more 4 times in 5.'])
    expect(text).toContain('<details><summary>8 cells unchanged (their figures)</summary>')
    expect(text).not.toContain('inconclusive')
  })

  it('inconclusive: which cells, and what decides them', () => {
    const text = render(fixture('derived-inconclusive.json'))
    expect(text.split('\n')[0]).toBe('## diskbench gate: :yellow_circle: INCONCLUSIVE')
    expect(text).toContain(
      '**4 inconclusive**: qcow2 none virtio-blk · dd 16M, raw none virtio-blk · dd 16M, qcow2 writeback virtio-blk · dd 16M, ' +
        'raw writeback virtio-blk · dd 16M. About 99 samples per side would decide them: record them (<code>--repeat 99</code>) and compare again.',
    )
    // first, under the count of cells
    expect(firstScreen(text)[0]).toMatch(/^\*\*4 inconclusive\*\*: /)
    // a gate's comparison gives the one command that decides, as the document has it
    const gate = ['diskbench', 'gate', '--base', 'a'.repeat(40), '--head', 'b'.repeat(40), '--seed', '5', '--max-rounds', '99', '--budget-min', '46']
    const decided = render(editedFixture(dir, 'derived-inconclusive.json', d => (d.summary.screen.inconclusive.command = gate)))
    expect(decided).toContain(`About 99 rounds per side would decide them:\n\n<pre><code>${gate.join(' ')}</code></pre>`)
    const hostile = render(editedFixture(dir, 'derived-inconclusive.json', d => (d.summary.screen.inconclusive.command = [...gate, '$(id)'])))
    expect(hostile).not.toContain('$(id)')
    expect(hostile).toContain('the command has characters this comment does not show, see summary.md in the artifact')
  })

  it('a head that timed out: first, in words, without figures', () => {
    const text = render(fixture('derived-timed-out.json'))
    expect(firstScreen(text)).toEqual([
      '- **raw writeback ide · dd 64M**: head&#39;s guest ran past its deadline of 83 s, regression &#40;head-timed-out&#41;',
      '- **qcow2 none virtio-blk · dd 64M**: <code>total&#95;s</code> **+212.2%** (+94.4% … +267.0%), regression',
    ])
    expect(text).toContain('| raw writeback ide · dd 64M | - | - | - | - | regression &#40;head-timed-out&#41; |')
  })
})

describe('the comment renders the decisions of the document, and makes none', () => {
  it("follows the document's order of lines and rows", () => {
    const file = editedFixture(dir, 'real-regression.json', d => {
      d.summary.screen.first.reverse()
      d.summary.screen.rows.reverse()
    })
    const text = render(file)
    const names = firstScreen(text).filter(l => l.startsWith('- **')).map(l => l.split('**')[1])
    expect(names).toEqual(['qcow2 none ide · dd 16M', 'raw none ide · dd 16M', 'raw writeback ide · dd 16M', 'qcow2 writeback ide · dd 16M'])
    const rows = text.split('\n').filter(l => /^\| (qcow2|raw) /.test(l))
    expect(rows[0]).toMatch(/^\| raw writeback virtio-blk · dd 16M \| /)
  })

  it('shows the metric and the labels the document chose', () => {
    const file = editedFixture(dir, 'real-regression.json', d => {
      const line = d.summary.screen.first[0]
      line.metric = 'host.flushes'
      const row = d.summary.screen.rows.find((r: any) => r.cell === line.cell)
      row.metric = 'host.flushes'
      row.label = 'regression, as the document says'
    })
    const text = render(file)
    expect(firstScreen(text)[0]).toBe(
      '- **qcow2 writeback ide · dd 16M**: <code>host.flushes</code> **+0.0%** (+0.0% … +0.0%), regression, as the document says',
    )
  })
})
