/**
 * The committed bundle, run as the runner runs it: `node dist/index.js` with
 * the step's env, its outputs and summary read back from their files.
 */
import {spawn} from 'child_process'
import * as fs from 'fs'
import * as path from 'path'
import {afterAll, afterEach, beforeAll, describe, expect, it} from 'vitest'
import {MARKER} from '../src/comment'
import {
  FakeGitHub,
  HEAD_SHA,
  OWNER,
  REPO,
  type StepFiles,
  editedFixture,
  fixture,
  makeStepFiles,
  readOutputs,
  stepEnv,
  workflowRunEvent,
} from './helpers'

const DIST = path.join(__dirname, '..', 'dist', 'index.js')
const api = new FakeGitHub()
const made: StepFiles[] = []

beforeAll(async () => {
  await api.start()
})
afterAll(async () => {
  await api.stop()
})
afterEach(() => {
  for (const f of made.splice(0)) {
    fs.rmSync(f.dir, {recursive: true, force: true})
  }
})

interface StepResult {
  readonly code: number | null
  readonly stdout: string
  readonly outputs: Record<string, string>
  readonly summary: string
}

/** One step of a job: a fresh GITHUB_OUTPUT and summary, the action's process, its exit code. */
async function step(inputs: Record<string, string>, event: unknown): Promise<StepResult> {
  const files = makeStepFiles()
  made.push(files)
  const env = {PATH: process.env.PATH ?? '', ...stepEnv(files, api.url, inputs, event)}
  const child = spawn(process.execPath, [DIST], {env, stdio: ['ignore', 'pipe', 'pipe']})
  let stdout = ''
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()))
  child.stderr.on('data', (c: Buffer) => (stdout += c.toString()))
  const code = await new Promise<number | null>(resolve => child.on('close', resolve))
  return {code, stdout, outputs: readOutputs(files.output), summary: fs.readFileSync(files.summary, 'utf8')}
}

describe('dist/index.js', () => {
  it("comments on a fork's pull request once, then updates that comment", async () => {
    api.pulls.push({number: 12, state: 'open', head: {sha: HEAD_SHA, ref: 'slow-writes', label: 'fork:slow-writes'}})
    api.associated.add(HEAD_SHA)
    const event = workflowRunEvent({headOwner: 'fork'})
    const inputs = {'comparison-path': fixture('regression.json'), 'github-token': 'tok', 'comment-mode': 'on-change'}

    const first = await step(inputs, event)
    expect(first.stdout).not.toContain('::error::')
    expect(first.code).toBe(0)
    expect(api.comments).toHaveLength(1)
    const id = api.comments[0]?.id
    expect(first.outputs).toEqual({verdict: 'regression', regressions: '3', 'pr-number': '12', 'comment-id': String(id)})
    expect(first.summary).toContain(':red_circle: REGRESSION')

    const second = await step({...inputs, 'comparison-path': fixture('unchanged.json')}, event)
    expect(second.code).toBe(0)
    expect(api.comments).toHaveLength(1)
    expect(api.requests.filter(r => r.method === 'PATCH').map(r => r.url)).toEqual([
      `/repos/${OWNER}/${REPO}/issues/comments/${id}`,
    ])
    expect(api.comments[0]?.body.startsWith(`${MARKER}\n## diskbench gate: :white_circle: UNCHANGED`)).toBe(true)
    expect(second.outputs).toMatchObject({verdict: 'unchanged', regressions: '0', 'comment-id': String(id)})
  })

  it('exits 1 with an ::error:: line on regression when fail-on-regression is true', async () => {
    const result = await step(
      {'comparison-path': fixture('regression.json'), 'comment-mode': 'never', 'fail-on-regression': 'true'},
      workflowRunEvent({prNumber: 3}),
    )
    expect(result.code).toBe(1)
    expect(result.stdout).toContain('::error::diskbench: 3 of 6 cells regressed')
    expect(result.outputs.verdict).toBe('regression')
  })

  it('exits 1 naming the problem for a file of another version, and asks nothing of the API', async () => {
    const before = api.requests.length
    const dir = makeStepFiles()
    made.push(dir)
    const file = editedFixture(dir.dir, 'regression.json', d => (d.version = 99))
    const result = await step({'comparison-path': file, 'github-token': 'tok'}, workflowRunEvent({prNumber: 3}))
    expect(result.code).toBe(1)
    expect(result.stdout).toMatch(/::error::.*version 99: this action reads version 2 only/)
    expect(api.requests.length).toBe(before)
    expect(result.outputs).toEqual({})
  })

  it('exits 1 naming the input for a bad input', async () => {
    const result = await step(
      {'comparison-path': fixture('regression.json'), 'comment-mode': 'loud', 'github-token': 'tok'},
      workflowRunEvent({prNumber: 3}),
    )
    expect(result.code).toBe(1)
    expect(result.stdout).toContain('::error::input comment-mode: "loud" is not one of always, on-change, never')
  })
})
