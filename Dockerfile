# syntax=docker/dockerfile:1
# The Treadle worker image: builds lib/ from src/, keeps production dependencies only, and runs
# `treadle worker` as the unprivileged `node` user. Configure it with environment variables (docs/configuration.md;
# deployment in docs/deploy.md); docker-compose.yml runs it against a Temporal dev server and MinIO.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Not `npm ci`: the lockfile lacks other platforms' optional native packages (e.g. @swc/core's), and npm ci
# refuses a lockfile it would have to change. npm install keeps the locked versions and adds this platform's.
RUN npm install --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY examples ./examples
COPY scripts ./scripts
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
# Owned by root and read-only to the worker: the process cannot change its own code.
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/lib ./lib
COPY bin ./bin
COPY examples ./examples
USER node
# Local state (the file blob store, the call log, the task list, loop workspaces): a folder the worker owns.
WORKDIR /home/node
ENV TREADLE_HOME=/home/node/.treadle
CMD ["node", "/app/bin/treadle.js", "worker"]
