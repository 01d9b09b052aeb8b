/**
 * The markdown of a comparison: what the gate decided, cell by cell.
 *
 * It decides nothing: verdicts, reasons and figures are the document's, as
 * diskbench's Python computed them. Numbers are formatted here from checked
 * finite numbers; every string of the document goes through `md`/`code`.
 */
import type {Cell, Comparison, Figures, ScreenRow, Sensitivity, Verdict} from './comparison'
import {code, md} from './escape'

/** What the page around the document adds: none of it comes from the file. */
export interface RenderContext {
  /** link to the workflow run that measured it (from the event) */
  readonly runUrl?: string
  /** the head commit the run measured (from the event) */
  readonly headSha?: string
  /** the rendered text is cut to fit this many characters */
  readonly maxChars: number
  /** the published history pages (the action's pages-url input): each row links its graph */
  readonly pagesUrl?: string
}

const HEADLINE: Readonly<Record<Verdict, string>> = {
  regression: ':red_circle: REGRESSION',
  changed: ':orange_circle: CHANGED',
  improvement: ':green_circle: IMPROVEMENT',
  unchanged: ':white_circle: UNCHANGED',
  inconclusive: ':yellow_circle: INCONCLUSIVE',
  error: ':warning: ERROR',
}

const ORDER: readonly Verdict[] = ['regression', 'changed', 'improvement', 'unchanged', 'inconclusive', 'error']

/**
 * The comparison as markdown, at most `ctx.maxChars` long (lines, rows and folds are left out to fit:
 * the rows of figures not gated first, then the cells').
 *
 * In the order the document's `summary.screen` gives (diskbench decided it, as for its own
 * summary.md): the headline, what the gate could have seen per kind of cell, a line per regressed,
 * changed or failed cell, the axis sentence, the inconclusive cells and the command that decides
 * them, what differs, one table row per cell, every figure of a cell in a fold under the table,
 * the figures shown but not gated in one fold, then the rest.
 */
export function renderMarkdown(doc: Comparison, ctx: RenderContext): string {
  let keep = Math.max(doc.screen.first.length, doc.screen.rows.length, doc.screen.unchangedRows.length)
  let info = informationRows(doc).length
  for (;;) {
    const text = compose(doc, ctx, keep, info)
    if (text.length <= ctx.maxChars || (keep === 0 && info === 0)) {
      return text.length <= ctx.maxChars ? text : `${text.slice(0, Math.max(0, ctx.maxChars - 2))}…\n`
    }
    if (info > 0) {
      info = Math.floor(info / 2)
    } else {
      keep = Math.floor(keep / 2)
    }
  }
}

