/**
 * The pull request the comparison belongs to, and its one gate comment.
 *
 * In a `workflow_run` workflow the pull request comes from the event; a fork's
 * pull request is not listed there, so it is found through the API by the head
 * commit the run measured (then by the fork's branch). The comment is found by
 * its hidden marker on the first line, and only among comments of a bot (the
 * token's own kind of author), so a person's comment that quotes the marker is
 * never overwritten.
 */
import type {getOctokit} from '@actions/github'
import type {CommentMode} from './config'
import type {Verdict} from './comparison'

export const MARKER = '<!-- diskbench-gate -->'

export type Octokit = ReturnType<typeof getOctokit>

export interface Repo {
  readonly owner: string
  readonly repo: string
}

/** What the triggering event says about the run and its pull request. */
export interface RunInfo {
  readonly prNumber: number | null
  readonly headSha: string | null
  readonly headOwner: string | null
  readonly headBranch: string | null
  readonly runUrl: string | null
}

/** Reads the event payload of a `workflow_run`, `pull_request` or `pull_request_target` event. */
export function runInfo(eventName: string, payload: Record<string, unknown>, serverUrl: string): RunInfo {
  const obj = (v: unknown): Record<string, unknown> =>
    typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : {}
  const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : null)
  const int = (v: unknown): number | null => (Number.isSafeInteger(v) && (v as number) > 0 ? (v as number) : null)
  if (eventName === 'workflow_run') {
    const run = obj(payload.workflow_run)
    const headSha = str(run.head_sha)
    const prs = Array.isArray(run.pull_requests) ? run.pull_requests.map(obj) : []
    // the event lists pull requests of this repository's branches only; take one whose head is the measured commit
    const pr = prs.find(p => str(obj(p.head).sha) === headSha) ?? (prs.length === 1 ? prs[0] : undefined)
    return {
      prNumber: pr ? int(pr.number) : null,
      headSha,
      headOwner: str(obj(obj(run.head_repository).owner).login),
      headBranch: str(run.head_branch),
      runUrl: str(run.html_url),
    }
  }
  const pr = obj(payload.pull_request)
  const repo = obj(payload.repository)
  const runId = process.env.GITHUB_RUN_ID
  return {
    prNumber: int(pr.number),
    headSha: str(obj(pr.head).sha),
    headOwner: str(obj(obj(obj(pr.head).repo).owner).login),
    headBranch: str(obj(pr.head).ref),
    runUrl: runId && str(repo.full_name) ? `${serverUrl}/${str(repo.full_name)}/actions/runs/${runId}` : null,
  }
}

/** The open pull request whose head is `info.headSha`, or null when there is none. */
export async function resolvePullRequest(octokit: Octokit, repo: Repo, info: RunInfo): Promise<number | null> {
  if (info.prNumber !== null) {
    return info.prNumber
  }
  if (info.headSha === null) {
    return null
  }
  const sha = info.headSha
  const byCommit = await octokit.rest.repos
    .listPullRequestsAssociatedWithCommit({...repo, commit_sha: sha})
    // a commit the base repository does not know (a fork's) may be a 404 or 422: ask by branch
    .catch((e: {status?: number}) => {
      if (e.status === 404 || e.status === 422) {
        return {data: []}
      }
      throw e
    })
  const open = byCommit.data.filter(p => p.state === 'open')
  const found = open.find(p => p.head.sha === sha) ?? open.find(p => p.head.ref === info.headBranch)
  if (found) {
    return found.number
  }
  if (info.headOwner === null || info.headBranch === null) {
    return null
  }
  // a fork's commit is not always associated with the base repository: ask by the fork's branch
  const byBranch = await octokit.rest.pulls.list({
    ...repo,
    state: 'open',
    head: `${info.headOwner}:${info.headBranch}`,
    per_page: 100,
  })
  const match = byBranch.data.find(p => p.head.sha === sha) ?? byBranch.data[0]
  return match ? match.number : null
}

export interface ExistingComment {
  readonly id: number
  readonly body: string
}

/** The gate's comment on the pull request: the oldest bot comment whose first line is the marker. */
export async function findComment(octokit: Octokit, repo: Repo, prNumber: number): Promise<ExistingComment | null> {
  const comments = await octokit.paginate(octokit.rest.issues.listComments, {
    ...repo,
    issue_number: prNumber,
    per_page: 100,
  })
  const ours = comments.find(c => c.user?.type === 'Bot' && (c.body ?? '').split('\n', 1)[0]?.trim() === MARKER)
  return ours ? {id: ours.id, body: ours.body ?? ''} : null
}

export type CommentAction = 'create' | 'update' | 'skip'

/**
 * What to do with the comment.
 *
 * - `always`: create it, or update the one there is;
 * - `on-change`: update the one there is (so a fixed regression shows as fixed);
 *   create one only when the verdict is not `unchanged`: a pull request that
 *   changes nothing gets the job summary and no comment;
 * - `never`: leave comments alone.
 */
export function decide(mode: CommentMode, verdict: Verdict, existing: ExistingComment | null): CommentAction {
  if (mode === 'never') {
    return 'skip'
  }
  if (existing !== null) {
    return 'update'
  }
  return mode === 'always' || verdict !== 'unchanged' ? 'create' : 'skip'
}

export interface PostedComment {
  readonly id: number
  readonly url: string
}

export async function postComment(
  octokit: Octokit,
  repo: Repo,
  prNumber: number,
  action: 'create' | 'update',
  existing: ExistingComment | null,
  body: string,
): Promise<PostedComment> {
  const text = `${MARKER}\n${body}`
  if (action === 'update' && existing !== null) {
    const res = await octokit.rest.issues.updateComment({...repo, comment_id: existing.id, body: text})
    return {id: res.data.id, url: res.data.html_url}
  }
  const res = await octokit.rest.issues.createComment({...repo, issue_number: prNumber, body: text})
  return {id: res.data.id, url: res.data.html_url}
}
