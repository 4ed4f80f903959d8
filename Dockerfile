# syntax=docker/dockerfile:1
#
# One image per service: SERVICE=relayer (default) or SERVICE=attestor.
#   docker build -t fee-vault-relayer .
#   docker build --build-arg SERVICE=attestor -t fee-vault-attestor .
# scripts/check-container-build.sh runs these same steps without a container runtime.

# Node 20 is the oldest version package.json's engines accept; 22 and 24 work as well.
ARG NODE_VERSION=20

FROM node:${NODE_VERSION}-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# The build needs tsc and esbuild (whose binary npm installs as an optional dependency; its install
# script only checks it). Install scripts serve the devnet and the tests (anvil) or are optional
# native speed-ups the services do without.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY schema ./schema
COPY src ./src
COPY layers ./layers
COPY contracts ./contracts
COPY scripts/bundle.ts ./scripts/bundle.ts
# The vault's ABIs live in contracts/abi.ts and the migrations in src/store/migrations/*.ts, so the
# bundles (dist/services, scripts/bundle.ts) carry everything the services read at run time but the
# deployment file and the dependencies they leave to node_modules.
RUN npm run build \
  && npm prune --omit=dev --ignore-scripts --no-audit --no-fund

FROM node:${NODE_VERSION}-bookworm-slim AS runtime
ARG SERVICE=relayer
# MALLOC_MMAP_THRESHOLD_: src/bin/processTuning.ts.
ENV NODE_ENV=production \
    MALLOC_MMAP_THRESHOLD_=131072 \
    SERVICE=${SERVICE} \
    HOST=0.0.0.0 \
    DATA_DIR=/data
WORKDIR /app
# package.json marks dist/ as ES modules. Root owns the code, so the service cannot rewrite it.
COPY --from=build /app/package.json ./package.json
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
# A typo in SERVICE fails the build instead of every start.
RUN test -f "dist/services/${SERVICE}.js" \
  && mkdir -p /data \
  && chown node:node /data
# The embedded database when DATABASE_URL is unset; unused with PostgreSQL.
VOLUME ["/data"]
USER node
# The services' default ports: relayer 8080, attestor 8081 (PORT overrides either).
EXPOSE 8080 8081
# The slim image has no curl; Node's fetch asks /v1/health on the port the service listens on.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:' + (process.env.PORT || (process.env.SERVICE === 'attestor' ? 8081 : 8080)) + '/v1/health', { signal: AbortSignal.timeout(4000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"
# exec: node is PID 1 and receives SIGTERM itself, for the services' clean shutdown. The node flags
# are the services' own (src/bin/processTuning.ts).
CMD ["/bin/sh", "-c", "exec node --max-semi-space-size=4 --expose-gc --wasm-num-compilation-tasks=0 \"dist/services/${SERVICE}.js\""]