/** `keep` of the cells' lines, rows and folds; `info` of the rows of figures not gated. */
function compose(doc: Comparison, ctx: RenderContext, keep: number, info: number): string {
  const lines: string[] = []
  lines.push(`## diskbench gate: ${HEADLINE[doc.verdict]}${headlineChanges(doc)}`, '')
  const tally = ORDER.filter(v => doc.counts[v] > 0)
    .map(v => (v === 'regression' || v === 'changed' ? `**${doc.counts[v]} ${v}**` : `${doc.counts[v]} ${v}`))
    .join(', ')
  lines.push(`${doc.cellCount} cell${doc.cellCount === 1 ? '' : 's'}${tally ? ` (${tally})` : ''}, ${accelLine(doc.accel, hostDisk(doc))}.`, '')
  const seen = kindLine(doc.sensitivity)
  if (seen) {
    lines.push(`${seen} (a regression this large, alone, fails the gate 4 times in 5).`, '')
  }
  const {rows, unchangedRows} = doc.screen
  lines.push(...firstLines(doc))
  lines.push(...subjectLines(doc))
  lines.push(`base ${sideText(doc.base)} vs head ${sideText(doc.head)}${measuredText(ctx)}`, '')
  if (headMismatch(doc, ctx)) {
    lines.push(`> **Warning:** this comparison's head is not the commit the run was for (${ctx.headSha?.slice(0, 12)}).`, '')
  }
  for (const warning of doc.warnings) {
    lines.push(`> **Warning:** ${md(warning, 1000)}`, '')
  }
  lines.push(...inconclusiveLines(doc))
  // each regressed, changed or failed cell is said once: its row of the table
  if (rows.length > 0) {
    lines.push(...table(doc, rows, keep, ctx), '')
  }
  if (doc.axisSentence) {
    lines.push(md(doc.axisSentence, 1000), '')
  }
  if (rows.length > 0) {
    lines.push(...rows.slice(0, keep).flatMap(r => fold(doc, r, ctx)))
  }
  const count = `${doc.counts.unchanged} cell${doc.counts.unchanged === 1 ? '' : 's'} unchanged`
  if (unchangedRows.length > 0) {
    lines.push(`<details><summary>${count} (their figures)</summary>`, '', ...table(doc, unchangedRows, keep, ctx), '')
    lines.push(...unchangedRows.slice(0, keep).flatMap(r => fold(doc, r, ctx)), '</details>', '')
  } else if (rows.length > 0) {
    lines.push(`${count}.`, '')
  }
  lines.push(...informationLines(doc, info))
  if (doc.counts.inconclusive > 0) {
    lines.push(inconclusiveSentence(doc), '')
  }
  lines.push(...reproduceLines(doc.reproduce))
  if (doc.canary) {
    const {beforeMibS, afterMibS, change, moved} = doc.canary
    const figures =
      beforeMibS !== null && afterMibS !== null && change !== null
        ? `${beforeMibS.toFixed(0)} → ${afterMibS.toFixed(0)} MiB/s (${pct(change)})`
        : 'not measured'
    const state = moved ? '**moved: the time verdicts it could explain set to inconclusive**' : 'steady'
    lines.push(`Host canary: ${figures}: ${state}.`, '')
    if (doc.canary.voided.length > 0) {
      lines.push(`Canary voided (the host's move could explain their change): ${doc.canary.voided.map(c => code(c)).join(', ')}.`, '')
    }
    if (doc.canary.kept.length > 0) {
      lines.push(`Canary did not void (a change beyond the host's move): ${doc.canary.kept.map(c => code(c)).join(', ')}.`, '')
    }
  }
  const footer: string[] = []
  if (doc.budget.length > 0) {
    footer.push(`Budget: ${doc.budget.map(([k, v]) => `${md(k, 60)} ${md(v, 60)}`).join(', ')}.`)
  }
  footer.push(`Machine: ${doc.machine.map(([k, v]) => `${k} ${md(v, 200)}`).join(', ') || 'unknown'}.`)
  const s = doc.settings
  footer.push(
    `Settings: gated ${s.metrics.map(m => code(m, 80)).join(', ') || 'nothing'}, minimum effect ${num(s.minEffect * 100)}%, ` +
      `alpha ${num(s.alpha)} family-wise (${md(s.correction, 20)}, ${s.comparisons} tests), ` +
      `${num(s.confidence * 100)}% bootstrap CI (${s.bootstrap} resamples, seed ${s.seed}); ` +
      `changed ${s.changedFails ? 'fails' : 'does not fail'} the gate. ` +
      `Created ${md(doc.createdAt, 60)}.`,
  )
  lines.push('<sub>', '', ...footer.flatMap(f => [f, '']), '</sub>')
  return `${lines.join('\n')}\n`
}

/** The cell's figure of a metric the screen names (the reader checked that the cell has it). */
function figure(c: Cell, metric: string | null): Figures | undefined {
  return metric === null ? undefined : [...c.metrics, ...c.counters].find(m => m.metric === metric)
}

/** The document's cell at an index the reader checked. */
function cellAt(doc: Comparison, at: number): Cell {
  const c = doc.cells[at]
  if (c === undefined) {
    throw new Error(`no cell ${at}`) // parseComparison refuses such a document
  }
  return c
}

/** The cell's short name, its id when the document gives none. */
function nameOf(c: Cell): string {
  return c.title === null ? code(c.cellId) : md(c.title, 200)
}

/**
 * Under the headline, for an unchanged comparison: what it could have seen. (The regressed,
 * changed and failed cells are said once, each in its row of the table that follows.)
 */
