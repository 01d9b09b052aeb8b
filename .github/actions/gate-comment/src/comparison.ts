/**
 * comparison.json, version 2 (docs/comparison.md in the repository): read,
 * size-capped and checked field by field before anything renders it.
 *
 * The file comes from an artifact that a pull request's code wrote, so it is
 * untrusted data: every field the action uses is checked for its type here,
 * `summary.screen` (what the comment shows first and in which order) against
 * the cells it names, a document of another kind or version is refused, and
 * keys this version does not know are ignored (the document may grow within
 * version 2).
 */
import * as fs from 'fs'

export const SCHEMA = 'diskbench-comparison'
export const VERSION = 2

export const VERDICTS = ['regression', 'changed', 'improvement', 'unchanged', 'inconclusive', 'error'] as const
export type Verdict = (typeof VERDICTS)[number]

export const KINDS = ['metric', 'failure', 'both-failed', 'base-failed', 'missing', 'no-metric', 'canary', 'counter', 'mixed-start', 'head-timed-out'] as const
export type Kind = (typeof KINDS)[number]

export interface Figures {
  readonly metric: string
  readonly unit: string
  readonly higherIsBetter: boolean
  readonly paired: boolean
  readonly nBase: number
  readonly nHead: number
  readonly medianBase: number | null
  readonly medianHead: number | null
  readonly ratio: number | null
  readonly changePct: number | null
  readonly ciLowPct: number | null
  readonly ciHighPct: number | null
  readonly pValue: number | null
  /** Holm-adjusted p in the family of tests that can fail the gate (null: judged alone) */
  readonly pAdjusted: number | null
  readonly minEffect: number
  readonly verdict: Verdict
  readonly reason: string
  /**
   * a guest pair taken together on one shared CPU: the factor on logs its change and interval are
   * scaled by to the size alone (null: not a pair, or a document without it; 1: not scaled)
   */
  readonly shrink: number | null
  /** the change as the pair measured it together (percent); null where not scaled */
  readonly measuredChangePct: number | null
  /**
   * a crossed guest pair (each side a CPU of its own): the sizes alone its change stands for
   * (percent), from the range a crossed pair reads a change at; null elsewhere
   */
  readonly aloneLowPct: number | null
  readonly aloneHighPct: number | null
  /** a figure shown but not gated (a cell's `information`): why it is not gated */
  readonly information: string | null
}

export interface Cell {
  readonly cellId: string
  /** the cell's short name (`qcow2 writeback ide · dd 64M`); null in a document without one */
  readonly title: string | null
  /** the gate spec's name of the cell, when a gate compared it */
  readonly gateName: string | null
  /** metric -> the fragment of the history pages that graphs it (links need the pages-url input) */
  readonly history: ReadonlyArray<readonly [string, string]>
  /** base's id of the cell when it differs from head's (a policy change renames cells) */
  readonly baseId: string | null
  readonly verdict: Verdict
  /** the verdict of the gated metrics alone */
  readonly timeVerdict: Verdict
  readonly kind: Kind
  readonly reason: string
  readonly rounds: number
  readonly baseOk: number
  readonly baseFailed: number
  readonly headOk: number
  readonly headFailed: number
  readonly metrics: readonly Figures[]
  readonly counters: readonly Figures[]
  /** figures shown beside the gated ones, deciding nothing, each with why (`information`) */
  readonly information: readonly Figures[]
  readonly counterVerdict: Verdict
  readonly note: string
}

export interface Side {
  readonly label: string
  readonly rev: string | null
}

export interface Canary {
  readonly beforeMibS: number | null
  readonly afterMibS: number | null
  readonly change: number | null
  readonly moved: boolean
  /** the cells whose verdict the host's move could explain, set to inconclusive */
  readonly voided: readonly string[]
  /** the cells whose change is beyond the host's move (or of a counter) */
  readonly kept: readonly string[]
}

/** One difference between the sides' subjects: `cache: none → writethrough` */
export interface SubjectChange {
  readonly what: string
  readonly base: string
  readonly head: string
}

export interface CellIdChange {
  readonly name: string
  readonly baseId: string
  readonly headId: string
}

/** A cell whose structural counters changed, and how (`host.flushes -100.0% (1901 → 0)`) */
export interface ChangedCell {
  readonly cellId: string
  readonly name: string
  readonly counters: readonly string[]
}

