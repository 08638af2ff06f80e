# Builds Caddy with the Caddy Gateway bundle using xcaddy, the way users add
# plugins to Caddy:
#
#   docker build -f xcaddy.Dockerfile -t caddy-gateway .
#   docker run -p 8080:8080 -p 8443:8443 -p 127.0.0.1:9080:9080 \
#       -e GATEWAY_ADMIN_LISTEN=0.0.0.0:9080 -v gateway-data:/data caddy-gateway
#
# The store is SQLite through mattn/go-sqlite3, so the build needs cgo.
FROM caddy:2.11-builder AS builder
RUN apk add --no-cache gcc musl-dev
ENV CGO_ENABLED=1
COPY . /src/gateway
RUN xcaddy build v2.11.9 --with github.com/caddy-gateway/gateway=/src/gateway

FROM caddy:2.11
COPY --from=builder /usr/bin/caddy /usr/bin/caddy
COPY Caddyfile /etc/caddy/Caddyfile
WORKDIR /data
ENV GATEWAY_DB=/data/gateway.db
EXPOSE 8080 8443 9080
CMD ["caddy", "run", "--config", "/etc/caddy/Caddyfile", "--adapter", "caddyfile"]