function firstLines(doc: Comparison): string[] {
  const {unchanged} = doc.screen
  const lines: string[] = []
  if (unchanged !== null) {
    let text = unchanged.cells === 1 ? 'The cell is unchanged' : `All ${unchanged.cells} cells unchanged`
    const {couldSeeLowPct: low, couldSeeHighPct: high} = unchanged
    if (low !== null && high !== null) {
      const span = low.toFixed(1) === high.toFixed(1) ? `${low.toFixed(1)}%` : `${low.toFixed(1)}% to ${high.toFixed(1)}% (by cell)`
      text += `: each would have caught a regression of ${span} or more 4 times in 5`
    }
    lines.push(`${text}.`)
  }
  return lines.length > 0 ? [...lines, ''] : []
}

/**
 * What the gate could have seen per kind of cell (guest, replay), as diskbench's summary says it
 * (`kind_line`): per cell its most sensitive gated metric, the range over a kind's cells;
 * '' when no row has a figure. A row without a kind is a guest cell's.
 */
export function kindLine(rows: readonly Sensitivity[]): string {
  const best = new Map<string, Map<string, number>>()
  for (const row of rows) {
    if (row.couldSeePct === null) {
      continue
    }
    const kind = row.measure || 'guest'
    const cells = best.get(kind) ?? new Map<string, number>()
    cells.set(row.cellId, Math.min(cells.get(row.cellId) ?? Infinity, row.couldSeePct))
    best.set(kind, cells)
  }
  const parts = ['guest', 'replay'].flatMap(kind => {
    const values = [...(best.get(kind)?.values() ?? [])].sort((a, b) => a - b)
    const low = values[0]
    const high = values[values.length - 1]
    if (low === undefined || high === undefined) {
      return []
    }
    // never a range of one value (five cells that could each see 5.0%: "≥ 5.0%")
    const span = low.toFixed(1) === high.toFixed(1) ? `${low.toFixed(1)}%` : `${low.toFixed(1)}–${high.toFixed(1)}%`
    return [`${values.length} ${kind} cell${values.length === 1 ? '' : 's'} ≥ ${span}`]
  })
  return parts.length > 0 ? `Could see: ${parts.join('; ')}` : ''
}

/** Every figure shown but not gated, with its cell, in the document's order. */
function informationRows(doc: Comparison): Array<readonly [Cell, Figures]> {
  return doc.cells.flatMap(c => c.information.map(m => [c, m] as const))
}

/**
 * The figures shown but not gated (each cell's `information`), folded: one row per cell and
 * metric with its change, interval and why it is not gated; `keep` of the rows.
 */
function informationLines(doc: Comparison, keep: number): string[] {
  const rows = informationRows(doc)
  const n = rows.length
  if (n === 0) {
    return []
  }
  const lines = [`<details><summary>${n} figure${n === 1 ? '' : 's'} shown, not gated (they decide nothing)</summary>`, '']
  if (keep > 0) {
    lines.push(
      '| cell | metric | change | CI | why not gated |',
      '| --- | --- | --- | --- | --- |',
      ...rows.slice(0, keep).map(([c, m]) => `| ${[nameOf(c), code(m.metric, 80), change(m), ci(m), md(m.information ?? '')].join(' | ')} |`),
    )
  }
  if (keep < n) {
    const more = n - keep
    lines.push(...(keep > 0 ? [''] : []), `… ${more} more row${more === 1 ? '' : 's'}: the job summary and the artifact have them all.`)
  }
  return [...lines, '', '</details>', '']
}

