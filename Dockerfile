# The one image that runs both `dynamo-kserve operator` and `dynamo-kserve dataplane`.
# Real users build FROM a public Node image: Node 24, the Active LTS line (.node-version pins
# the exact version CI tests, package.json's engines the floor). Where no registry is reachable,
# the tests pass the stand-in made by e2e/image/base-image.sh as BASE_IMAGE.
ARG BASE_IMAGE=node:24-bookworm-slim

FROM ${BASE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
# npm ci's postinstall applies these to dependencies (patch-package); see patches/README.md.
COPY patches patches
# onnxruntime-node's install script only downloads GPU (CUDA) extras; the CPU build ships in the
# package. package.json's allowScripts denies that script; the variable (its own switch) covers
# a base image whose npm predates allowScripts.
ENV ONNXRUNTIME_NODE_INSTALL=skip
RUN ["npm", "ci", "--no-audit", "--no-fund"]
COPY tsconfig.json ./
COPY cli cli
COPY lib lib
COPY dataplane dataplane
COPY operator operator
COPY activator activator
COPY proto proto
COPY e2e e2e
COPY bench bench
COPY scripts/build.mjs scripts/
RUN ["npm", "run", "build"]
RUN ["npm", "prune", "--omit=dev", "--no-audit", "--no-fund"]
COPY scripts/prune-native-binaries.mjs scripts/
RUN ["node", "scripts/prune-native-binaries.mjs"]
# Readable by the unprivileged user whatever the modes in the build context were.
RUN ["chmod", "-R", "a+rX", "dist", "node_modules", "proto"]

FROM ${BASE_IMAGE}
# The python engine hosts Triton Python-backend models (model.py) with python3 and numpy from
# Debian (no pip, no compilers). A model's own packages go in an image layer built FROM this.
RUN apt-get update \
  && apt-get install -y --no-install-recommends python3-minimal python3-numpy \
  && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /usr/share/doc/* /usr/share/man/*
WORKDIR /app
ENV NODE_ENV=production
# onnxruntime-node 1.30 reports telemetry over HTTPS when a session starts: a model server's
# image sends nothing it was not asked to (and, with no CA bundle, it warned on every ONNX load).
ENV ORT_DISABLE_TELEMETRY=1
# Production dependencies and compiled JavaScript only, plus what the code reads at run time:
# the reflection descriptors (proto/), the python engine's stub and triton_python_backend_utils
# (dataplane/python/), the bundled example models, and the CRD (crds/).
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist/cli dist/cli
COPY --from=build /src/dist/lib dist/lib
COPY --from=build /src/dist/dataplane/src dist/dataplane/src
COPY --from=build /src/dist/operator/src dist/operator/src
COPY --from=build /src/dist/activator/src dist/activator/src
COPY --from=build /src/dist/proto dist/proto
COPY --from=build /src/proto proto
COPY dataplane/python dataplane/python
COPY examples/model_repository examples/model_repository
COPY crds crds
# Non-root (the uid the operator's pods and the chart run as); no shell needed to start.
USER 65532:65532
EXPOSE 8000 8001 8002 8080
ENTRYPOINT ["node", "/app/dist/cli/main.js"]
CMD ["dataplane"]