/** What a cell's gated metric could see, and the rounds an inconclusive one would need. */
export interface Sensitivity {
  readonly cellId: string
  readonly name: string
  /** the cell's kind: `guest` or `replay` (null: a document without it, read as guest) */
  readonly measure: string | null
  readonly metric: string
  readonly rounds: number
  readonly verdict: Verdict
  readonly couldSeePct: number | null
  readonly roundsToDecide: number | null
}

/** A line under the headline: a cell (an index into `cells`), its lead metric, or what happened. */
export interface ScreenLine {
  readonly cell: number
  /** the metric that decided (a name among the cell's metrics and counters); null without figures */
  readonly metric: string | null
  /** for a cell without figures, its reason in a few words */
  readonly said: string | null
}

/** One figure of a cell's fold: a metric or counter of the cell, and its verdict as the fold writes it. */
export interface Figure {
  readonly metric: string
  readonly label: string
}

/** A row of the table: the cell, its lead, its verdict as the row writes it, every figure for its fold. */
export interface ScreenRow {
  readonly cell: number
  readonly metric: string | null
  readonly label: string
  readonly figures: readonly Figure[]
}

/** What every summary shows first and in which order, as diskbench decided it (`summary.screen`). */
export interface Screen {
  readonly first: readonly ScreenLine[]
  /** an unchanged comparison: what it could have seen */
  readonly unchanged: {
    readonly cells: number
    readonly couldSeeLowPct: number | null
    readonly couldSeeHighPct: number | null
  } | null
  /** the inconclusive cells, what decides them (the command, a gate's), the figures of what inconclusive means */
  readonly inconclusive: {
    readonly cells: readonly number[]
    /** rounds per side the slowest metric needs */
    readonly rounds: number | null
    readonly command: readonly string[] | null
    /** a gate's comparison (more rounds), else one of records (more samples) */
    readonly gate: boolean
    readonly couldSeePct: number | null
    /** the cell of the slowest metric, and the rounds it has */
    readonly slowest: number | null
    readonly slowestRounds: number | null
  } | null
  readonly rows: readonly ScreenRow[]
  readonly unchangedRows: readonly ScreenRow[]
}

export interface Settings {
  readonly metrics: readonly string[]
  readonly minEffect: number
  readonly alpha: number
  readonly confidence: number
  readonly bootstrap: number
  readonly seed: number
  readonly correction: string
  readonly comparisons: number
  readonly changedFails: boolean
}

export interface Comparison {
  readonly createdAt: string
  readonly verdict: Verdict
  readonly accel: string
  readonly cellCount: number
  readonly counts: Readonly<Record<Verdict, number>>
  /** whether the verdict fails the gate: a regression, or changed when the spec says so */
  readonly fails: boolean
  readonly changed: readonly ChangedCell[]
  readonly subjectDiff: readonly SubjectChange[]
  readonly cellIdChanges: readonly CellIdChange[]
  readonly axisSentence: string | null
  readonly sensitivity: readonly Sensitivity[]
  /** the command line (argv) that reproduces the comparison; empty in a document without one */
  readonly reproduce: readonly string[]
  readonly warnings: readonly string[]
  readonly base: Side
  readonly head: Side
  /** the machine's figures the report shows, strings only */
  readonly machine: ReadonlyArray<readonly [string, string]>
  readonly settings: Settings
  readonly canary: Canary | null
  /** the gate's budget: scalar entries only (the object is free-form) */
  readonly budget: ReadonlyArray<readonly [string, string]>
  readonly cells: readonly Cell[]
  readonly screen: Screen
}

export class ComparisonError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ComparisonError'
  }
}

const MACHINE_KEYS = ['hostname', 'cpu', 'accel', 'qemu_version', 'host_kernel', 'work_dir_fs', 'host_disk'] as const

/** Reads and checks the file at `path`, refusing one over `maxBytes` before reading it. */
export function loadComparison(path: string, maxBytes: number): Comparison {
  let size: number
  try {
    const stat = fs.statSync(path)
    if (!stat.isFile()) {
      throw new ComparisonError(`${path}: not a regular file`)
    }
    size = stat.size
  } catch (e) {
    if (e instanceof ComparisonError) {
      throw e
    }
    throw new ComparisonError(`${path}: cannot read it (${(e as Error).message}); did the gate upload its artifact?`)
  }
  if (size > maxBytes) {
    throw new ComparisonError(`${path} is ${size} bytes, over max-bytes ${maxBytes}: refused unread`)
  }
  const text = fs.readFileSync(path, 'utf8')
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch (e) {
    throw new ComparisonError(`${path}: not JSON (${(e as Error).message}); a truncated upload?`)
  }
  return parseComparison(data, path)
}

