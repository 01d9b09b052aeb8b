/**
 * comparison.json -> job summary, one pull request comment, outputs, and a
 * failed step on regression when asked.
 *
 * Order matters: the document is read and checked before any request is made,
 * so a refused file posts nothing; the summary is written before the comment,
 * so a failing API call still leaves the result on the run's page.
 */
import * as core from '@actions/core'
import {getOctokit} from '@actions/github'
import {decide, findComment, postComment, resolvePullRequest, runInfo} from './comment'
import {loadComparison} from './comparison'
import {runContext} from './context'
import {parseConfig} from './config'
import {renderMarkdown} from './render'

/** GitHub refuses comments over 65536 characters; leave room for the marker. */
export const COMMENT_MAX_CHARS = 60_000
/** The job summary's limit is 1 MiB per step. */
export const SUMMARY_MAX_CHARS = 900_000

export async function run(): Promise<void> {
  const config = parseConfig(name => core.getInput(name))
  const doc = loadComparison(config.comparisonPath, config.maxBytes)
  // read now, for this run (@actions/github's shared context is read when the bundle loads)
  const context = runContext()
  const info = runInfo(context.eventName, context.payload, context.serverUrl)
  const page = {runUrl: info.runUrl ?? undefined, headSha: info.headSha ?? undefined, pagesUrl: config.pagesUrl ?? undefined}

  core.setOutput('verdict', doc.verdict)
  core.setOutput('regressions', String(doc.counts.regression))
  await core.summary.addRaw(renderMarkdown(doc, {...page, maxChars: SUMMARY_MAX_CHARS})).write()
  core.info(`diskbench: ${doc.verdict} (${doc.counts.regression} regressed of ${doc.cellCount} cells)`)

  if (config.commentMode !== 'never') {
    const octokit = getOctokit(config.githubToken, {baseUrl: context.apiUrl})
    const repo = context.repo()
    const prNumber = config.prNumber ?? (await resolvePullRequest(octokit, repo, info))
    if (prNumber === null) {
      core.warning(`no open pull request has head ${info.headSha ?? '(unknown)'}: no comment posted`)
    } else {
      core.setOutput('pr-number', String(prNumber))
      const existing = await findComment(octokit, repo, prNumber)
      const action = decide(config.commentMode, doc.verdict, existing)
      if (action === 'skip') {
        core.info(`comment-mode ${config.commentMode}: verdict ${doc.verdict}, no comment yet: none posted`)
      } else {
        const body = renderMarkdown(doc, {...page, maxChars: COMMENT_MAX_CHARS})
        const posted = await postComment(octokit, repo, prNumber, action, existing, body)
        core.setOutput('comment-id', String(posted.id))
        core.info(`${action === 'create' ? 'created' : 'updated'} comment ${posted.url}`)
      }
    }
  }

  if (config.failOnRegression && doc.fails) {
    const what =
      doc.verdict === 'regression'
        ? `${doc.counts.regression} of ${doc.cellCount} cells regressed`
        : `the IO of ${doc.counts.changed} of ${doc.cellCount} cells changed (structural counters)`
    core.setFailed(`diskbench: ${what} (fail-on-regression is true)`)
  }
}
