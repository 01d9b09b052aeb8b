/**
 * What the tests run the action against: the GitHub REST API answered by a
 * small HTTP server on 127.0.0.1 that records every request, and a runner's
 * files (`GITHUB_OUTPUT`, `GITHUB_STEP_SUMMARY`, the event) in a temp dir.
 */
import * as fs from 'fs'
import * as http from 'http'
import type {AddressInfo} from 'net'
import * as os from 'os'
import * as path from 'path'

export const FIXTURES = path.join(__dirname, 'fixtures')
export const OWNER = 'acme'
export const REPO = 'diskbench'
export const HEAD_SHA = '9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d'

export interface RecordedRequest {
  readonly method: string
  readonly url: string
  readonly authorization: string | undefined
  readonly body: unknown
}

export interface FakeComment {
  id: number
  issue: number
  body: string
  user: {login: string; type: 'Bot' | 'User'}
}

export interface FakePull {
  number: number
  state: 'open' | 'closed'
  head: {sha: string; ref: string; label: string}
}

/** The few REST endpoints the action calls, over an in-memory repository. */
export class FakeGitHub {
  readonly requests: RecordedRequest[] = []
  readonly comments: FakeComment[] = []
  readonly pulls: FakePull[] = []
  /** commits the "commits/{sha}/pulls" endpoint knows (a fork's commit may be unknown there) */
  readonly associated = new Set<string>()
  /** a status for the "commits/{sha}/pulls" endpoint to fail with (0: answer) */
  failCommitLookup = 0
  /** the labels of each issue or pull request, by number */
  readonly labels = new Map<number, string[]>()
  /** the names of a run's artifacts, by run id (none by default) */
  artifactsOf: (runId: string) => string[] = () => []
  /** called after every request is answered (a test's process may save the state there) */
  onChange: () => void = () => {}
  private nextId = 1000
  private server: http.Server | undefined
  url = ''

  async start(): Promise<string> {
    this.server = http.createServer((req, res) => this.handle(req, res))
    await new Promise<void>(resolve => this.server?.listen(0, '127.0.0.1', resolve))
    const {port} = this.server.address() as AddressInfo
    this.url = `http://127.0.0.1:${port}`
    return this.url
  }

  async stop(): Promise<void> {
    const server = this.server
    this.server = undefined
    if (server) {
      server.closeAllConnections?.()
      await new Promise<void>(resolve => server.close(() => resolve()))
    }
  }

  addComment(issue: number, body: string, type: 'Bot' | 'User' = 'User', login = 'someone'): FakeComment {
    const comment = {id: this.nextId++, issue, body, user: {login, type}}
    this.comments.push(comment)
    return comment
  }

  private commentJson(c: FakeComment): Record<string, unknown> {
    return {
      id: c.id,
      body: c.body,
      user: c.user,
      html_url: `https://github.test/${OWNER}/${REPO}/pull/${c.issue}#issuecomment-${c.id}`,
    }
  }

