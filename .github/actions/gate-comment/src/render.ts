/**
 * The markdown of a comparison: what the gate decided, cell by cell.
 *
 * It decides nothing: verdicts, reasons and figures are the document's, as
 * diskbench's Python computed them. Numbers are formatted here from checked
 * finite numbers; every string of the document goes through `md`/`code`.
 */
import type {Cell, Comparison, MetricResult, Sensitivity, Verdict} from './comparison'
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

/** The comparison as markdown, at most `ctx.maxChars` long (rows of the table are left out to fit). */
export function renderMarkdown(doc: Comparison, ctx: RenderContext): string {
  const rows = tableRows(doc, ctx)
  const unchanged = unchangedRows(doc, ctx)
  let keep = Math.max(rows.length, unchanged.length)
  for (;;) {
    const text = compose(doc, ctx, rows, unchanged, keep)
    if (text.length <= ctx.maxChars || keep === 0) {
      return text.length <= ctx.maxChars ? text : `${text.slice(0, Math.max(0, ctx.maxChars - 2))}…\n`
    }
    keep = Math.floor(keep / 2)
  }
}

function compose(
  doc: Comparison,
  ctx: RenderContext,
  rows: readonly string[],
  unchanged: readonly string[],
  keep: number,
): string {
  const lines: string[] = []
  lines.push(`## diskbench gate: ${HEADLINE[doc.verdict]}${headlineChanges(doc)}`, '')
  const tally = ORDER.filter(v => doc.counts[v] > 0)
    .map(v => (v === 'regression' || v === 'changed' ? `**${doc.counts[v]} ${v}**` : `${doc.counts[v]} ${v}`))
    .join(', ')
  lines.push(`${doc.cellCount} cell${doc.cellCount === 1 ? '' : 's'}${tally ? ` (${tally})` : ''}, ${accelLine(doc.accel)}.`, '')
  lines.push(`base ${sideText(doc.base)} vs head ${sideText(doc.head)}${measuredText(ctx)}`, '')
  if (doc.counts.inconclusive > 0) {
    lines.push(inconclusiveSentence(doc), '')
  }
  if (headMismatch(doc, ctx)) {
    lines.push(`> **Warning:** this comparison's head is not the commit the run was for (${ctx.headSha?.slice(0, 12)}).`, '')
  }
  for (const warning of doc.warnings) {
    lines.push(`> **Warning:** ${md(warning, 1000)}`, '')
  }
  lines.push(...subjectLines(doc))
  if (rows.length > 0) {
    lines.push(...table(rows, keep, ctx), '')
  }
  const count = `${doc.counts.unchanged} cell${doc.counts.unchanged === 1 ? '' : 's'} unchanged`
  if (unchanged.length > 0) {
    lines.push(`<details><summary>${count} (their figures)</summary>`, '', ...table(unchanged, keep, ctx), '', '</details>', '')
  } else {
    lines.push(`${count}.`, '')
  }
  if (doc.axisSentence) {
    lines.push(md(doc.axisSentence, 1000), '')
  }
  const changed = doc.cells.filter(c => c.verdict !== 'unchanged' && c.verdict !== 'error' && c.reason)
  if (changed.length > 0) {
    lines.push('<details><summary>Why</summary>', '')
    lines.push(...changed.slice(0, keep).map(c => `- ${titleAndId(c)}: ${md(c.reason)}`))
    lines.push('', '</details>', '')
  }
  const errors = doc.cells.filter(c => c.verdict === 'error')
  if (errors.length > 0) {
    lines.push('### Errors', '')
    lines.push(...errors.slice(0, keep).map(c => `- ${titleAndId(c)} (${md(c.kind)}): ${md(c.reason)}`))
    lines.push('')
  }
  const notes = doc.cells.filter(c => c.note)
  if (notes.length > 0) {
    lines.push('### Counters', '')
    lines.push(...notes.slice(0, keep).map(c => `- ${titleAndId(c)}: ${md(c.note)}`))
    lines.push('')
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

/** The table's header and `keep` of its rows; a history column with the pages' URL. */
function table(rows: readonly string[], keep: number, ctx: RenderContext): string[] {
  const lines = [
    `| cell | metric | base | head | change | CI | p | rounds | verdict |${ctx.pagesUrl ? ' history |' : ''}`,
    `| --- | --- | ---: | ---: | ---: | --- | ---: | ---: | --- |${ctx.pagesUrl ? ' --- |' : ''}`,
    ...rows.slice(0, keep),
  ]
  if (keep < rows.length) {
    lines.push('', `… ${rows.length - keep} more row${rows.length - keep === 1 ? '' : 's'}: the job summary and the artifact have them all.`)
  }
  return lines
}

/** One row per gated metric of every unchanged cell: their figures, collapsed. */
function unchangedRows(doc: Comparison, ctx: RenderContext): string[] {
  return doc.cells.filter(c => c.verdict === 'unchanged').flatMap(c => c.metrics.map(m => metricRow(c, m, 'unchanged', ctx)))
}

/** One row per metric worth showing of every cell that is not unchanged. */
function tableRows(doc: Comparison, ctx: RenderContext): string[] {
  return doc.cells
    .filter(c => c.verdict !== 'unchanged')
    .flatMap(c => {
      const label = c.kind === 'metric' ? md(c.verdict) : `${md(c.verdict)} (${md(c.kind)})`
      const shown = c.metrics.filter(m => m.verdict !== 'unchanged')
      // the structural counters that moved: the figures behind "changed"
      const moved = c.counters.filter(m => m.verdict === 'regression' || m.verdict === 'improvement')
      const metrics = [...(shown.length > 0 ? shown : c.metrics), ...moved]
      if (metrics.length === 0) {
        return [`| ${cellName(c)} | - | - | - | - | - | - | ${c.rounds} | ${label} |${ctx.pagesUrl ? ' - |' : ''}`]
      }
      return metrics.map(m => metricRow(c, m, rowLabel(c, m, label), ctx))
    })
}

function metricRow(c: Cell, m: MetricResult, label: string, ctx: RenderContext): string {
  const cells = [
    '',
    cellName(c),
    code(m.metric, 80),
    value(m.medianBase, m.unit),
    value(m.medianHead, m.unit),
    change(m),
    ci(m),
    pValue(m.pValue),
    String(c.rounds),
    label,
  ]
  if (ctx.pagesUrl) {
    cells.push(graphLink(ctx.pagesUrl, c, m.metric))
  }
  return [...cells, ''].join(' | ').trim()
}

/** The fragments diskbench writes: an asv benchmark and its parameters, nothing else. */
const GRAPH = /^matrix\.[A-Za-z0-9]+\.track_[a-z0-9_]+\?p-[a-z_]+=%27[A-Za-z0-9._-]+%27(&p-[a-z_]+=%27[A-Za-z0-9._-]+%27)*$/

/** `[graph](URL)` of a cell's metric, when the document names a graph of the form diskbench writes. */
function graphLink(pagesUrl: string, c: Cell, metric: string): string {
  const fragment = c.history.find(([name]) => name === metric)?.[1]
  if (fragment === undefined || !GRAPH.test(fragment)) {
    return '-'
  }
  const base = pagesUrl.endsWith('.html') ? pagesUrl : `${pagesUrl.replace(/\/+$/, '')}/`
  return `[graph](${base}#${fragment})`
}

/** Arguments a shell passes as they are and HTML shows as they are: the only ones the comment shows. */
const PLAIN_ARG = /^[A-Za-z0-9._/=%:,+^~-]+$/

/** The command that reproduces the comparison, when every argument is plain. */
function reproduceLines(argv: readonly string[]): string[] {
  if (argv.length === 0) {
    return []
  }
  if (argv[0] !== 'diskbench' || !['gate', 'compare'].includes(argv[1] ?? '') || !argv.every(a => PLAIN_ARG.test(a))) {
    return ['The command that reproduces it has characters this comment does not show: see summary.md in the artifact.', '']
  }
  return ['Reproduce it locally:', '', `<pre><code>${argv.join(' ')}</code></pre>`, '']
}

/** What inconclusive means and what to do, from the figures diskbench computed. */
export function inconclusiveSentence(doc: Comparison): string {
  const open: Sensitivity[] = doc.sensitivity.filter(r => r.verdict === 'inconclusive')
  const seen = open.flatMap(r => (r.couldSeePct === null ? [] : [r.couldSeePct]))
  const need = open.filter(r => r.roundsToDecide !== null)
  let text = `Inconclusive means these rounds cannot yet tell a change of the minimum effect (${num(doc.settings.minEffect * 100)}%) from none`
  if (seen.length > 0) {
    text += `; a regression of about ${Math.max(...seen).toFixed(1)}% or more would have been caught 4 times in 5`
  }
  if (need.length > 0) {
    const most = need.reduce((a, b) => ((b.roundsToDecide ?? 0) > (a.roundsToDecide ?? 0) ? b : a))
    const cell = doc.cells.find(c => c.cellId === most.cellId)
    const who = cell ? (cell.gateName ?? cell.title ?? cell.cellId) : most.name
    // a gate adds rounds itself (--max-rounds); records compared by hand need more samples
    const gate = doc.reproduce.length > 0 ? doc.reproduce[1] === 'gate' : doc.budget.length > 0
    const how = gate
      ? `e.g. the command below with ${code(`--max-rounds ${most.roundsToDecide}`)} and the budget for them`
      : `record them (${code(`--repeat ${most.roundsToDecide}`)}) and compare again`
    return `${text}. To decide, run more rounds: about ${most.roundsToDecide} per side (${md(who, 200)}, has ${most.rounds}), ${how}.`
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

function accelLine(accel: string): string {
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

function change(m: MetricResult): string {
  if (m.changePct === null) {
    return m.medianBase === null || m.medianHead === null ? 'n/a' : '+inf%'
  }
  return signed(m.changePct)
}

function ci(m: MetricResult): string {
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

/** The cell's short name, and under it its id (base's too when the sides' ids differ). */
function cellName(c: Cell): string {
  let ids = c.baseId !== null && c.baseId !== c.cellId ? `${code(c.cellId)} (base: ${code(c.baseId)})` : code(c.cellId)
  if (c.gateName !== null) {
    ids = `${md(c.gateName, 80)}: ${ids}`
  }
  return c.title === null ? ids : `${md(c.title, 200)}<br><sub>${ids}</sub>`
}

/** `qcow2 writeback ide · dd 64M (<code>id</code>)` for a line of a list. */
function titleAndId(c: Cell): string {
  return c.title === null ? code(c.cellId) : `${md(c.title, 200)} (${code(c.cellId)})`
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

/** A row's verdict: the cell's label where the metric gave it, else the metric's own. */
function rowLabel(c: Cell, m: MetricResult, label: string): string {
  const moved = m.verdict === 'regression' || m.verdict === 'improvement'
  if (moved && c.counters.some(x => x.metric === m.metric)) {
    return 'changed'
  }
  if (m.verdict === c.verdict || (c.kind !== 'metric' && c.kind !== 'counter')) {
    return label
  }
  return md(m.verdict)
}
