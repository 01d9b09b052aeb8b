import {describe, expect, it} from 'vitest'
import {InputError, parseConfig} from '../src/config'

const given =
  (inputs: Record<string, string>) =>
  (name: string): string =>
    inputs[name] ?? ''

const base = {'comparison-path': 'out/comparison.json', 'github-token': 't0ken'}

describe('parseConfig', () => {
  it('fills the documented defaults', () => {
    expect(parseConfig(given(base))).toEqual({
      comparisonPath: 'out/comparison.json',
      githubToken: 't0ken',
      commentMode: 'on-change',
      failOnRegression: false,
      prNumber: null,
      maxBytes: 2 * 1024 * 1024,
      pagesUrl: null,
    })
  })

  it('takes the history pages URL for the graph links', () => {
    expect(parseConfig(given({...base, 'pages-url': 'https://acme.github.io/diskbench/'})).pagesUrl).toBe(
      'https://acme.github.io/diskbench/',
    )
  })

  it('reads every input', () => {
    const config = parseConfig(
      given({...base, 'comment-mode': 'always', 'fail-on-regression': 'TRUE', 'pr-number': '42', 'max-bytes': '1000'}),
    )
    expect(config).toMatchObject({commentMode: 'always', failOnRegression: true, prNumber: 42, maxBytes: 1000})
  })

  it.each([
    [{'comparison-path': ''}, 'input comparison-path: required'],
    [{'comment-mode': 'sometimes'}, 'input comment-mode: "sometimes" is not one of always, on-change, never'],
    [{'fail-on-regression': 'yes'}, 'input fail-on-regression: "yes" is not true or false'],
    [{'pr-number': 'abc'}, 'input pr-number: "abc" is not a pull request number'],
    [{'pr-number': '0'}, 'input pr-number: "0" is not a pull request number'],
    [{'max-bytes': '0'}, 'input max-bytes: "0" is not a number of bytes'],
    [{'max-bytes': '1e9'}, 'input max-bytes: "1e9" is not a number of bytes'],
    [{'max-bytes': '999999999'}, 'input max-bytes: "999999999" is not a number of bytes from 1 to 67108864'],
    [{'github-token': ''}, 'input github-token: required when comment-mode is on-change'],
    [{'pages-url': 'javascript:alert(1)'}, 'input pages-url: "javascript:alert(1)" is not the http(s) URL of the published history pages'],
    [{'pages-url': 'https://x.test/a b'}, 'input pages-url: "https://x.test/a b" is not the http(s) URL'],
  ])('names the input in its error: %j', (bad, message) => {
    const read = (): unknown => parseConfig(given({...base, ...bad}))
    expect(read).toThrow(InputError)
    expect(read).toThrow(message)
  })

  it('needs no token when it never comments', () => {
    const config = parseConfig(given({'comparison-path': 'c.json', 'comment-mode': 'never'}))
    expect(config.githubToken).toBe('')
  })
})
