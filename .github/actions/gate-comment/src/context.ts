/**
 * What the runner tells this step about its run, read from the environment
 * when `run()` starts (not when the bundle loads): the event's name and
 * payload, the server and API URLs, and the repository.
 */
import * as fs from 'fs'
import type {Repo} from './comment'

export interface RunContext {
  readonly eventName: string
  readonly payload: Record<string, unknown>
  readonly serverUrl: string
  readonly apiUrl: string
  /** the repository of the run; throws when the runner did not say */
  repo(): Repo
}

export function runContext(env: NodeJS.ProcessEnv = process.env): RunContext {
  let payload: Record<string, unknown> = {}
  const eventPath = env.GITHUB_EVENT_PATH
  if (eventPath && fs.existsSync(eventPath)) {
    const parsed: unknown = JSON.parse(fs.readFileSync(eventPath, 'utf8'))
    if (typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)) {
      payload = parsed as Record<string, unknown>
    }
  }
  return {
    eventName: env.GITHUB_EVENT_NAME ?? '',
    payload,
    serverUrl: env.GITHUB_SERVER_URL || 'https://github.com',
    apiUrl: env.GITHUB_API_URL || 'https://api.github.com',
    repo(): Repo {
      const [owner, repo, ...rest] = (env.GITHUB_REPOSITORY ?? '').split('/')
      if (!owner || !repo || rest.length > 0) {
        throw new Error('GITHUB_REPOSITORY is not "owner/repo": run this action in a GitHub Actions job')
      }
      return {owner, repo}
    },
  }
}
