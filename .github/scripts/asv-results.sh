#!/usr/bin/env bash
# asv's results live on their own branch (default asv-results), one commit per history run, so
# every runner adds to the same series and the pages can be rebuilt from the branch alone.
#   asv-results.sh fetch DIR   check the branch out into DIR (a new orphan branch if there is
#                              none yet) and copy its results/ into results/asv
#   asv-results.sh push DIR    copy results/asv into DIR/results, commit, push the branch
# The token comes from $GITHUB_TOKEN and is given to git for one command at a time (the
# checkout keeps no credentials).
set -euo pipefail

BRANCH=${ASV_RESULTS_BRANCH:-asv-results}
RESULTS=results/asv
cmd=${1:?usage: asv-results.sh fetch|push DIR}
dir=${2:?usage: asv-results.sh fetch|push DIR}

git_auth() {
  local basic
  basic=$(printf 'x-access-token:%s' "${GITHUB_TOKEN:?GITHUB_TOKEN is not set}" | base64 -w0)
  git -c "http.extraheader=AUTHORIZATION: basic $basic" "$@"
}

case "$cmd" in
  fetch)
    rm -rf "$dir"
    git worktree prune
    set +e
    git_auth ls-remote --exit-code --heads origin "$BRANCH" >/dev/null
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
      git_auth fetch --no-tags --depth=1 origin "+refs/heads/$BRANCH:refs/remotes/origin/$BRANCH"
      git worktree add -f -B "$BRANCH" "$dir" "origin/$BRANCH"
    elif [ "$rc" -eq 2 ]; then
      echo "asv-results: no branch $BRANCH yet: starting it" >&2
      git worktree add -f --detach "$dir"
      git -C "$dir" checkout -q --orphan "$BRANCH"
      git -C "$dir" rm -rf -q --ignore-unmatch .
    else
      echo "asv-results: cannot reach origin (git ls-remote exit $rc)" >&2
      exit 3
    fi
    mkdir -p "$RESULTS"
    if [ -d "$dir/results" ]; then
      cp -a "$dir/results/." "$RESULTS/"
    fi
    ;;
  push)
    # only into the worktree that fetch made: a plain directory would let git find this checkout
    if [ ! -f "$dir/.git" ] || [ "$(git -C "$dir" symbolic-ref --short HEAD 2>/dev/null)" != "$BRANCH" ]; then
      echo "asv-results: $dir is not the $BRANCH worktree: run 'asv-results.sh fetch $dir' first" >&2
      exit 3
    fi
    mkdir -p "$dir/results"
    cp -a "$RESULTS/." "$dir/results/"
    git -C "$dir" add -A results
    if git -C "$dir" diff --cached --quiet; then
      echo "asv-results: nothing new" >&2
      exit 0
    fi
    git -C "$dir" -c user.name='github-actions[bot]' \
      -c user.email='41898282+github-actions[bot]@users.noreply.github.com' \
      commit -q -m "history: results of ${GITHUB_SHA:-$(git rev-parse HEAD)} on $(hostname)"
    git_auth -C "$dir" push origin "HEAD:refs/heads/$BRANCH"
    ;;
  *)
    echo "usage: asv-results.sh fetch|push DIR" >&2
    exit 2
    ;;
esac
