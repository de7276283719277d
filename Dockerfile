# One image for both processes; docker-compose.yml picks the command (api or worker).
FROM node:20.20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY tsconfig.json ./
COPY api ./api
COPY activities ./activities
COPY config ./config
COPY core ./core
COPY simulator ./simulator
COPY store ./store
COPY vendors ./vendors
COPY workflows ./workflows
COPY worker ./worker
COPY scripts ./scripts
# The api runs from its build (scripts/lib/build-api.ts says why); the worker and simulator under tsx.
RUN node --import tsx scripts/build.ts
USER node
EXPOSE 8080
CMD ["node", "--enable-source-maps", "dist/api/server.mjs"]
