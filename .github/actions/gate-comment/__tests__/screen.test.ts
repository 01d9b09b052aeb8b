/**
 * The comment says first what regressed, in the order the document's `summary.screen` gives:
 * diskbench decided it (harness/compare/screen.py, the same for its summary.md), the action only
 * renders it. Real comparisons (fixtures/real-*.json; real-gate-pairs.json a gate of the default
 * spec, its guest cells taken in pairs, with replay cells) and two derived from real ones
 * (fixtures/derived-*.json; tests/unit/test_comment_fixtures.py says how they were made).
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

/**
 * What a reader sees first: the lines after the count of cells down to the first fold, without
 * what differs between base and head and the line naming the two sides.
 */
function firstScreen(text: string): string[] {
  const lines = text.split('\n')
  const end = lines.findIndex(l => l.startsWith('<details>'))
  const diff = lines.indexOf('### What differs between base and head')
  const sides = lines.findIndex(l => l.startsWith('base <code>'))
  return lines
    .slice(0, end < 0 ? lines.length : end)
    .filter((l, i) => i >= 3 && l !== '' && !(diff >= 0 && i >= diff && i <= sides))
}

/** The rows of the first table (regressed, changed, failed and inconclusive cells). */
function rowsOf(text: string): string[] {
  return firstScreen(text).filter(l => /^\| (qcow2|raw) /.test(l))
}