/** Checks a parsed document; `where` names it in errors. */
export function parseComparison(data: unknown, where = 'comparison.json'): Comparison {
  const doc = new Reader(data, where)
  doc.object()
  const schema = doc.optional('schema')?.raw
  if (schema !== SCHEMA) {
    throw new ComparisonError(`${where}: schema is ${describe(schema)}, not "${SCHEMA}": not a diskbench comparison`)
  }
  const version = doc.optional('version')?.raw
  if (version !== VERSION) {
    throw new ComparisonError(
      `${where}: version ${describe(version)}: this action reads version ${VERSION} only; ` +
        'use the action from the same commit as the diskbench that wrote the file',
    )
  }
  const summary = doc.field('summary')
  const counts = summary.field('counts')
  const machine = doc.field('machine')
  machine.object()
  const budget = doc.field('budget')
  const cells = doc.field('cells').array(cell)
  if (summary.optional('screen') === undefined) {
    throw new ComparisonError(
      `${where}: $.summary.screen: required, missing: a diskbench older than this action wrote it; ` +
        'use the action from the same commit as the diskbench that wrote the file',
    )
  }
  return {
    createdAt: doc.field('created_at').string(),
    verdict: doc.field('verdict').verdict(),
    accel: doc.field('accel').string(),
    cellCount: summary.field('cells').count(),
    counts: {
      regression: counts.field('regression').count(),
      changed: counts.field('changed').count(),
      improvement: counts.field('improvement').count(),
      unchanged: counts.field('unchanged').count(),
      inconclusive: counts.field('inconclusive').count(),
      error: counts.field('error').count(),
    },
    fails: summary.field('fails').boolean(),
    changed: summary.field('changed').array(r => ({
      cellId: r.field('cell_id').string(),
      name: r.field('name').string(),
      counters: r.field('counters').array(x => x.string()),
    })),
    subjectDiff: summary.field('subject_diff').array(r => ({
      what: r.field('what').string(),
      base: r.field('base').string(),
      head: r.field('head').string(),
    })),
    cellIdChanges: summary.field('cell_id_changes').array(r => ({
      name: r.field('name').string(),
      baseId: r.field('base_id').string(),
      headId: r.field('head_id').string(),
    })),
    axisSentence: summary.field('axis_sentence').nullable(r => r.string()),
    sensitivity:
      summary.optional('sensitivity')?.array(r => ({
        cellId: r.field('cell_id').string(),
        name: r.field('name').string(),
        measure: r.optional('measure')?.nullable(x => x.string()) ?? null,
        metric: r.field('metric').string(),
        rounds: r.field('rounds').count(),
        verdict: r.field('verdict').verdict(),
        couldSeePct: r.field('could_see_pct').nullable(x => x.number()),
        roundsToDecide: r.field('rounds_to_decide').nullable(x => x.count()),
      })) ?? [],
    reproduce: doc.optional('reproduce')?.nullable(r => r.array(x => x.string())) ?? [],
    warnings: doc.field('warnings').array(r => r.string()),
    base: side(doc.field('base')),
    head: side(doc.field('head')),
    machine: MACHINE_KEYS.flatMap(key => {
      const value = machine.optional(key)
      return value === undefined || value.raw === null ? [] : [[key, value.string()] as const]
    }),
    settings: settings(doc.field('settings')),
    canary: doc.field('canary').nullable(canary),
    budget: budget.nullable(b => b.scalars()) ?? [],
    cells,
    screen: screen(summary.field('screen'), cells),
  }
}

