// Bundles src/index.ts and its dependencies into dist/index.js, the file action.yml runs.
//   node scripts/build.mjs          write dist/index.js
//   node scripts/build.mjs --check  rebuild in memory; exit 1 when dist/index.js differs
// dist/ is committed (a JavaScript action runs without installing anything), so
// the check keeps it equal to what the sources build.
import * as esbuild from 'esbuild'
import {readFileSync, writeFileSync, mkdirSync} from 'node:fs'
import {dirname, join} from 'node:path'
import {fileURLToPath} from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
const outfile = join(root, 'dist', 'index.js')
const check = process.argv.includes('--check')

const result = await esbuild.build({
  absWorkingDir: root,
  entryPoints: ['src/index.ts'],
  bundle: true,
  platform: 'node',
  target: 'node24',
  format: 'cjs',
  outfile,
  write: false,
  legalComments: 'eof',
  charset: 'utf8',
  logLevel: 'warning',
})
const built = result.outputFiles.find(f => f.path === outfile)
if (built === undefined) {
  throw new Error(`esbuild wrote no ${outfile}`)
}

if (check) {
  let committed = ''
  try {
    committed = readFileSync(outfile, 'utf8')
  } catch {
    // a missing file is a difference like any other
  }
  if (committed !== built.text) {
    console.error(
      'dist/index.js differs from what src/ builds: run `npm run build` in .github/actions/gate-comment and commit dist/',
    )
    process.exit(1)
  }
  console.log(`dist/index.js is up to date (${built.contents.length} bytes)`)
} else {
  mkdirSync(dirname(outfile), {recursive: true})
  writeFileSync(outfile, built.contents)
  console.log(`wrote dist/index.js (${built.contents.length} bytes)`)
}
