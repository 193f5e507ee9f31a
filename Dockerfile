# Production image: a release build of casefile on a slim Debian.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY migrations ./migrations
# GraphiQL's files, compiled into the binary.
COPY assets ./assets
# Where each table lives (`casefile check-distribution`), compiled into the binary.
COPY docs/scale-out.md ./docs/scale-out.md
RUN cargo build --release --locked

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --home /var/lib/casefile --create-home casefile
COPY --from=build /src/target/release/casefile /usr/local/bin/casefile
USER casefile
WORKDIR /var/lib/casefile
# Listening on every interface, so authentication is on by default: the first start prints
# the first admin token (or takes CASEFILE_BOOTSTRAP_ADMIN_TOKEN).
ENV CASEFILE_LISTEN=0.0.0.0:8080 \
    CASEFILE_AUTH=tokens \
    CASEFILE_DATA_DIR=/var/lib/casefile/data
EXPOSE 8080
ENTRYPOINT ["casefile"]
CMD ["serve"]