/** The inconclusive cells by name, and what decides them: the gate's command, or more samples. */
function inconclusiveLines(doc: Comparison): string[] {
  const entry = doc.screen.inconclusive
  if (entry === null) {
    return []
  }
  const text = `**${entry.cells.length} inconclusive**: ${entry.cells.map(at => nameOf(cellAt(doc, at))).join(', ')}.`
  if (entry.command !== null && entry.rounds !== null) {
    const decide = `${text} About ${entry.rounds} rounds per side would decide them:`
    if (!plainCommand(entry.command)) {
      return [`${decide} the command has characters this comment does not show, see summary.md in the artifact.`, '']
    }
    return [decide, '', `<pre><code>${entry.command.join(' ')}</code></pre>`, '']
  }
  if (entry.rounds !== null) {
    const repeat = code(`--repeat ${entry.rounds}`)
    return [`${text} About ${entry.rounds} samples per side would decide them: record them (${repeat}) and compare again.`, '']
  }
  if (entry.cells.every(at => fewSamples(cellAt(doc, at)))) {
    const more = entry.gate ? 'run more rounds' : `record more samples (${code('--repeat')}) and compare again`
    return [`${text} Too few samples for an interval: ${more}.`, '']
  }
  return [`${text} No number of rounds can be given for them: why, under the table.`, '']
}

/** Whether an inconclusive cell's inconclusive metrics have no interval yet (too few samples for one). */
function fewSamples(c: Cell): boolean {
  const open = c.metrics.filter(m => m.verdict === 'inconclusive')
  return open.length > 0 && open.every(m => m.ciLowPct === null || m.ciHighPct === null || m.changePct === null)
}

/**
 * The table: one row per cell, its lead's figures; `keep` of the rows. Where every row leads with
 * one metric, the metric is named once above the table and its column left out: the change has
 * the room to stay on few lines.
 */
function table(doc: Comparison, rows: readonly ScreenRow[], keep: number, ctx: RenderContext): string[] {
  const kept = rows.slice(0, keep)
  const leads = new Set(kept.map(r => r.metric))
  const [lead] = [...leads]
  const one = leads.size === 1 && lead !== null && lead !== undefined
  const lines = [
    ...(one ? [`Each row: ${code(lead, 80)}, the medians of base and head and the change.`, ''] : []),
    one ? '| cell | base | head | change (95% CI) | verdict |' : '| cell | metric | base | head | change (95% CI) | verdict |',
    one ? '| --- | ---: | ---: | ---: | --- |' : '| --- | --- | ---: | ---: | ---: | --- |',
    ...kept.map(r => {
      const c = cellAt(doc, r.cell)
      const m = figure(c, r.metric)
      // a cell without figures (a head that failed or timed out) says what happened in its change column
      const said = doc.screen.first.find(f => f.cell === r.cell)?.said
      // without a metric column, the change links to the metric's history graph
      const link = one && m !== undefined && ctx.pagesUrl ? graphLink(ctx.pagesUrl, c, m.metric) : null
      const figures =
        m === undefined
          ? ['-', '-', '-', said ? md(said, 200) : '-']
          : [metricName(c, m.metric, ctx), nobreak(value(m.medianBase, m.unit)), nobreak(value(m.medianHead, m.unit)), changeCell(m, link)]
      return `| ${[nameOf(c), ...(one ? figures.slice(1) : figures), md(r.label, 80)].join(' | ')} |`
    }),
  ]
  if (keep < rows.length) {
    const more = rows.length - keep
    lines.push('', `… ${more} more row${more === 1 ? '' : 's'}: the job summary and the artifact have them all.`)
  }
  return lines
}

/** A cell's every figure, its full id (base's too when it differs), its reason and note, folded. */
function fold(doc: Comparison, r: ScreenRow, ctx: RenderContext): string[] {
  const c = cellAt(doc, r.cell)
  const n = r.figures.length
  const lines = [
    `<details><summary>${nameOf(c)}: ${n === 0 ? 'no' : n} figure${n === 1 ? '' : 's'}, ` +
      `${c.rounds} round${c.rounds === 1 ? '' : 's'}, id and reason</summary>`,
    '',
    ids(c),
    '',
  ]
  if (n > 0) {
    lines.push('| metric | base | head | change (95% CI) | p | verdict |', '| --- | ---: | ---: | ---: | ---: | --- |')
    for (const f of r.figures) {
      const m = figure(c, f.metric)
      if (m !== undefined) {
        const medians = [nobreak(value(m.medianBase, m.unit)), nobreak(value(m.medianHead, m.unit))]
        lines.push(`| ${[metricName(c, m.metric, ctx), ...medians, changeCell(m), pValue(m.pValue), md(f.label, 80)].join(' | ')} |`)
      }
    }
    lines.push('')
  }
  if (c.reason) {
    lines.push(`Why: ${md(c.reason)}`, '')
  }
  if (c.note) {
    lines.push(`Counters: ${md(c.note)}`, '')
  }
  return [...lines, '</details>', '']
}

