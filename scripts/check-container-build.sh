#!/usr/bin/env bash
# Carries out the Dockerfile's steps where no container runtime is available, in a temporary
# directory:
#   build stage    the files the build stage COPYs (each one allowed by .dockerignore), then its
#                  RUN lines as written (npm ci, npm run build, npm prune --omit=dev);
#   runtime stage  only what the runtime stage COPYs from the build stage; no dev dependency left;
#   run            the relayer and the attestor each started with the image's CMD, on an embedded
#                  database, the relayer against a local anvil; the image's HEALTHCHECK command must
#                  pass for each, and each must stop cleanly on SIGTERM.
# The Dockerfile is read, not restated: a file it forgets to copy fails here too.
#
# Usage: scripts/check-container-build.sh [--keep]   (--keep leaves the temporary directory)
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DOCKERFILE="$ROOT/Dockerfile"
DOCKERIGNORE="$ROOT/.dockerignore"
KEEP=0
if [ "${1:-}" = "--keep" ]; then KEEP=1; fi

# A caller's npm run would hand its own project's settings (npm_config_local_prefix, …) to the
# npm commands below; they must see only the temporary directory.
while read -r name; do unset "$name"; done < <(compgen -e | grep -i '^npm_' || true)
unset NODE_OPTIONS INIT_CWD

WORK="$(mktemp -d "${TMPDIR:-/tmp}/check-container-build.XXXXXX")"
pids=()

cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [ "$KEEP" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
# Ended from outside (a test runner's timeout): still stop what was started and remove the directory.
trap 'exit 143' TERM INT

step() { printf '== [%3ds] %s\n' "$SECONDS" "$*"; }
fail() {
  printf 'check-container-build: %s\n' "$*" >&2
  exit 1
}

# The Dockerfile as instructions: comments dropped, continuation lines joined.
instructions() {
  awk '
    /^[[:space:]]*#/ { next }
    /^[[:space:]]*$/ { if (line == "") next }
    {
      sub(/^[[:space:]]+/, "")
      if (sub(/\\[[:space:]]*$/, "")) { line = line $0 " "; next }
      line = line $0
      if (line != "") print line
      line = ""
    }
  ' "$DOCKERFILE"
}

# What the build context holds: .dockerignore allows paths (!path) and leaves some out again.
allowed=()
excluded=()
while read -r pattern; do
  case "$pattern" in
    "" | "#"* | "*") ;;
    "!"*) allowed+=("${pattern#!}") ;;
    *) excluded+=("--exclude=$pattern") ;;
  esac
done <"$DOCKERIGNORE"

in_context() {
  local source="$1" entry
  for entry in "${allowed[@]}"; do
    if [ "$source" = "$entry" ]; then return 0; fi
  done
  return 1
}

# COPY <source>... <dest>: into a stage's /app, with Docker's rules for a dest ending in "/"; from
# the build context (the .dockerignore exclusions apply) or from the build stage.
copy_into() {
  local stage_dir="$1" from_dir="$2" context="$3"
  shift 3
  local words=("$@")
  local dest="${words[${#words[@]} - 1]}"
  local sources=("${words[@]:0:${#words[@]}-1}")
  dest="${dest#/app/}"
  dest="${dest#./}"
  local source target
  for source in "${sources[@]}"; do
    source="${source#/app/}"
    source="${source#./}"
    if [ -z "$dest" ] || [ "${dest: -1}" = "/" ]; then
      target="$stage_dir/${dest}$(basename "$source")"
    elif [ "${#sources[@]}" -gt 1 ]; then
      fail "COPY of several sources needs a destination ending in /: ${words[*]}"
    else
      target="$stage_dir/$dest"
    fi
    [ -e "$from_dir/$source" ] || fail "COPY source $source does not exist"
    mkdir -p "$(dirname "$target")"
    if [ "$context" = stage ]; then
      # Nothing reads the build stage after the runtime stage has taken from it: moving is the
      # same as copying here, and spares writing and deleting a quarter of a gigabyte.
      [ ! -e "$target" ] || fail "COPY onto $target, which exists already"
      mv "$from_dir/$source" "$target"
    elif [ -d "$from_dir/$source" ]; then
      mkdir -p "$target"
      local depth
      depth="$(($(tr -cd / <<<"$source" | wc -c) + 1))"
      # Named from the context's root, so that patterns such as contracts/.cache match.
      tar -C "$from_dir" "${excluded[@]}" -cf - "$source" | tar -C "$target" --strip-components="$depth" -xf -
    else
      cp "$from_dir/$source" "$target"
    fi
  done
}