  private handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8')
      const body: unknown = text ? JSON.parse(text) : undefined
      this.requests.push({method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, body})
      const url = new URL(req.url ?? '/', this.url)
      const send = (status: number, data: unknown, headers: Record<string, string> = {}): void => {
        res.writeHead(status, {'content-type': 'application/json', ...headers})
        res.end(JSON.stringify(data))
      }
      const base = `/repos/${OWNER}/${REPO}`
      let m: RegExpMatchArray | null
      res.on('finish', () => this.onChange())
      if (req.method === 'GET' && (m = url.pathname.match(`^${base}/issues/(\\d+)/comments$`))) {
        const issue = Number(m[1])
        const all = this.comments.filter(c => c.issue === issue)
        const perPage = Number(url.searchParams.get('per_page') ?? 30)
        const page = Number(url.searchParams.get('page') ?? 1)
        const slice = all.slice((page - 1) * perPage, page * perPage)
        const headers: Record<string, string> = {}
        if (page * perPage < all.length) {
          const next = new URL(url)
          next.searchParams.set('page', String(page + 1))
          headers.link = `<${next.toString()}>; rel="next"`
        }
        return send(200, slice.map(c => this.commentJson(c)), headers)
      }
      if (req.method === 'POST' && (m = url.pathname.match(`^${base}/issues/(\\d+)/comments$`))) {
        const created = this.addComment(Number(m[1]), (body as {body: string}).body, 'Bot', 'github-actions[bot]')
        return send(201, this.commentJson(created))
      }
      if (req.method === 'PATCH' && (m = url.pathname.match(`^${base}/issues/comments/(\\d+)$`))) {
        const comment = this.comments.find(c => c.id === Number(m?.[1]))
        if (!comment) {
          return send(404, {message: 'Not Found'})
        }
        comment.body = (body as {body: string}).body
        return send(200, this.commentJson(comment))
      }
      if (req.method === 'GET' && (m = url.pathname.match(`^${base}/commits/([0-9a-f]+)/pulls$`))) {
        const sha = m[1] ?? ''
        if (this.failCommitLookup) {
          return send(this.failCommitLookup, {message: 'No commit found for SHA'})
        }
        return send(200, this.associated.has(sha) ? this.pulls.filter(p => p.head.sha === sha) : [])
      }
      if (req.method === 'GET' && (m = url.pathname.match(`^${base}/pulls/(\\d+)$`))) {
        const pull = this.pulls.find(p => p.number === Number(m?.[1]))
        return pull ? send(200, pull) : send(404, {message: 'Not Found'})
      }
      if (req.method === 'GET' && (m = url.pathname.match(`^${base}/actions/runs/(\\d+)/artifacts$`))) {
        const names = this.artifactsOf(m[1] ?? '')
        const artifacts = names.map((name, i) => ({id: i + 1, name, expired: false}))
        return send(200, {total_count: artifacts.length, artifacts})
      }
      if (req.method === 'GET' && (m = url.pathname.match(`^${base}/issues/(\\d+)/labels$`))) {
        return send(200, (this.labels.get(Number(m[1])) ?? []).map(name => ({name})))
      }
      if (req.method === 'DELETE' && (m = url.pathname.match(`^${base}/issues/(\\d+)/labels/([^/]+)$`))) {
        const issue = Number(m[1])
        const name = decodeURIComponent(m[2] ?? '')
        const labels = this.labels.get(issue) ?? []
        if (!labels.includes(name)) {
          return send(404, {message: 'Label does not exist'})
        }
        this.labels.set(issue, labels.filter(l => l !== name))
        return send(200, (this.labels.get(issue) ?? []).map(l => ({name: l})))
      }
      if (req.method === 'GET' && url.pathname === `${base}/pulls`) {
        const head = url.searchParams.get('head')
        const state = url.searchParams.get('state')
        return send(
          200,
          this.pulls.filter(p => (!head || p.head.label === head) && (!state || p.state === state)),
        )
      }
      return send(404, {message: 'Not Found'})
    })
  }
}

/** A runner's view of one step: its env and the files the toolkit writes. */
export interface StepFiles {
  readonly dir: string
  readonly output: string
  readonly summary: string
  readonly event: string
}

export function makeStepFiles(): StepFiles {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'gate-comment-'))
  const files = {
    dir,
    output: path.join(dir, 'github_output'),
    summary: path.join(dir, 'step_summary.md'),
    event: path.join(dir, 'event.json'),
  }
  fs.writeFileSync(files.output, '')
  fs.writeFileSync(files.summary, '')
  return files
}

/** A `workflow_run` event of the gate; a fork's run lists no pull requests. */
export function workflowRunEvent(opts: {prNumber?: number; headOwner?: string; headBranch?: string}): unknown {
  return {
    action: 'completed',
    workflow_run: {
      id: 4242,
      event: 'pull_request',
      conclusion: 'failure',
      head_sha: HEAD_SHA,
      head_branch: opts.headBranch ?? 'slow-writes',
      head_repository: {full_name: `${opts.headOwner ?? OWNER}/${REPO}`, owner: {login: opts.headOwner ?? OWNER}},
      html_url: `https://github.test/${OWNER}/${REPO}/actions/runs/4242`,
      pull_requests:
        opts.prNumber === undefined ? [] : [{number: opts.prNumber, head: {sha: HEAD_SHA, ref: 'slow-writes'}}],
    },
    repository: {full_name: `${OWNER}/${REPO}`, name: REPO, owner: {login: OWNER}},
  }
}