/** `summary.screen`, every cell it names one of the document's, every metric one of that cell's. */
function screen(r: Reader, cells: readonly Cell[]): Screen {
  const index = (x: Reader): number => {
    const at = x.count()
    return at < cells.length ? at : x.refuse(`a cell of the document (it has ${cells.length})`)
  }
  const metric = (x: Reader, at: number): string => {
    const name = x.string()
    const c = cells[at]
    const known = c !== undefined && [...c.metrics, ...c.counters].some(m => m.metric === name)
    return known ? name : x.refuse(`a metric of cell ${at}`)
  }
  const row = (x: Reader): ScreenRow => {
    const at = index(x.field('cell'))
    return {
      cell: at,
      metric: x.field('metric').nullable(m => metric(m, at)),
      label: x.field('label').string(),
      figures: x.field('figures').array(f => ({metric: metric(f.field('metric'), at), label: f.field('label').string()})),
    }
  }
  const rows = r.field('rows').array(row)
  const unchangedRows = r.field('unchanged_rows').array(row)
  const shown = [...rows, ...unchangedRows].map(x => x.cell).sort((a, b) => a - b)
  if (shown.length !== cells.length || shown.some((at, i) => at !== i)) {
    r.field('rows').refuse(`one row per cell with unchanged_rows (${cells.length} cells; rows for ${shown.join(', ') || 'none'})`)
  }
  return {
    first: r.field('first').array(x => {
      const at = index(x.field('cell'))
      return {cell: at, metric: x.field('metric').nullable(m => metric(m, at)), said: x.field('said').nullable(s => s.string())}
    }),
    unchanged: r.field('unchanged').nullable(x => ({
      cells: x.field('cells').count(),
      couldSeeLowPct: x.field('could_see_low_pct').nullable(n => n.number()),
      couldSeeHighPct: x.field('could_see_high_pct').nullable(n => n.number()),
    })),
    inconclusive: r.field('inconclusive').nullable(x => ({
      cells: x.field('cells').array(index),
      rounds: x.field('rounds').nullable(n => n.count()),
      command: x.field('command').nullable(c => c.array(a => a.string())),
      gate: x.field('gate').boolean(),
      couldSeePct: x.field('could_see_pct').nullable(n => n.number()),
      slowest: x.field('slowest').nullable(index),
      slowestRounds: x.field('slowest_rounds').nullable(n => n.count()),
    })),
    rows,
    unchangedRows,
  }
}

function side(r: Reader): Side {
  return {label: r.field('label').string(), rev: r.field('rev').nullable(x => x.string())}
}

function settings(r: Reader): Settings {
  return {
    metrics: r.field('metrics').array(x => x.string()),
    minEffect: r.field('min_effect').number(),
    alpha: r.field('alpha').number(),
    confidence: r.field('confidence').number(),
    bootstrap: r.field('bootstrap').count(),
    seed: r.field('seed').integer(),
    correction: r.field('correction').string(),
    comparisons: r.optional('comparisons')?.count() ?? 1,
    changedFails: r.field('changed_fails').boolean(),
  }
}

function canary(r: Reader): Canary {
  return {
    beforeMibS: r.field('before_mib_s').nullable(x => x.number()),
    afterMibS: r.field('after_mib_s').nullable(x => x.number()),
    change: r.field('change').nullable(x => x.number()),
    moved: r.field('moved').boolean(),
    voided: r.field('voided').array(x => x.string()),
    kept: r.field('kept').array(x => x.string()),
  }
}

function cell(r: Reader): Cell {
  const axes = r.field('cell')
  axes.object()
  return {
    cellId: r.field('cell_id').string(),
    title: r.optional('title')?.string() ?? null,
    gateName: axes.optional('gate_name')?.nullable(x => x.string()) ?? null,
    history: r.optional('history')?.strings() ?? [],
    baseId: axes.optional('base_id')?.nullable(x => x.string()) ?? null,
    verdict: r.field('verdict').verdict(),
    timeVerdict: r.field('time_verdict').verdict(),
    kind: r.field('kind').oneOf(KINDS),
    reason: r.field('reason').string(),
    rounds: r.field('rounds').count(),
    baseOk: r.field('base_ok').count(),
    baseFailed: r.field('base_failed').count(),
    headOk: r.field('head_ok').count(),
    headFailed: r.field('head_failed').count(),
    metrics: r.field('metrics').array(metric),
    counters: r.field('counters').array(metric),
    information: r.optional('information')?.array(metric) ?? [],
    counterVerdict: r.field('counter_verdict').verdict(),
    note: r.field('note').string(),
  }
}

