/**
 * run() in this process, with the toolkit's real conventions: INPUT_* variables,
 * GITHUB_OUTPUT and GITHUB_STEP_SUMMARY files, GITHUB_EVENT_PATH, and Octokit
 * talking to a recording API server on 127.0.0.1.
 */
import * as fs from 'fs'
import {afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi} from 'vitest'
import {MARKER} from '../src/comment'
import {run} from '../src/main'
import {
  FakeGitHub,
  HEAD_SHA,
  OWNER,
  POISON,
  REPO,
  type StepFiles,
  editedFixture,
  fixture,
  makeStepFiles,
  readOutputs,
  stepEnv,
  workflowRunEvent,
} from './helpers'

const api = new FakeGitHub()
// core.summary keeps the first GITHUB_STEP_SUMMARY path it sees: one set of files for this file
let files: StepFiles
const savedEnv = {...process.env}
let stdout: string[] = []

beforeAll(async () => {
  await api.start()
  files = makeStepFiles()
})

afterAll(async () => {
  await api.stop()
  fs.rmSync(files.dir, {recursive: true, force: true})
})

beforeEach(() => {
  fs.writeFileSync(files.output, '')
  fs.writeFileSync(files.summary, '')
  api.requests.length = 0
  api.comments.length = 0
  api.pulls.length = 0
  api.associated.clear()
  api.failCommitLookup = 0
  process.exitCode = 0
  stdout = []
  vi.spyOn(process.stdout, 'write').mockImplementation((chunk: string | Uint8Array) => {
    stdout.push(String(chunk))
    return true
  })
})

afterEach(() => {
  vi.restoreAllMocks()
  process.env = {...savedEnv}
  process.exitCode = 0
})

function given(inputs: Record<string, string>, event: unknown = workflowRunEvent({prNumber: 7})): void {
  const all = {'github-token': 'test-token', 'comment-mode': 'always', 'fail-on-regression': 'false', ...inputs}
  process.env = {...savedEnv, ...stepEnv(files, api.url, all, event)}
}

const posts = (): number => api.requests.filter(r => r.method === 'POST').length
const patches = (): string[] => api.requests.filter(r => r.method === 'PATCH').map(r => r.url)