/** The env a runner gives the step: INPUT_* for `with:`, GITHUB_* for the context and the files. */
export function stepEnv(
  files: StepFiles,
  apiUrl: string,
  inputs: Record<string, string>,
  event: unknown,
  eventName = 'workflow_run',
): Record<string, string> {
  fs.writeFileSync(files.event, JSON.stringify(event))
  const env: Record<string, string> = {
    GITHUB_OUTPUT: files.output,
    GITHUB_STEP_SUMMARY: files.summary,
    GITHUB_EVENT_PATH: files.event,
    GITHUB_EVENT_NAME: eventName,
    GITHUB_REPOSITORY: `${OWNER}/${REPO}`,
    GITHUB_API_URL: apiUrl,
    GITHUB_SERVER_URL: 'https://github.test',
    GITHUB_RUN_ID: '4243',
  }
  for (const [name, value] of Object.entries(inputs)) {
    env[`INPUT_${name.toUpperCase()}`] = value
  }
  return env
}

/** The outputs a step wrote, parsed from the `name<<DELIMITER` blocks of GITHUB_OUTPUT. */
export function readOutputs(file: string): Record<string, string> {
  const out: Record<string, string> = {}
  const lines = fs.readFileSync(file, 'utf8').split(os.EOL)
  for (let i = 0; i < lines.length; i++) {
    const m = (lines[i] ?? '').match(/^([^<]+)<<(.+)$/)
    if (!m) {
      continue
    }
    const [, name, delimiter] = m
    const value: string[] = []
    for (i++; i < lines.length && lines[i] !== delimiter; i++) {
      value.push(lines[i] ?? '')
    }
    out[name ?? ''] = value.join(os.EOL)
  }
  return out
}

export function fixture(name: string): string {
  return path.join(FIXTURES, name)
}

/** A copy of a fixture document with `edit` applied, written to `dir`. */
export function editedFixture(dir: string, name: string, edit: (doc: any) => void): string {
  const doc = JSON.parse(fs.readFileSync(fixture(name), 'utf8'))
  edit(doc)
  const file = path.join(dir, `edited-${Math.random().toString(36).slice(2)}.json`)
  fs.writeFileSync(file, JSON.stringify(doc))
  return file
}

/** Strings a hostile pull request could put in its comparison.json. */
export const POISON = {
  mention: '@octocat please look',
  link: '[click me](http://evil.example/x)',
  image: '![x](http://evil.example/pixel.png)',
  html: '<img src=x onerror=alert(1)>',
  script: '<script>alert(1)</script>',
  bare: 'see https://evil.example/a and www.evil.example and mail me@evil.example',
  table: 'a | b\n## heading\n`code` *bold* _it_ #1',
}

/** Renames a metric of a document's cell everywhere the document names it (the cell and its screen). */
export function renameMetric(doc: any, cell: number, from: string, to: string): void {
  for (const m of [...doc.cells[cell].metrics, ...doc.cells[cell].counters]) {
    if (m.metric === from) {
      m.metric = to
    }
  }
  const screen = doc.summary.screen
  for (const entry of [...screen.first, ...screen.rows, ...screen.unchanged_rows]) {
    if (entry.cell === cell && entry.metric === from) {
      entry.metric = to
    }
  }
  for (const row of [...screen.rows, ...screen.unchanged_rows]) {
    for (const f of row.cell === cell ? row.figures : []) {
      if (f.metric === from) {
        f.metric = to
      }
    }
  }
}

/** A screen that lists `count` cells, each regressed on `metric`, in the document's order. */
export function regressedScreen(count: number, metric: string): Record<string, unknown> {
  const cells = Array.from({length: count}, (_v, i) => i)
  return {
    first: cells.map(cell => ({cell, metric, said: null})),
    unchanged: null,
    inconclusive: null,
    rows: cells.map(cell => ({cell, metric, label: 'regression', figures: [{metric, label: 'regression'}]})),
    unchanged_rows: [],
  }
}
