import * as core from '@actions/core'
import {run} from './main'

run().catch(e => core.setFailed(e instanceof Error ? e.message : String(e)))