free_port() {
  node -e 'const s = require("node:net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close() })'
}

# The chain the relayer's health needs, started first so that it is up by the time the services
# are. Anvil is a dev dependency: the repository's own copy runs.
anvil_bin="$(cd "$ROOT" && node --import tsx -e 'import("./src/chain/anvil.ts").then((m) => console.log(m.resolveAnvilBinary()))')"
anvil_port="$(free_port)"
"$anvil_bin" --host 127.0.0.1 --port "$anvil_port" --silent >"$WORK/anvil.log" 2>&1 &
anvil_pid="$!"
pids+=("$anvil_pid")
rpc_url="http://127.0.0.1:$anvil_port"

stage=""
build_dir="$WORK/build/app"
runtime_dir="$WORK/runtime/app"
healthcheck=""
service_cmd=""

while IFS= read -r line; do
  keyword="${line%% *}"
  rest="${line#* }"
  case "${keyword^^}" in
    FROM)
      stage="${rest##* }"
      step "stage $stage"
      case "$stage" in
        build) mkdir -p "$build_dir" ;;
        runtime) mkdir -p "$runtime_dir" ;;
        *) fail "unexpected stage $stage" ;;
      esac
      ;;
    WORKDIR)
      [ "$rest" = "/app" ] || fail "this check assumes WORKDIR /app, not $rest"
      ;;
    COPY)
      read -ra words <<<"$rest"
      from=""
      args=()
      for word in "${words[@]}"; do
        case "$word" in
          --from=*) from="${word#--from=}" ;;
          --*) ;;
          *) args+=("$word") ;;
        esac
      done
      if [ "$stage" = build ] && [ -z "$from" ]; then
        for source in "${args[@]:0:${#args[@]}-1}"; do
          in_context "$source" || fail "COPY $source: .dockerignore keeps it out of the build context"
        done
        copy_into "$build_dir" "$ROOT" context "${args[@]}"
      elif [ "$stage" = runtime ] && [ "$from" = build ]; then
        copy_into "$runtime_dir" "$build_dir" stage "${args[@]}"
      else
        fail "unexpected COPY in stage $stage: $line"
      fi
      ;;
    RUN)
      if [ "$stage" = build ]; then
        step "RUN $rest"
        # The npm cache answers first: the lockfile pins every version.
        (cd "$build_dir" && npm_config_prefer_offline=true sh -c "$rest" </dev/null) || fail "RUN failed: $rest"
      fi
      # The runtime stage's RUN prepares /data as root; its check of SERVICE is made below.
      ;;
    HEALTHCHECK)
      healthcheck="${rest#*CMD }"
      ;;
    CMD)
      service_cmd="$rest"
      ;;
  esac
done < <(instructions)

[ -n "$healthcheck" ] || fail "the Dockerfile has no HEALTHCHECK"
[ -n "$service_cmd" ] || fail "the Dockerfile has no CMD"
mapfile -d '' cmd_words < <(node -e 'for (const w of JSON.parse(process.argv[1])) process.stdout.write(w + "\0")' "$service_cmd")

step "runtime stage contents"
for service in relayer attestor; do
  [ -f "$runtime_dir/dist/services/$service.js" ] || fail "no dist/services/$service.js in the runtime stage"