/** `policy-dd: <code>id</code> (base: <code>id</code>)`. */
function ids(c: Cell): string {
  let text = c.baseId !== null && c.baseId !== c.cellId ? `${code(c.cellId)} (base: ${code(c.baseId)})` : code(c.cellId)
  if (c.gateName !== null) {
    text = `${md(c.gateName, 80)}: ${text}`
  }
  return text
}

/** A median on one line (`2.00&nbsp;s`): its number and unit do not break apart; the other columns wrap. */
function nobreak(text: string): string {
  return text.replace(/ /g, '&nbsp;')
}

/**
 * The change in one short line, and under it (small) its interval and, for a guest pair, the
 * size alone it stands for: the change never wraps, its interval and range may.
 */
function changeCell(m: Figures, link: string | null = null): string {
  const lines = [link === null ? headChange(m) : `[${headChange(m)}](${link})`]
  if (ci(m) !== '-') {
    lines.push(`<sub>${ci(m)}</sub>`)
  }
  const alone = aloneText(m)
  if (alone) {
    lines.push(`<sub>${alone}</sub>`)
  }
  return lines.join('<br>')
}

/** The change a table's cell leads with: the pair's size alone where scaled, else as measured. */
function headChange(m: Figures): string {
  if (m.changePct === null) {
    return change(m)
  }
  if (m.measuredChangePct !== null && m.shrink !== null && m.shrink !== 1) {
    return `${signed(m.changePct)} alone`
  }
  return signed(m.changePct)
}

/** What a guest pair's change stands for: measured together (shared), or the sizes alone (crossed). */
function aloneText(m: Figures): string {
  if (m.changePct === null) {
    return ''
  }
  if (m.measuredChangePct !== null && m.shrink !== null && m.shrink !== 1) {
    return `${signed(m.measuredChangePct)} together`
  }
  if (m.aloneLowPct !== null && m.aloneHighPct !== null && Math.round(m.changePct * 10) !== 0) {
    return `alone ${signed(m.aloneLowPct)} … ${signed(m.aloneHighPct)}`
  }
  return ''
}

/** A metric's name in code, a link to its history graph with the pages' URL. */
function metricName(c: Cell, metric: string, ctx: RenderContext): string {
  const link = ctx.pagesUrl ? graphLink(ctx.pagesUrl, c, metric) : null
  return link === null ? code(metric, 80) : `[${code(metric, 80)}](${link})`
}

/** The fragments diskbench writes: an asv benchmark and its parameters, nothing else. */
const GRAPH = /^matrix\.[A-Za-z0-9]+\.track_[a-z0-9_]+\?p-[a-z_]+=%27[A-Za-z0-9._-]+%27(&p-[a-z_]+=%27[A-Za-z0-9._-]+%27)*$/

/** The URL of a cell's metric's graph, when the document names a graph of the form diskbench writes. */
function graphLink(pagesUrl: string, c: Cell, metric: string): string | null {
  const fragment = c.history.find(([name]) => name === metric)?.[1]
  if (fragment === undefined || !GRAPH.test(fragment)) {
    return null
  }
  const base = pagesUrl.endsWith('.html') ? pagesUrl : `${pagesUrl.replace(/\/+$/, '')}/`
  return `${base}#${fragment}`
}

/** Arguments a shell passes as they are and HTML shows as they are: the only ones the comment shows. */
const PLAIN_ARG = /^[A-Za-z0-9._/=%:,+^~-]+$/

/** `diskbench gate|compare ...` with plain arguments only: the commands the comment shows. */
function plainCommand(argv: readonly string[]): boolean {
  return argv[0] === 'diskbench' && ['gate', 'compare'].includes(argv[1] ?? '') && argv.every(a => PLAIN_ARG.test(a))
}

