#!/usr/bin/env bash
# Proxy throughput and p99 latency: the gateway versus plain Caddy
# reverse_proxy to the same upstream, and the gateway with a realistic plugin
# chain (request-id, key-auth, rate-limit, response-transform) and with a
# proxy-wasm filter adding one response header (bench/wasm-header.wat) versus
# the same route without plugins, all in one run. Everything listens on 127.0.0.1.
#
#   bash bench/proxy.sh            (make bench-proxy)
#   DURATION=20s CONNS=64 bash bench/proxy.sh
#   TRAEFIK=/path/to/traefik bash bench/proxy.sh
#
# TRAEFIK (optional): a Traefik v3 binary (built locally from Traefik's
# repository, never committed) measured in the same run: one router and
# service to the same upstream (file provider), and a route with its
# built-in equivalents of the chain's rate-limit and response header
# (Traefik has no request-id or API-key middleware).
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
THREADS=${THREADS:-2}
BIN=./bin/caddy
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
if ! command -v wrk >/dev/null; then
	echo "installing wrk from Debian's packages" >&2
	(apt-get update -qq && apt-get install -y -qq wrk) >/dev/null
fi

# Pin the load generator to one core and the servers to the other, so that
# the variants compete for the same CPU the same way (less run-to-run noise).
PIN_CLIENT="" PIN_SERVERS=""
if command -v taskset >/dev/null && [ "$(nproc)" -ge 2 ] && [ -z "${NO_PIN:-}" ]; then
	PIN_CLIENT="taskset -c 0" PIN_SERVERS="taskset -c 1"
fi

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

UP=127.0.0.1:19101 PLAIN=127.0.0.1:19102 GW=127.0.0.1:19103 GWADMIN=127.0.0.1:19104 TRAEFIK_ADDR=127.0.0.1:19107
cat > "$work/upstream.caddyfile" <<CF
{
	admin off
	auto_https off
}
http://$UP {
	respond "hello from the upstream, a small body of about sixty bytes." 200
}
CF
cat > "$work/plain.caddyfile" <<CF
{
	admin off
	auto_https off
}
http://$PLAIN {
	reverse_proxy $UP
}
CF
cat > "$work/gateway.caddyfile" <<CF
{
	admin 127.0.0.1:19105
	auto_https off
	gateway {
		admin_listen $GWADMIN
		database sqlite $work/gw.db
		http_listen $GW
		https_listen 127.0.0.1:19106
		caddy_admin 127.0.0.1:19105
	}
}
CF
for f in upstream plain gateway; do
	(cd "$work" && exec $PIN_SERVERS "$OLDPWD/$BIN" run --config "$work/$f.caddyfile" --adapter caddyfile >"$work/$f.log" 2>&1) &
	pids+=($!)
done
if [ -n "${TRAEFIK:-}" ]; then
	[ -x "$TRAEFIK" ] || { echo "TRAEFIK=$TRAEFIK is not an executable" >&2; exit 1; }
	cat > "$work/traefik.yml" <<YML
global:
  checkNewVersion: false
  sendAnonymousUsage: false
log:
  level: ERROR
entryPoints:
  web:
    address: "$TRAEFIK_ADDR"
providers:
  file:
    filename: "$work/traefik-dynamic.yml"
YML
	cat > "$work/traefik-dynamic.yml" <<YML
http:
  routers:
    plain:
      entryPoints: [web]
      rule: "PathPrefix(\`/plain\`)"
      service: upstream
    chain:
      entryPoints: [web]
      rule: "PathPrefix(\`/chain\`)"
      service: upstream
      middlewares: [limit, served-by]
  middlewares:
    limit:
      rateLimit:
        average: 100000000
        period: 1m
        burst: 100000000
    served-by:
      headers:
        customResponseHeaders:
          X-Served-By: gateway
  services:
    upstream:
      loadBalancer:
        servers:
          - url: "http://$UP"
YML
	(cd "$work" && exec $PIN_SERVERS "$TRAEFIK" --configFile="$work/traefik.yml" >"$work/traefik.log" 2>&1) &
	pids+=($!)