describe('the first screen of a real comparison', () => {
  it('a regression: one row per regressed cell, said once, the largest change first; the axis under them', () => {
    const text = render(fixture('real-regression.json'))
    expect(firstScreen(text)).toEqual([
      'Could see: 8 guest cells ≥ 76.8–388.4% (a regression this large, alone, fails the gate 4 times in 5).',
      '**4 inconclusive**: qcow2 none virtio-blk · dd 16M, raw none virtio-blk · dd 16M, qcow2 writeback virtio-blk · dd 16M, ' +
        'raw writeback virtio-blk · dd 16M. About 99 samples per side would decide them: record them (<code>--repeat 99</code>) and compare again.',
      'Each row: <code>total&#95;s</code>, the medians of base and head and the change.',
      '| cell | base | head | change (95% CI) | verdict |',
      '| --- | ---: | ---: | ---: | --- |',
      '| qcow2 writeback ide · dd 16M | 2.00&nbsp;s | 14.77&nbsp;s | +637.9%<br><sub>+360.3% … +857.0%</sub> | regression |',
      '| raw writeback ide · dd 16M | 2.54&nbsp;s | 14.77&nbsp;s | +481.1%<br><sub>+337.3% … +622.8%</sub> | regression |',
      '| raw none ide · dd 16M | 2.65&nbsp;s | 14.47&nbsp;s | +446.4%<br><sub>+314.6% … +713.1%</sub> | regression |',
      '| qcow2 none ide · dd 16M | 2.89&nbsp;s | 14.89&nbsp;s | +415.2%<br><sub>+235.5% … +811.5%</sub> | regression |',
      '| qcow2 none virtio-blk · dd 16M | 1.70&nbsp;s | 1.28&nbsp;s | -24.8%<br><sub>-52.1% … -10.5%</sub> | inconclusive |',
      '| raw none virtio-blk · dd 16M | 1.81&nbsp;s | 1.34&nbsp;s | -25.9%<br><sub>-61.0% … +9.2%</sub> | inconclusive |',
      '| qcow2 writeback virtio-blk · dd 16M | 2.01&nbsp;s | 1.44&nbsp;s | -28.0%<br><sub>-67.9% … +12.8%</sub> | inconclusive |',
      '| raw writeback virtio-blk · dd 16M | 2.03&nbsp;s | 1.39&nbsp;s | -31.4%<br><sub>-67.3% … +32.4%</sub> | inconclusive |',
      'Every regressed cell has interface=ide &#40;4 of 4 such cells regressed, 0 of 4 others&#41;.',
    ])
    // no list says them again
    expect(text.split('\n').filter(l => l.startsWith('- **'))).toEqual([])
  })

  it('the QEMU upgrade: three regressions and two cells below the crossed edge, each said once, the crossed change on few lines', () => {
    const text = render(fixture('derived-qemu-upgrade.json'))
    expect(text.split('\n')[4]).toBe(
      'Could see: 5 guest cells ≥ 7.6%; 3 replay cells ≥ 0.7–3.1% (a regression this large, alone, fails the gate 4 times in 5).',
    )
    expect(rowsOf(text)).toEqual([
      '| qcow2 none ide · dd 128M | 4.43&nbsp;s | 5.25&nbsp;s | +18.8%<br><sub>+17.9% … +19.4%</sub><br><sub>alone +11.6% … +66.0%</sub> | regression |',
      '| qcow2 none virtio-blk · fio raw | 9.79&nbsp;s | 11.26&nbsp;s | +15.1%<br><sub>+14.2% … +15.7%</sub><br><sub>alone +9.3% … +51.7%</sub> | regression |',
      '| raw writeback ide · fio raw | 10.71&nbsp;s | 12.09&nbsp;s | +12.9%<br><sub>+12.0% … +13.5%</sub><br><sub>alone +7.9% … +43.5%</sub> | regression |',
      '| qcow2 writeback ide · dd 128M | 5.62&nbsp;s | 5.86&nbsp;s | +4.2%<br><sub>+3.4% … +4.7%</sub><br><sub>alone +2.2% … +14.1%</sub> | inconclusive |',
      '| raw none virtio-blk · dd 128M | 4.45&nbsp;s | 4.59&nbsp;s | +3.3%<br><sub>+2.5% … +3.8%</sub><br><sub>alone +1.6% … +11.3%</sub> | inconclusive |',
    ])
    expect(text).toContain('Every regressed cell has measure=guest &#40;3 of 5 such cells regressed, 0 of 3 others&#41;.')
    expect(text).toContain('**2 inconclusive**: qcow2 writeback ide · dd 128M, raw none virtio-blk · dd 128M. No number of rounds can be given for them')
    // outside the folds, each change is written once
    const open = text.replace(/<details>[\s\S]*?<\/details>/g, '')
    for (const change of ['+18.8%', '+15.1%', '+12.9%', '+4.2%', '+3.3%']) {
      expect(open.split(change).length - 1).toBe(1)
    }
  })

  it('unchanged: one line with what it could have seen, every figure folded', () => {
    const text = render(fixture('real-unchanged.json'))
    expect(firstScreen(text)).toEqual([
      // the sensitivity rows of this comparison's metric (a counter: no spread) say 0.0%, as diskbench's summary does
      // never a range of one value
      'Could see: 8 guest cells ≥ 0.0% (a regression this large, alone, fails the gate 4 times in 5).',
      'All 8 cells unchanged: each would have caught a regression of 2.0% or more 4 times in 5.',
    ])
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
    // first, under the count of cells and what it could have seen
    expect(firstScreen(text).slice(0, 2)).toEqual([
      'Could see: 4 guest cells ≥ 103.3–388.4% (a regression this large, alone, fails the gate 4 times in 5).',
      expect.stringMatching(/^\*\*4 inconclusive\*\*: /),
    ])
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
      'Could see: 1 guest cell ≥ 93.4% (a regression this large, alone, fails the gate 4 times in 5).',
      '| cell | metric | base | head | change (95% CI) | verdict |',
      '| --- | --- | ---: | ---: | ---: | --- |',
      // what happened, in words, where its change would be
      '| raw writeback ide · dd 64M | - | - | - | head&#39;s guest ran past its deadline of 83 s | regression &#40;head-timed-out&#41; |',
      '| qcow2 none virtio-blk · dd 64M | <code>total&#95;s</code> | 2.00&nbsp;s | 6.25&nbsp;s | +212.2%<br><sub>+94.4% … +267.0%</sub> | regression |',
    ])
  })
})