function metric(r: Reader): Figures {
  const num = (key: string): number | null => r.field(key).nullable(x => x.number())
  r.field('ci_low').nullable(x => x.number())
  r.field('ci_high').nullable(x => x.number())
  return {
    metric: r.field('metric').string(),
    unit: r.field('unit').string(),
    higherIsBetter: r.field('higher_is_better').boolean(),
    paired: r.field('paired').boolean(),
    nBase: r.field('n_base').count(),
    nHead: r.field('n_head').count(),
    medianBase: num('median_base'),
    medianHead: num('median_head'),
    ratio: num('ratio'),
    changePct: num('change_pct'),
    ciLowPct: num('ci_low_pct'),
    ciHighPct: num('ci_high_pct'),
    pValue: num('p_value'),
    pAdjusted: num('p_adjusted'),
    minEffect: r.field('min_effect').number(),
    verdict: r.field('verdict').verdict(),
    reason: r.field('reason').string(),
    shrink: r.optional('shrink')?.nullable(x => x.number()) ?? null,
    measuredChangePct: r.optional('measured_change_pct')?.nullable(x => x.number()) ?? null,
    aloneLowPct: r.optional('alone_low_pct')?.nullable(x => x.number()) ?? null,
    aloneHighPct: r.optional('alone_high_pct')?.nullable(x => x.number()) ?? null,
    information: r.optional('information')?.nullable(x => x.string()) ?? null,
  }
}

function describe(value: unknown): string {
  if (value === undefined) {
    return 'missing'
  }
  const text = JSON.stringify(value) ?? String(value)
  return text.length > 40 ? `${text.slice(0, 40)}…` : text
}

function typeName(value: unknown): string {
  if (value === null) {
    return 'null'
  }
  if (Array.isArray(value)) {
    return 'an array'
  }
  return typeof value === 'object' ? 'an object' : `${typeof value} ${describe(value)}`
}

/** One value of the document and where it is (`$.cells[2].verdict`), with typed accessors. */
class Reader {
  constructor(
    readonly raw: unknown,
    private readonly where: string,
    private readonly path = '$',
  ) {}

  private fail(expected: string): never {
    throw new ComparisonError(`${this.where}: ${this.path}: expected ${expected}, got ${typeName(this.raw)}`)
  }

  /** Refuses a value of the right type that the rest of the document contradicts. */
  refuse(expected: string): never {
    throw new ComparisonError(`${this.where}: ${this.path}: expected ${expected}, got ${describe(this.raw)}`)
  }

  object(): Record<string, unknown> {
    if (typeof this.raw !== 'object' || this.raw === null || Array.isArray(this.raw)) {
      this.fail('an object')
    }
    return this.raw as Record<string, unknown>
  }

  field(key: string): Reader {
    const obj = this.object()
    if (!Object.prototype.hasOwnProperty.call(obj, key)) {
      throw new ComparisonError(`${this.where}: ${this.path}.${key}: required, missing`)
    }
    return new Reader(obj[key], this.where, `${this.path}.${key}`)
  }

  optional(key: string): Reader | undefined {
    const obj = this.object()
    return Object.prototype.hasOwnProperty.call(obj, key)
      ? new Reader(obj[key], this.where, `${this.path}.${key}`)
      : undefined
  }

  string(): string {
    return typeof this.raw === 'string' ? this.raw : this.fail('a string')
  }

  boolean(): boolean {
    return typeof this.raw === 'boolean' ? this.raw : this.fail('true or false')
  }

  number(): number {
    return typeof this.raw === 'number' && Number.isFinite(this.raw) ? this.raw : this.fail('a number')
  }

  integer(): number {
    return Number.isSafeInteger(this.raw) ? (this.raw as number) : this.fail('an integer')
  }

  count(): number {
    return Number.isSafeInteger(this.raw) && (this.raw as number) >= 0
      ? (this.raw as number)
      : this.fail('an integer >= 0')
  }

  verdict(): Verdict {
    return this.oneOf(VERDICTS)
  }

  oneOf<T extends string>(allowed: readonly T[]): T {
    const found = allowed.find(a => a === this.raw)
    return found ?? this.fail(`one of ${allowed.join(', ')}`)
  }

  nullable<T>(read: (r: Reader) => T): T | null {
    return this.raw === null ? null : read(this)
  }

  array<T>(read: (r: Reader) => T): T[] {
    if (!Array.isArray(this.raw)) {
      this.fail('an array')
    }
    return this.raw.map((item: unknown, i: number) => read(new Reader(item, this.where, `${this.path}[${i}]`)))
  }

  /** The entries of an object whose values must all be strings. */
  strings(): Array<readonly [string, string]> {
    return Object.keys(this.object()).map(key => [key, this.field(key).string()] as const)
  }

  /** The entries of a free-form object whose values are strings, numbers or booleans. */
  scalars(): Array<readonly [string, string]> {
    return Object.entries(this.object()).flatMap(([key, value]) =>
      ['string', 'number', 'boolean'].includes(typeof value) ? [[key, String(value)] as const] : [],
    )
  }
}
