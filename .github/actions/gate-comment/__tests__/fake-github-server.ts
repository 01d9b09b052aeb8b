/**
 * FakeGitHub as a process of its own, for the workflow tests (tests/workflows): they run the
 * workflows with act, and the action and `gh` in those workflows call this server.
 *
 *   node fake-github-server.cjs SEED.json
 *
 * SEED.json: {"pulls": [FakePull...], "labels": {"7": ["safe-to-bench"]}, "artifacts": DIR,
 * "state": FILE}. A run's artifacts are the directories of DIR/RUN_ID (the workflow tests'
 * artifact store). After every request the server writes {requests, comments, labels} to FILE.
 * It prints its URL as its first line, listens on 127.0.0.1 only, and stops on SIGTERM.
 */
import * as fs from 'fs'
import * as path from 'path'
import {FakeGitHub, type FakePull} from './helpers'

interface Seed {
  pulls?: FakePull[]
  labels?: Record<string, string[]>
  artifacts?: string
  state: string
}

async function main(): Promise<void> {
  const seed = JSON.parse(fs.readFileSync(process.argv[2] ?? '', 'utf8')) as Seed
  const github = new FakeGitHub()
  github.pulls.push(...(seed.pulls ?? []))
  for (const [issue, names] of Object.entries(seed.labels ?? {})) {
    github.labels.set(Number(issue), [...names])
  }
  const store = seed.artifacts
  if (store) {
    github.artifactsOf = runId => {
      const dir = path.join(store, runId)
      if (!/^\d+$/.test(runId) || !fs.existsSync(dir)) return []
      return fs
        .readdirSync(dir, {withFileTypes: true})
        .filter(e => e.isDirectory())
        .map(e => e.name)
        .sort()
    }
  }
  const save = (): void => {
    const state = {requests: github.requests, comments: github.comments, labels: Object.fromEntries(github.labels)}
    fs.writeFileSync(`${seed.state}.tmp`, JSON.stringify(state, null, 1))
    fs.renameSync(`${seed.state}.tmp`, seed.state)
  }
  github.onChange = save
  save()
  const url = await github.start()
  process.stdout.write(`${url}\n`)
  process.on('SIGTERM', () => {
    void github.stop().then(() => process.exit(0))
  })
}

main().catch((e: unknown) => {
  process.stderr.write(`fake-github-server: ${String(e)}\n`)
  process.exit(3)
})