/** The command that reproduces the comparison, when every argument is plain. */
function reproduceLines(argv: readonly string[]): string[] {
  if (argv.length === 0) {
    return []
  }
  if (!plainCommand(argv)) {
    return ['The command that reproduces it has characters this comment does not show: see summary.md in the artifact.', '']
  }
  return ['Reproduce it locally:', '', `<pre><code>${argv.join(' ')}</code></pre>`, '']
}

/** What inconclusive means and what to do, from the figures diskbench computed (`summary.screen.inconclusive`). */
export function inconclusiveSentence(doc: Comparison): string {
  const entry = doc.screen.inconclusive
  let text = `Inconclusive means these rounds cannot yet tell a change of the minimum effect (${num(doc.settings.minEffect * 100)}%) from none`
  if (entry !== null && entry.couldSeePct !== null) {
    text += `; a regression of about ${entry.couldSeePct.toFixed(1)}% or more would have been caught 4 times in 5`
  }
  if (entry !== null && entry.rounds !== null && entry.slowest !== null && entry.slowestRounds !== null) {
    const cell = cellAt(doc, entry.slowest)
    const who = cell.gateName ?? cell.title ?? cell.cellId
    const how = entry.gate
      ? `e.g. the command below with ${code(`--max-rounds ${entry.rounds}`)} and the budget for them`
      : `record them (${code(`--repeat ${entry.rounds}`)}) and compare again`
    return `${text}. To decide, run more rounds: about ${entry.rounds} per side (${md(who, 200)}, has ${entry.slowestRounds}), ${how}.`
  }
  if (entry !== null && entry.cells.some(at => fewSamples(cellAt(doc, at)))) {
    const more = entry.gate ? 'run more rounds' : `record more samples (${code('--repeat')}) and compare again`
    return `${text}. To decide, ${more}: a metric without an interval has too few samples for one.`
  }
  return (
    `${text}. More rounds would not decide it (its change sits on the minimum effect): read it as a change about as ` +
    `large as the minimum effect, or set that metric's minimum with ${code('--rule')}.`
  )
}

function sideText(side: Comparison['base']): string {
  if (side.rev === null) {
    return code(side.label, 80)
  }
  const rev = /^[0-9a-f]{40,64}$/.test(side.rev) ? side.rev.slice(0, 12) : side.rev
  return `${code(side.label, 80)} (${code(rev, 80)})`
}

function measuredText(ctx: RenderContext): string {
  const sha = ctx.headSha && /^[0-9a-f]{7,64}$/.test(ctx.headSha) ? ctx.headSha.slice(0, 12) : undefined
  const run = ctx.runUrl && /^https:\/\/[A-Za-z0-9.-]+(:[0-9]+)?\/[A-Za-z0-9._/-]+$/.test(ctx.runUrl) ? ctx.runUrl : undefined
  if (run) {
    return ` — [run](${run})${sha ? ` on ${sha}` : ''}`
  }
  return sha ? ` — measured on ${sha}` : ''
}

/** Both are commit ids and neither is a prefix of the other: the file is about another commit. */
export function headMismatch(doc: Comparison, ctx: RenderContext): boolean {
  const rev = doc.head.rev?.toLowerCase() ?? ''
  const sha = ctx.headSha?.toLowerCase() ?? ''
  const hex = /^[0-9a-f]{7,64}$/
  return hex.test(rev) && hex.test(sha) && !rev.startsWith(sha) && !sha.startsWith(rev)
}

/** The host disk model the work dir was on (the machine's `host_disk`), or '' for the runner's own disk. */
function hostDisk(doc: Comparison): string {
  return doc.machine.find(([key]) => key === 'host_disk')?.[1] ?? ''
}

/** What the times are about, as diskbench's own summary says it (compare/text.py regime_words). */
function accelLine(accel: string, disk = ''): string {
  if (disk) {
    const on = `the work dir on host disk model ${md(disk, 120)}`
    if (accel === 'tcg') {
      return `**under TCG (emulation), ${on}: times are the guest's waits on that modelled disk and QEMU's emulation together, not a real disk's**`
    }
    if (accel === 'kvm') {
      return `**under KVM, ${on}: times are about that modelled disk, not the runner's**`
    }
    return `**accelerator ${md(accel, 40)}: unknown, ${on}: read the times with care**`
  }
  if (accel === 'kvm') {
    return 'under KVM'
  }
  if (accel === 'tcg') {
    return '**under TCG (emulation): times are about QEMU\'s emulation, not the disk**'
  }
  return `**accelerator ${md(accel, 40)}: unknown, read the times with care**`
}