describe('run', () => {
  it('creates the comment on the first run, then updates the same one', async () => {
    given({'comparison-path': fixture('regression.json')})
    await run()
    expect(posts()).toBe(1)
    expect(api.requests[0]?.authorization).toBe('token test-token')
    expect(api.comments).toHaveLength(1)
    const comment = api.comments[0]
    expect(comment?.issue).toBe(7)
    expect(comment?.body.split('\n')[0]).toBe(MARKER)
    expect(comment?.body).toContain(':red_circle: REGRESSION')
    expect(readOutputs(files.output)).toEqual({
      verdict: 'regression',
      regressions: '3',
      'pr-number': '7',
      'comment-id': String(comment?.id),
    })
    expect(fs.readFileSync(files.summary, 'utf8')).toContain('## diskbench gate: :red_circle: REGRESSION')

    api.requests.length = 0
    fs.writeFileSync(files.output, '')
    given({'comparison-path': fixture('unchanged.json')})
    await run()
    expect(posts()).toBe(0)
    expect(patches()).toEqual([`/repos/${OWNER}/${REPO}/issues/comments/${comment?.id}`])
    expect(api.comments).toHaveLength(1)
    expect(api.comments[0]?.body).toContain(':white_circle: UNCHANGED')
    expect(readOutputs(files.output)).toMatchObject({verdict: 'unchanged', regressions: '0', 'comment-id': String(comment?.id)})
    expect(process.exitCode).toBe(0)
  })

  it('finds its comment past the first page of comments', async () => {
    for (let i = 0; i < 130; i++) {
      api.addComment(7, `comment ${i}`)
    }
    const ours = api.addComment(7, `${MARKER}\nold`, 'Bot', 'github-actions[bot]')
    given({'comparison-path': fixture('regression.json')})
    await run()
    expect(patches()).toEqual([`/repos/${OWNER}/${REPO}/issues/comments/${ours.id}`])
    expect(api.requests.filter(r => r.url.includes('page=2'))).toHaveLength(1)
  })

  it("never overwrites a person's comment that quotes the marker", async () => {
    const quoted = api.addComment(7, `${MARKER}\nI wrote this`, 'User', 'mallory')
    given({'comparison-path': fixture('regression.json')})
    await run()
    expect(posts()).toBe(1)
    expect(patches()).toEqual([])
    expect(quoted.body).toBe(`${MARKER}\nI wrote this`)
  })

  it("resolves a fork's pull request from the head commit", async () => {
    api.pulls.push({number: 31, state: 'open', head: {sha: HEAD_SHA, ref: 'slow-writes', label: 'fork:slow-writes'}})
    api.associated.add(HEAD_SHA)
    given({'comparison-path': fixture('regression.json')}, workflowRunEvent({headOwner: 'fork'}))
    await run()
    expect(api.requests[0]?.url).toBe(`/repos/${OWNER}/${REPO}/commits/${HEAD_SHA}/pulls`)
    expect(api.comments[0]?.issue).toBe(31)
  })

  it("falls back to the fork's branch when the commit lookup answers 422", async () => {
    api.pulls.push({number: 33, state: 'open', head: {sha: HEAD_SHA, ref: 'slow-writes', label: 'fork:slow-writes'}})
    api.failCommitLookup = 422
    given({'comparison-path': fixture('regression.json')}, workflowRunEvent({headOwner: 'fork'}))
    await run()
    expect(api.comments[0]?.issue).toBe(33)
  })

  it("falls back to the fork's branch when the commit is not associated with a pull request", async () => {
    api.pulls.push({number: 32, state: 'open', head: {sha: HEAD_SHA, ref: 'slow-writes', label: 'fork:slow-writes'}})
    given({'comparison-path': fixture('regression.json')}, workflowRunEvent({headOwner: 'fork'}))
    await run()
    expect(api.requests.map(r => r.method + ' ' + r.url.split('?')[0])).toContain(`GET /repos/${OWNER}/${REPO}/pulls`)
    expect(api.requests.find(r => r.url.startsWith(`/repos/${OWNER}/${REPO}/pulls?`))?.url).toContain('head=fork%3Aslow-writes')
    expect(api.comments[0]?.issue).toBe(32)
  })

  it('warns and posts nothing when no open pull request has the head commit', async () => {
    given({'comparison-path': fixture('regression.json')}, workflowRunEvent({headOwner: 'fork'}))
    await run()
    expect(posts()).toBe(0)
    expect(stdout.join('')).toContain(`::warning::no open pull request has head ${HEAD_SHA}`)
  })

  it('uses pr-number when given', async () => {
    given({'comparison-path': fixture('regression.json'), 'pr-number': '99'}, workflowRunEvent({headOwner: 'fork'}))
    await run()
    expect(api.comments[0]?.issue).toBe(99)
  })

  it('on-change: posts nothing for an unchanged pull request without a comment', async () => {
    given({'comparison-path': fixture('unchanged.json'), 'comment-mode': 'on-change'})
    await run()
    expect(api.requests.map(r => r.method)).toEqual(['GET'])
    expect(readOutputs(files.output)).toEqual({verdict: 'unchanged', regressions: '0', 'pr-number': '7'})
    expect(fs.readFileSync(files.summary, 'utf8')).toContain('UNCHANGED')
  })

  it('on-change: creates the comment for a regression, and keeps it current once there', async () => {
    given({'comparison-path': fixture('regression.json'), 'comment-mode': 'on-change'})
    await run()
    expect(posts()).toBe(1)
    given({'comparison-path': fixture('unchanged.json'), 'comment-mode': 'on-change'})
    await run()
    expect(patches()).toHaveLength(1)
    expect(api.comments[0]?.body).toContain('UNCHANGED')
  })

  it('never: makes no request and needs no token', async () => {
    given({'comparison-path': fixture('regression.json'), 'comment-mode': 'never', 'github-token': ''})
    await run()
    expect(api.requests).toEqual([])
    expect(readOutputs(files.output)).toEqual({verdict: 'regression', regressions: '3'})
  })

  it('fails the step on regression when fail-on-regression is true, after commenting', async () => {
    given({'comparison-path': fixture('regression.json'), 'fail-on-regression': 'true'})
    await run()
    expect(posts()).toBe(1)
    expect(process.exitCode).toBe(1)
    expect(stdout.join('')).toContain('::error::diskbench: 3 of 6 cells regressed (fail-on-regression is true)')
  })

  it('does not fail an unchanged comparison when fail-on-regression is true', async () => {
    given({'comparison-path': fixture('unchanged.json'), 'fail-on-regression': 'true'})
    await run()
    expect(process.exitCode).toBe(0)
  })

  it.each([
    ['an unknown version', (d: any) => (d.version = 1), /version 1: this action reads version 2 only/],
    ['another schema', (d: any) => (d.schema = 'evil'), /schema is "evil"/],
    ['a wrong type', (d: any) => (d.summary.counts.error = 'many'), /\$\.summary\.counts\.error: expected an integer >= 0/],
  ])('refuses %s before any request, output or summary', async (_what, edit, message) => {
    given({'comparison-path': editedFixture(files.dir, 'regression.json', edit)})
    await expect(run()).rejects.toThrow(message)
    expect(api.requests).toEqual([])
    expect(fs.readFileSync(files.output, 'utf8')).toBe('')
    expect(fs.readFileSync(files.summary, 'utf8')).toBe('')
  })

  it('refuses a file over max-bytes before any request', async () => {
    given({'comparison-path': fixture('regression.json'), 'max-bytes': '1000'})
    await expect(run()).rejects.toThrow(/over max-bytes 1000: refused unread/)
    expect(api.requests).toEqual([])
  })

  it('posts a poisoned comparison inert', async () => {
    const file = editedFixture(files.dir, 'regression.json', d => {
      d.warnings = Object.values(POISON)
      d.cells[0].cell_id = POISON.html
      d.cells[0].reason = `${POISON.mention} ${POISON.link} ${POISON.image}`
      d.head.label = POISON.script
    })
    given({'comparison-path': file})
    await run()
    // the one link is the run's, from the event
    const runLink = `[run](https://github.test/${OWNER}/${REPO}/actions/runs/4242)`
    expect(api.comments[0]?.body).toContain(runLink)
    const body = (api.comments[0]?.body ?? '').replace(runLink, '')
    for (const active of ['@octocat', '<img', '<script', '](http', '![', 'http://', 'https://']) {
      expect(body).not.toContain(active)
    }
    expect(body).toContain('&#64;&#8203;octocat')
  })
})