fi
api() { curl -fsS -X "$1" "http://$GWADMIN$2" -H 'Content-Type: application/json' ${3:+-d "$3"}; }
for i in $(seq 1 100); do curl -fsS "http://$GWADMIN/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
sleep 0.5
api POST /api/v1/services '{"name":"bench"}' >/dev/null
api POST /api/v1/services/1/targets "{\"host\":\"127.0.0.1\",\"port\":${UP##*:}}" >/dev/null
api POST /api/v1/routes '{"name":"plain","service_id":1,"paths":["/plain"]}' >/dev/null
api POST /api/v1/routes '{"name":"chain","service_id":1,"paths":["/chain"]}' >/dev/null
api POST /api/v1/plugins '{"type":"request-id","scope":"route","route_id":2}' >/dev/null
api POST /api/v1/plugins '{"type":"key-auth","scope":"route","route_id":2}' >/dev/null
api POST /api/v1/plugins '{"type":"rate-limit","scope":"route","route_id":2,"config":{"limit":100000000,"window_s":60}}' >/dev/null
api POST /api/v1/plugins '{"type":"response-transform","scope":"route","route_id":2,"config":{"set_headers":{"X-Served-By":"gateway"}}}' >/dev/null
api POST /api/v1/routes '{"name":"wasm","service_id":1,"paths":["/wasm"]}' >/dev/null
api POST /api/v1/wasm-modules "$(python3 -c 'import json,sys; print(json.dumps({"name": "bench-header", "wat": open(sys.argv[1]).read()}))' bench/wasm-header.wat)" >/dev/null
api POST /api/v1/plugins '{"type":"wasm","scope":"route","route_id":3,"config":{"module":"bench-header"}}' >/dev/null
api POST /api/v1/consumers '{"username":"bench"}' >/dev/null
api POST /api/v1/consumers/1/credentials '{"type":"key-auth","key":"bench-key"}' >/dev/null
names=("plain Caddy reverse_proxy" "gateway, no plugins" "gateway, request-id + key-auth + rate-limit + response-transform" "gateway, a wasm filter adding one response header")
urls=("http://$PLAIN/plain" "http://$GW/plain" "http://$GW/chain" "http://$GW/wasm")
if [ -n "${TRAEFIK:-}" ]; then
	names+=("Traefik, no middlewares" "Traefik, rateLimit + headers (no request-id/key-auth equivalents)")
	urls+=("http://$TRAEFIK_ADDR/plain" "http://$TRAEFIK_ADDR/chain")
	for i in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$TRAEFIK_ADDR/chain")" = 200 ] && break; sleep 0.1; done
fi
for u in "${urls[@]}"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'apikey: bench-key' "$u")
	[ "$code" = 200 ] || { echo "warm-up $u answered $code" >&2; cat "$work/gateway.log" "$work/traefik.log" >&2 2>/dev/null; exit 1; }
done

run() { # name url [header]
	local out
	out=$($PIN_CLIENT wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency ${3:+-H "$3"} "$2")
	local rps p99
	rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
	p99=$(awk '$1=="99%" {print $2}' <<<"$out")
	local errs
	errs=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
	echo "$1|$rps|$p99|${errs:-none}"
}
ROUNDS=${ROUNDS:-2}
echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS interleaved rounds, 2 cores shared by wrk, upstream and proxy" >&2
# figures taken on a loaded machine are not comparable: say how loaded
echo "load average before the run:$(awk '{print " "$1", "$2", "$3}' /proc/loadavg) (meaningful below 1)" >&2
declare -a sum_rps sum_p99 errs
n=${#urls[@]}
for i in $(seq 0 $((n - 1))); do sum_rps[$i]=0; sum_p99[$i]=0; errs[$i]=""; done
for round in $(seq 1 "$ROUNDS"); do
	for i in $(seq 0 $((n - 1))); do
		# PROFILE=chain or PROFILE=wasm: a CPU profile of the gateway
		# serving that route, in /tmp/<route>.pprof
		if [ -n "${PROFILE:-}" ] && [ "$round" = 1 ] && [ "${urls[$i]##*/}" = "$PROFILE" ] && [ "${urls[$i]}" != "${urls[$i]#http://$GW/}" ]; then
			(sleep 2; curl -s "http://127.0.0.1:19105/debug/pprof/profile?seconds=5" > "/tmp/$PROFILE.pprof") &
		fi
		r=$(run "${names[$i]}" "${urls[$i]}" "apikey: bench-key")
		IFS='|' read -r _ rps p99 e <<<"$r"
		p99ms=$(awk -v v="$p99" 'BEGIN{ if (v ~ /ms$/) {sub(/ms/,"",v); print v} else if (v ~ /us$/) {sub(/us/,"",v); print v/1000} else {sub(/s/,"",v); print v*1000} }')
		sum_rps[$i]=$(awk -v a="${sum_rps[$i]}" -v b="$rps" 'BEGIN{print a+b}')
		sum_p99[$i]=$(awk -v a="${sum_p99[$i]}" -v b="$p99ms" 'BEGIN{print a+b}')
		[ "$e" = none ] || errs[$i]="${errs[$i]} $e"
	done
done
base=$(awk -v a="${sum_rps[0]}" -v n="$ROUNDS" 'BEGIN{print a/n}')
printf '| setup | requests/s | p99 | vs plain Caddy | errors |\n|---|---|---|---|---|\n'
for i in $(seq 0 $((n - 1))); do
	awk -v name="${names[$i]}" -v r="${sum_rps[$i]}" -v p="${sum_p99[$i]}" -v n="$ROUNDS" -v b="$base" -v e="${errs[$i]:-none}" \
		'BEGIN{printf "| %s | %.0f | %.2f ms | %.0f%% | %s |\n", name, r/n, p/n, 100*(r/n)/b, e}'
done
awk -v a="${sum_rps[2]}" -v b="${sum_rps[1]}" 'BEGIN{printf "\nThe plugin chain serves %.2fx the no-plugin route'"'"'s throughput (goal: at least 0.93x).\n", a/b}'
awk -v a="${sum_rps[3]}" -v b="${sum_rps[1]}" 'BEGIN{printf "The wasm filter route serves %.2fx the no-plugin route'"'"'s throughput (goal: at least 0.85x).\n", a/b}'
if [ -n "${TRAEFIK:-}" ]; then
	awk -v a="${sum_rps[1]}" -v b="${sum_rps[4]}" 'BEGIN{printf "The gateway'"'"'s no-plugin route serves %.2fx Traefik'"'"'s (goal: at least 1x).\n", a/b}'
fi
