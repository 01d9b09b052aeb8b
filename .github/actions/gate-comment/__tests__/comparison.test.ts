import * as fs from 'fs'
import * as os from 'os'
import * as path from 'path'
import {afterAll, describe, expect, it} from 'vitest'
import {ComparisonError, loadComparison} from '../src/comparison'
import {editedFixture, fixture} from './helpers'

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'comparison-test-'))
afterAll(() => fs.rmSync(dir, {recursive: true, force: true}))
const MB = 1024 * 1024
const sensitivityRow = {cell_id: 'c', name: 'c', metric: 'total_s', rounds: 8, verdict: 'unchanged', could_see_pct: 3.1, rounds_to_decide: null}

describe('loadComparison', () => {
  it('reads the document diskbench wrote, figures and verdicts as they are', () => {
    const doc = loadComparison(fixture('regression.json'), 2 * MB)
    expect(doc.verdict).toBe('regression')
    expect(doc.accel).toBe('kvm')
    expect(doc.counts).toEqual({regression: 3, changed: 1, improvement: 0, unchanged: 1, inconclusive: 0, error: 1})
    expect(doc.fails).toBe(true)
    expect(doc.changed).toEqual([
      {
        cellId: 'qcow2-off-cs64k-2g.writeback-threads-nvme.dd-64m-2m-ext4',
        name: 'qcow2-off-cs64k-2g.writeback-threads-nvme.dd-64m-2m-ext4',
        counters: ['host.flushes -50.0% (200 → 100)'],
      },
    ])
    expect(doc.cells[5]?.verdict).toBe('changed')
    expect(doc.cells[5]?.timeVerdict).toBe('unchanged')
    expect(doc.cells).toHaveLength(6)
    const first = doc.cells[0]
    expect(first?.verdict).toBe('regression')
    expect(first?.kind).toBe('metric')
    expect(first?.metrics[0]).toMatchObject({metric: 'total_s', unit: 's', verdict: 'regression', paired: true})
    expect(first?.metrics[0]?.changePct).toBeCloseTo(20.8, 1)
    expect(doc.cells.map(c => c.kind)).toEqual(['metric', 'metric', 'metric', 'failure', 'both-failed', 'counter'])
    expect(doc.canary).toEqual({
      beforeMibS: 1500,
      afterMibS: 1490,
      change: expect.closeTo(0.99333, 4),
      moved: false,
      voided: [],
      kept: [],
    })
    expect(doc.machine).toContainEqual(['hostname', 'runner-1'])
    expect(doc.head.rev).toBe('9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d')
  })

  it("reads a gate's guest pairs and replay cells: the kind of cell, the shrink, the figures not gated", () => {
    const doc = loadComparison(fixture('real-gate-pairs.json'), 2 * MB)
    expect(doc.sensitivity.map(r => r.measure)).toEqual([...Array(5).fill('guest'), ...Array(6).fill('replay')])
    const pair = doc.cells[4]
    expect(pair?.title).toBe('qcow2 none ide · dd 128M')
    expect(pair?.metrics[0]).toMatchObject({metric: 'host.workload_s', shrink: 2, measuredChangePct: 1.1287, changePct: 2.2701, information: ''})
    expect(pair?.information.map(m => m.metric)).toEqual(['total_s', 'dev.write_p90_ms', 'host.workload_cpu_s', 'host.workload_alone_s'])
    expect(pair?.information[0]?.information).toBe("the guest's own clock of its phases (A/A sd 3.8 % together); host.workload_s is gated in its place")
    // QEMU's CPU time is not shrunk by sharing the CPU: not scaled
    expect(pair?.information[2]).toMatchObject({metric: 'host.workload_cpu_s', shrink: 1, measuredChangePct: 1.3974})
    const replay = doc.cells[5]
    expect(replay?.metrics[0]).toMatchObject({metric: 'replay.wall_s', shrink: 1, measuredChangePct: 0.1658})
    expect(replay?.information).toEqual([])
    // a document written before them: no kind, no shrink, nothing shown but not gated
    const older = loadComparison(fixture('real-regression.json'), 2 * MB)
    expect(older.sensitivity.every(r => r.measure === null)).toBe(true)
    expect(older.cells.every(c => c.information.length === 0 && c.metrics.every(m => m.shrink === null))).toBe(true)
  })

  it('refuses a file over max-bytes without reading it', () => {
    const huge = path.join(dir, 'huge.json')
    fs.writeFileSync(huge, '')
    fs.truncateSync(huge, 512 * MB) // sparse: reading it would take seconds and half a GiB
    const started = Date.now()
    expect(() => loadComparison(huge, 2 * MB)).toThrow(`is ${512 * MB} bytes, over max-bytes ${2 * MB}: refused unread`)
    expect(Date.now() - started).toBeLessThan(500)
  })

  it('refuses a missing file, naming the artifact', () => {
    expect(() => loadComparison(path.join(dir, 'absent.json'), MB)).toThrow(/cannot read it .*artifact/)
  })

  it('refuses a truncated file', () => {
    const file = path.join(dir, 'cut.json')
    fs.writeFileSync(file, fs.readFileSync(fixture('regression.json'), 'utf8').slice(0, 500))
    expect(() => loadComparison(file, MB)).toThrow(/not JSON .*truncated/)
  })

  it.each([
    ['another schema', (d: any) => (d.schema = 'pytest-benchmark'), 'schema is "pytest-benchmark", not "diskbench-comparison"'],
    ['no schema', (d: any) => delete d.schema, 'schema is missing'],
    ['an unknown version', (d: any) => (d.version = 1), 'version 1: this action reads version 2 only'],
    ['a version as a string', (d: any) => (d.version = '2'), 'version "2": this action reads version 2 only'],
    ['an unknown verdict', (d: any) => (d.verdict = 'catastrophe'), '$.verdict: expected one of regression'],
    ['a missing field', (d: any) => delete d.cells[2].reason, '$.cells[2].reason: required, missing'],
    ['a string for a number', (d: any) => (d.cells[0].metrics[0].ratio = '1.2'), '$.cells[0].metrics[0].ratio: expected a number, got string "1.2"'],
    ['a negative count', (d: any) => (d.summary.counts.regression = -1), '$.summary.counts.regression: expected an integer >= 0'],
    ['an object for a string', (d: any) => (d.cells[1].cell_id = {x: 1}), '$.cells[1].cell_id: expected a string, got an object'],
    ['an unknown kind', (d: any) => (d.cells[0].kind = 'magic'), '$.cells[0].kind: expected one of metric'],
    ['cells not an array', (d: any) => (d.cells = {}), '$.cells: expected an array, got an object'],
    [
      'a document without its screen (an older diskbench)',
      (d: any) => delete d.summary.screen,
      '$.summary.screen: required, missing: a diskbench older than this action wrote it',
    ],
    ['a screen line of a cell it lacks', (d: any) => (d.summary.screen.first[0].cell = 6), '$.summary.screen.first[0].cell: expected a cell of the document (it has 6), got 6'],
    ['a row metric the cell lacks', (d: any) => (d.summary.screen.rows[1].metric = 'nothing'), '$.summary.screen.rows[1].metric: expected a metric of cell 0, got "nothing"'],
    ['a figure the cell lacks', (d: any) => (d.summary.screen.rows[1].figures[0].metric = 'x'), '$.summary.screen.rows[1].figures[0].metric: expected a metric of cell 0, got "x"'],
    ['rows that leave a cell out', (d: any) => (d.summary.screen.unchanged_rows = []), '$.summary.screen.rows: expected one row per cell with unchanged_rows (6 cells; rows for 0, 1, 3, 4, 5)'],
    ['a kind of cell not a string', (d: any) => (d.summary.sensitivity = [{...sensitivityRow, measure: 7}]), '$.summary.sensitivity[0].measure: expected a string, got number 7'],
    ['a shrink as a string', (d: any) => (d.cells[0].metrics[0].shrink = '2'), '$.cells[0].metrics[0].shrink: expected a number, got string "2"'],
    ['a measured change not finite', (d: any) => (d.cells[0].metrics[0].measured_change_pct = 'NaN'), '$.cells[0].metrics[0].measured_change_pct: expected a number'],
    ['figures not gated not a list', (d: any) => (d.cells[0].information = {}), '$.cells[0].information: expected an array, got an object'],
    [
      'a figure not gated without its figures',
      (d: any) => (d.cells[0].information = [{metric: 'total_s', information: 'why'}]),
      '$.cells[0].information[0].ci_low: required, missing',
    ],
    [
      'a reason not a string',
      (d: any) => (d.cells[0].information = [{...d.cells[0].metrics[0], information: ['why']}]),
      '$.cells[0].information[0].information: expected a string, got an array',
    ],
    ['a cell in two rows', (d: any) => (d.summary.screen.unchanged_rows[0].cell = 0), '(6 cells; rows for 0, 0, 1, 3, 4, 5)'],
  ])('refuses %s, saying where', (_what, edit, message) => {
    const file = editedFixture(dir, 'regression.json', edit)
    const read = (): unknown => loadComparison(file, MB)
    expect(read).toThrow(ComparisonError)
    expect(read).toThrow(message)
  })

  it('refuses a document that is not an object', () => {
    const file = path.join(dir, 'array.json')
    fs.writeFileSync(file, '[1, 2]')
    expect(() => loadComparison(file, MB)).toThrow('$: expected an object, got an array')
  })

  it('ignores keys version 2 may add', () => {
    const file = editedFixture(dir, 'regression.json', d => {
      d.future = {anything: [1, 2]}
      d.cells[0].future_figure = 'x'
      d.cells[0].metrics[0].future = null
    })
    expect(loadComparison(file, MB).verdict).toBe('regression')
  })
})
