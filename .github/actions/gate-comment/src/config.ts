/**
 * The action's inputs, parsed once into a typed config. Every error names the
 * input it is about, so a wrong `with:` in a workflow says which line to fix.
 */

export const COMMENT_MODES = ['always', 'on-change', 'never'] as const
export type CommentMode = (typeof COMMENT_MODES)[number]

/** 64 MiB: far above any real comparison.json, low enough to refuse a bomb. */
export const MAX_BYTES_LIMIT = 64 * 1024 * 1024

export interface Config {
  /** where the gate's comparison.json lies (downloaded from its artifact) */
  readonly comparisonPath: string
  /** token for the comment; empty only when commentMode is "never" */
  readonly githubToken: string
  readonly commentMode: CommentMode
  readonly failOnRegression: boolean
  /** the pull request to comment on; null: resolve it from the event */
  readonly prNumber: number | null
  /** a comparison.json larger than this is refused unread */
  readonly maxBytes: number
  /** the published history pages: each cell's metrics link to their graphs there; null: no links */
  readonly pagesUrl: string | null
}

export class InputError extends Error {
  constructor(input: string, problem: string) {
    super(`input ${input}: ${problem}`)
    this.name = 'InputError'
  }
}

/** Reads one input by name, as `core.getInput` does (trimmed, "" when unset). */
export type GetInput = (name: string) => string

export function parseConfig(getInput: GetInput): Config {
  const comparisonPath = getInput('comparison-path')
  if (comparisonPath === '') {
    throw new InputError('comparison-path', 'required: the path of the gate\'s comparison.json')
  }
  const commentMode = parseCommentMode(getInput('comment-mode'))
  const githubToken = getInput('github-token')
  if (githubToken === '' && commentMode !== 'never') {
    throw new InputError('github-token', `required when comment-mode is ${commentMode}`)
  }
  return {
    comparisonPath,
    githubToken,
    commentMode,
    failOnRegression: parseBoolean('fail-on-regression', getInput('fail-on-regression'), false),
    prNumber: parsePrNumber(getInput('pr-number')),
    maxBytes: parseMaxBytes(getInput('max-bytes')),
    pagesUrl: parsePagesUrl(getInput('pages-url')),
  }
}

/** The same rule as diskbench's `--pages-url`: an http(s) address of plain characters. */
const PAGES_URL = /^https?:\/\/[A-Za-z0-9.-]+(:[0-9]{1,5})?(\/[A-Za-z0-9._~%/+-]*)?$/

function parsePagesUrl(raw: string): string | null {
  if (raw === '') {
    return null
  }
  if (!PAGES_URL.test(raw)) {
    throw new InputError('pages-url', `${JSON.stringify(raw)} is not the http(s) URL of the published history pages`)
  }
  return raw
}

function parseCommentMode(raw: string): CommentMode {
  const value = raw === '' ? 'on-change' : raw
  const mode = COMMENT_MODES.find(m => m === value)
  if (mode === undefined) {
    throw new InputError('comment-mode', `${JSON.stringify(raw)} is not one of ${COMMENT_MODES.join(', ')}`)
  }
  return mode
}

function parseBoolean(input: string, raw: string, fallback: boolean): boolean {
  if (raw === '') {
    return fallback
  }
  // the YAML 1.2 core schema's spellings, as core.getBooleanInput accepts them
  if (['true', 'True', 'TRUE'].includes(raw)) {
    return true
  }
  if (['false', 'False', 'FALSE'].includes(raw)) {
    return false
  }
  throw new InputError(input, `${JSON.stringify(raw)} is not true or false`)
}

function parsePrNumber(raw: string): number | null {
  if (raw === '') {
    return null
  }
  if (!/^[1-9][0-9]{0,9}$/.test(raw)) {
    throw new InputError('pr-number', `${JSON.stringify(raw)} is not a pull request number`)
  }
  return Number(raw)
}

function parseMaxBytes(raw: string): number {
  const fallback = 2 * 1024 * 1024
  if (raw === '') {
    return fallback
  }
  const value = /^[0-9]{1,9}$/.test(raw) ? Number(raw) : NaN
  if (!(value >= 1 && value <= MAX_BYTES_LIMIT)) {
    throw new InputError('max-bytes', `${JSON.stringify(raw)} is not a number of bytes from 1 to ${MAX_BYTES_LIMIT}`)
  }
  return value
}