done
[ -f "$runtime_dir/package.json" ] || fail "no package.json in the runtime stage: it marks dist/ as ES modules"
[ -d "$runtime_dir/node_modules" ] || fail "no node_modules in the runtime stage"
# npm keeps a dev dependency that is also a production package's optional peer (typescript, for
# viem): the lockfile marks those devOptional rather than dev.
(cd "$runtime_dir" && node -e '
  const { existsSync, readFileSync } = require("node:fs")
  const pkg = JSON.parse(readFileSync("package.json", "utf8"))
  const lock = JSON.parse(readFileSync(process.argv[1], "utf8"))
  const left = Object.keys(pkg.devDependencies ?? {}).filter(
    (name) => lock.packages[`node_modules/${name}`]?.dev === true && existsSync(`node_modules/${name}`)
  )
  if (left.length > 0) {
    console.error(`dev dependencies in the runtime stage: ${left.join(", ")}`)
    process.exit(1)
  }
  if (pkg.type !== "module") {
    console.error("the runtime stage needs the package.json that marks dist/ as ES modules")
    process.exit(1)
  }
' "$ROOT/package-lock.json") || fail "the runtime stage is not what the image needs"

cat >"$WORK/deployment.json" <<'EOF'
{
  "chainId": 31337,
  "vault": "0x5FbDB2315678afecb367f032d93F642f64180aa3",
  "settlementAsset": "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512",
  "shieldAdapter": "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0",
  "swapRouter": "0xCf7Ed3AccA5a467e9e704C703E8D87F634fB0Fc9",
  "startBlock": 0,
  "quotedFullBalance": true,
  "assets": {}
}
EOF

declare -A service_pid service_port

# One service with the image's CMD and environment, but a loopback HOST and a free port.
start_service() {
  local service="$1"
  shift
  local port
  port="$(free_port)"
  step "start $service on port $port"
  # The runtime stage's ENV, with a loopback HOST, a free port and a data directory here.
  (cd "$runtime_dir" && exec env -i PATH="$PATH" HOME="$HOME" NODE_ENV=production SERVICE="$service" \
    MALLOC_MMAP_THRESHOLD_=131072 HOST=127.0.0.1 PORT="$port" DATA_DIR="$WORK/data/$service" LOG_LEVEL=info "$@" "${cmd_words[@]}") \
    >"$WORK/$service.out" 2>"$WORK/$service.err" &
  service_pid[$service]="$!"
  service_port[$service]="$port"
  pids+=("$!")
}

show_logs() {
  cat "$WORK/$1.out" "$WORK/$1.err" >&2
}

# The image's HEALTHCHECK command, run as Docker runs it (sh -c, the container's PORT and SERVICE),
# until it passes.
await_healthy() {
  local service="$1" pid="${service_pid[$1]}"
  for _ in $(seq 1 180); do
    if ! kill -0 "$pid" 2>/dev/null; then
      show_logs "$service"
      fail "$service exited before its HEALTHCHECK passed"
    fi
    if (cd "$runtime_dir" && env -i PATH="$PATH" PORT="${service_port[$service]}" SERVICE="$service" \
      sh -c "$healthcheck"); then
      echo "$service: HEALTHCHECK passed (/v1/health 200)"
      return 0
    fi
    sleep 0.5
  done
  show_logs "$service"
  fail "$service: the HEALTHCHECK did not pass"
}

# docker stop: SIGTERM, and a clean shutdown is exit code 0.
stop_service() {
  local service="$1" pid="${service_pid[$1]}" code=0
  kill -TERM "$pid"
  wait "$pid" || code=$?
  if [ "$code" != 0 ]; then
    show_logs "$service"
    fail "$service: exit code $code after SIGTERM"
  fi
  echo "$service: stopped cleanly on SIGTERM"
}

for attempt in $(seq 1 50); do
  if node -e 'fetch(process.argv[1], { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] }) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))' "$rpc_url"; then
    break
  fi
  if [ "$attempt" = 50 ] || ! kill -0 "$anvil_pid" 2>/dev/null; then
    cat "$WORK/anvil.log" >&2
    fail "anvil does not answer on $rpc_url"
  fi
  sleep 0.2
done

# Anvil's well-known development keys (accounts #1 and #2 of its test mnemonic), never real ones.
start_service relayer \
  RPC_URL="$rpc_url" \
  DEPLOYMENT_FILE="$WORK/deployment.json" \
  RELAYER_PRIVATE_KEY=0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d
start_service attestor \
  RPC_URL="$rpc_url" \
  DEPLOYMENT_FILE="$WORK/deployment.json" \
  ATTESTOR_PRIVATE_KEY=0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a \
  HINT_PRIVATE_KEY="0x$(printf '22%.0s' $(seq 1 32))" \
  PEPPER="0x$(printf '33%.0s' $(seq 1 32))"
for service in relayer attestor; do await_healthy "$service"; done
for service in relayer attestor; do stop_service "$service"; done

step "ok: the image's build and runtime stages produce services that start and answer /v1/health"