describe('a gate of guest pairs and replay cells', () => {
  const PAIRS = 'real-gate-pairs.json'
  const COULD_SEE = 'Could see: 5 guest cells ≥ 3.3–8.4%; 3 replay cells ≥ 0.7–3.1% (a regression this large, alone, fails the gate 4 times in 5).'
  const FOLD = '<details><summary>26 figures shown, not gated (they decide nothing)</summary>'

  it('says what each kind of cell could have seen, right under the count of cells', () => {
    const text = render(fixture(PAIRS))
    const lines = text.split('\n')
    expect(lines[2]).toBe('8 cells (7 unchanged, 1 inconclusive), **under TCG (emulation): times are about QEMU\'s emulation, not the disk**.')
    // per cell its most sensitive gated metric (a replay cell has two), the range per kind
    expect(lines[4]).toBe(COULD_SEE)
    expect(firstScreen(text).slice(0, 3)).toEqual([
      COULD_SEE,
      '**1 inconclusive**: qcow2 none ide · dd 128M. About 23 rounds per side would decide them:',
      expect.stringMatching(/^<pre><code>diskbench gate --base d7d3fc8ca913\w+ --head d7d3fc8ca913\w+ --seed 303 --max-rounds 23 --budget-min 28<\/code><\/pre>$/),
    ])
  })

  it("gives a guest pair's change alone, and as measured together; a replay cell's as it is", () => {
    const text = render(fixture(PAIRS))
    expect(text).toContain(
      '| qcow2 none ide · dd 128M | 4.42&nbsp;s | 4.56&nbsp;s | +2.3% alone<br><sub>-1.8% … +5.6%</sub><br><sub>+1.1% together</sub> | inconclusive |',
    )
    expect(text).toContain(
      '| raw falloc writeback virtio-blk · fio raw · replay | <code>replay.wall&#95;s</code> | 0.29&nbsp;s | 0.28&nbsp;s | +0.8%<br><sub>-0.3% … +2.5%</sub> | unchanged |',
    )
  })

  it("gives a crossed guest pair's change with the sizes alone it stands for, and no range for no change", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'screen-test-'))
    try {
      const edited = editedFixture(dir, PAIRS, (d: any) => {
        const crossed = {shrink: undefined, measured_change_pct: undefined}
        Object.assign(d.cells[4].metrics[0], crossed, {change_pct: 3.02, alone_low_pct: 2.0, alone_high_pct: 7.71})
        Object.assign(d.cells[1].metrics[0], crossed, {change_pct: -0.01, alone_low_pct: -0.03, alone_high_pct: -0.01})
      })
      const text = render(edited)
      expect(text).toContain('+3.0%<br><sub>-1.8% … +5.6%</sub><br><sub>alone +2.0% … +7.7%</sub>')
      expect(text).not.toContain('alone -0.0%')
    } finally {
      fs.rmSync(dir, {recursive: true, force: true})
    }
  })

  it('folds the figures shown but not gated after the tables, one row per cell and metric with why', () => {
    const text = render(fixture(PAIRS))
    const lines = text.split('\n')
    const fold = lines.indexOf(FOLD)
    // after the table and the unchanged cells' fold, before the sentence on what decides the inconclusive cell
    expect(fold).toBeGreaterThan(lines.lastIndexOf('| cell | metric | base | head | change (95% CI) | verdict |'))
    expect(lines.slice(fold - 2, fold)).toEqual(['</details>', '']) // the unchanged cells' fold closes just above
    expect(fold).toBeLessThan(lines.findIndex(l => l.startsWith('Inconclusive means')))
    // a blank line after the summary: GitHub renders the fold's table
    expect(lines.slice(fold + 1, fold + 4)).toEqual(['', '| cell | metric | change | CI | why not gated |', '| --- | --- | --- | --- | --- |'])
    const rows = lines.slice(fold + 4, lines.indexOf('</details>', fold))
    expect(rows.filter(l => l !== '')).toHaveLength(26)
    expect(rows[0]).toBe(
      '| qcow2 none virtio-blk · fio raw | <code>total&#95;s</code> | +0.9% alone (+0.4% together) | -0.3% … +3.0% | ' +
        'the guest&#39;s own clock of its phases &#40;A/A sd 3.8 % together&#41;; host.workload&#95;s is gated in its place |',
    )
    // QEMU's CPU time is not shrunk by sharing the CPU: its change as it is
    expect(rows).toContain(
      '| qcow2 none ide · dd 128M | <code>host.workload&#95;cpu&#95;s</code> | +1.4% | -0.8% … +3.8% | ' +
        'QEMU&#39;s CPU time&#58; not shrunk by sharing the CPU, but blind to a slower device &#40;a throttle leaves it where it was&#41; |',
    )
  })

  it('keeps a regression of a guest pair first, its change alone and together; the new lines stay around it', () => {
    const file = editedFixture(dir, PAIRS, d => {
      const at = 4 // qcow2 none ide · dd 128M, inconclusive in the real gate
      d.verdict = 'regression'
      d.summary.counts.inconclusive = 0
      d.summary.counts.regression = 1
      d.summary.fails = true
      d.cells[at].verdict = 'regression'
      d.summary.screen.first = [{cell: at, metric: 'host.workload_s', said: null}]
      d.summary.screen.inconclusive = null
      d.summary.screen.rows[0].label = 'regression'
    })
    const text = render(file)
    expect(firstScreen(text)).toEqual([
      COULD_SEE,
      'Each row: <code>host.workload&#95;s</code>, the medians of base and head and the change.',
      '| cell | base | head | change (95% CI) | verdict |',
      '| --- | ---: | ---: | ---: | --- |',
      '| qcow2 none ide · dd 128M | 4.42&nbsp;s | 4.56&nbsp;s | +2.3% alone<br><sub>-1.8% … +5.6%</sub><br><sub>+1.1% together</sub> | regression |',
    ])
    const lines = text.split('\n')
    expect(lines.indexOf(FOLD)).toBeGreaterThan(lines.indexOf('| cell | base | head | change (95% CI) | verdict |'))
  })

  it('without a figure to show, says nothing of them', () => {
    const file = editedFixture(dir, PAIRS, d => {
      for (const row of d.summary.sensitivity) {
        row.could_see_pct = null
      }
      for (const c of d.cells) {
        c.information = []
      }
    })
    const text = render(file)
    expect(text).not.toContain('Could see')
    expect(text).not.toContain('not gated')
    expect(firstScreen(text)[0]).toMatch(/^\*\*1 inconclusive\*\*: /)
  })
})

describe('the comment renders the decisions of the document, and makes none', () => {
  it("follows the document's order of lines and rows", () => {
    const file = editedFixture(dir, 'real-regression.json', d => {
      d.summary.screen.first.reverse()
      d.summary.screen.rows.reverse()
    })
    const text = render(file)
    // the table's rows, as the document orders them: the reversed inconclusive rows, then the regressions
    const names = rowsOf(text).map(l => (l.split(' | ')[0] ?? '').slice(2))
    expect(names.slice(0, 1)).toEqual(['raw writeback virtio-blk · dd 16M'])
    expect(names.slice(4)).toEqual(['qcow2 none ide · dd 16M', 'raw none ide · dd 16M', 'raw writeback ide · dd 16M', 'qcow2 writeback ide · dd 16M'])
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
    // the rows lead with two metrics: each row names its own
    const row = rowsOf(text).find(l => l.startsWith('| qcow2 writeback ide · dd 16M |'))
    expect(row).toMatch(/^\| qcow2 writeback ide · dd 16M \| <code>host\.flushes<\/code> \| .* \| \+0\.0%<br><sub>\+0\.0% … \+0\.0%<\/sub> \| regression, as the document says \|$/)
  })
})