/** A median in its unit, as diskbench's own summary writes it. */
export function value(v: number | null, unit: string): string {
  if (v === null) {
    return '-'
  }
  switch (unit) {
    case 's':
      return `${v.toFixed(2)} s`
    case 'MiB/s':
      return `${v.toFixed(1)} MiB/s`
    case 'ms':
      return `${Number(v.toPrecision(3))} ms`
    case 'ratio':
      return v.toFixed(3)
    case 'B':
      return Math.abs(v) >= 2 ** 20 ? `${(v / 2 ** 20).toFixed(1)} MiB` : `${v.toFixed(0)} B`
    default:
      return `${num(v)}${unit === 'count' || unit === '' ? '' : ` ${md(unit, 20)}`}`
  }
}

function change(m: Figures): string {
  if (m.changePct === null) {
    return m.medianBase === null || m.medianHead === null ? 'n/a' : '+inf%'
  }
  if (m.measuredChangePct !== null && m.shrink !== null && m.shrink !== 1) {
    // a guest pair's change taken together on one CPU, scaled to its size alone
    return `${signed(m.changePct)} alone (${signed(m.measuredChangePct)} together)`
  }
  if (m.aloneLowPct !== null && m.aloneHighPct !== null && Math.round(m.changePct * 10) !== 0) {
    // a crossed guest pair's change, and the sizes alone it stands for
    return `${signed(m.changePct)} (${signed(m.aloneLowPct)} … ${signed(m.aloneHighPct)} alone)`
  }
  return signed(m.changePct)
}

function ci(m: Figures): string {
  return m.ciLowPct === null || m.ciHighPct === null ? '-' : `${signed(m.ciLowPct)} … ${signed(m.ciHighPct)}`
}

function pValue(p: number | null): string {
  if (p === null) {
    return '-'
  }
  return p < 0.001 ? '&lt;0.001' : p.toFixed(3)
}

function pct(ratio: number): string {
  return signed((ratio - 1) * 100)
}

function signed(percent: number): string {
  const text = percent.toFixed(1)
  return `${percent >= 0 && !text.startsWith('-') ? '+' : ''}${text}%`
}

/** Up to six significant digits, no exponent for everyday sizes, no trailing zeros. */
function num(v: number): string {
  return String(Number(v.toPrecision(6)))
}

/** Beside the verdict in the first line: the counters that changed, and where. */
function headlineChanges(doc: Comparison): string {
  if (doc.changed.length === 0) {
    return ''
  }
  const parts = doc.changed.slice(0, 3).map(c => {
    // "host.flushes -100.0% (1901 → 0)" -> "host.flushes -100.0%"
    const counters = c.counters.map(x => x.split(' (')[0]).join(', ')
    return `${counters} in ${c.name}`
  })
  const more = doc.changed.length > 3 ? ` and ${doc.changed.length - 3} more cells` : ''
  const text = `${md(parts.join('; '), 400)}${more}`
  if (doc.verdict !== 'changed') {
    return ` (and changed: ${text})`
  }
  return doc.fails ? `: ${text}` : `: ${text} (does not fail: changed_fails = false)`
}

/** What differs between base and head, before any table. */
function subjectLines(doc: Comparison): string[] {
  const lines = ['### What differs between base and head', '']
  if (doc.subjectDiff.length === 0) {
    lines.push('- no difference of policy, guest recipe or QEMU (the change is elsewhere)')
  }
  lines.push(...doc.subjectDiff.map(d => `- ${md(d.what, 200)}: ${md(d.base, 200)} → ${md(d.head, 200)}`))
  lines.push(...doc.cellIdChanges.map(c => `- cell ${code(c.name)}: base ${code(c.baseId)} → head ${code(c.headId)}`))
  return [...lines, '']
}

