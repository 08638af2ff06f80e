#!/usr/bin/env bash
# Proxy throughput and p99 latency: the gateway versus plain Caddy
# reverse_proxy to the same upstream, and the gateway with a realistic plugin
# chain (request-id, key-auth, rate-limit, response-transform) and with a
# proxy-wasm filter adding one response header (bench/wasm-header.wat) versus
# the same route without plugins, all in one run, with a control route
# that sets the chain's headers with fixed values (what the headers cost
# without the plugins that make them). Everything listens on 127.0.0.1.
#
#   bash bench/proxy.sh            (make bench-proxy)
#   DURATION=20s CONNS=64 bash bench/proxy.sh
#   TRAEFIK=/path/to/traefik bash bench/proxy.sh
#
# nginx (Debian's nginx-light, installed here when missing; NO_NGINX=1
# skips it) proxies to the same upstream with upstream keep-alive: the
# baseline of a C proxy, one worker on the servers' core.
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
if [ -z "${NO_NGINX:-}" ] && ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
	echo "installing nginx-light from Debian's packages" >&2
	(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx-light) >/dev/null
fi
NGINX_BIN=$(command -v nginx || echo /usr/sbin/nginx)

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

UP=127.0.0.1:19101 PLAIN=127.0.0.1:19102 GW=127.0.0.1:19103 GWADMIN=127.0.0.1:19104 TRAEFIK_ADDR=127.0.0.1:19107 NGINX_ADDR=127.0.0.1:19108
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
	traefik_pid=$!
fi
if [ -z "${NO_NGINX:-}" ]; then
	mkdir -p "$work/nginx"
	cat > "$work/nginx.conf" <<NG
daemon off;
master_process off;
worker_processes 1;
pid $work/nginx/nginx.pid;
error_log $work/nginx/error.log error;
events { worker_connections 1024; }
http {
	access_log off;
	client_body_temp_path $work/nginx/body;
	proxy_temp_path $work/nginx/proxy;
	fastcgi_temp_path $work/nginx/fastcgi;
	uwsgi_temp_path $work/nginx/uwsgi;
	scgi_temp_path $work/nginx/scgi;
	upstream bench_upstream {
		server $UP;
		keepalive 64;
	}
	server {
		listen $NGINX_ADDR;
		location / {
			proxy_pass http://bench_upstream;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
		}
	}
}
NG
	# master_process off: one process serving, so its CPU is the proxy's
	(cd "$work" && exec $PIN_SERVERS "$NGINX_BIN" -p "$work/nginx" -c "$work/nginx.conf" >"$work/nginx.log" 2>&1) &
	pids+=($!)
	nginx_pid=$!
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
# The control for the chain: a route whose request-transform and
# response-transform set the headers the chain sends each way (upstream:
# X-Request-ID and the consumer's three; downstream: X-Request-ID, the
# three RateLimit-* and X-Served-By) with fixed values. Its ratio to the
# no-plugin route is what those headers cost in net/http on both hops and
# in the upstream, with no plugin logic at all.
api POST /api/v1/routes '{"name":"headers","service_id":1,"paths":["/headers"]}' >/dev/null
api POST /api/v1/plugins '{"type":"request-transform","scope":"route","route_id":4,"config":{"set_headers":{"X-Request-ID":"0f8e9c1a-3b2d-4c5e-8f7a-123456789abc","X-Consumer-ID":"1","X-Consumer-Username":"bench","X-Consumer-Groups":""}}}' >/dev/null
api POST /api/v1/plugins '{"type":"response-transform","scope":"route","route_id":4,"config":{"set_headers":{"X-Request-ID":"0f8e9c1a-3b2d-4c5e-8f7a-123456789abc","RateLimit-Limit":"100000000","RateLimit-Remaining":"99999999","RateLimit-Reset":"60","X-Served-By":"gateway"}}}' >/dev/null
names=("plain Caddy reverse_proxy" "gateway, no plugins" "gateway, request-id + key-auth + rate-limit + response-transform" "gateway, a wasm filter adding one response header" "gateway, the chain's headers with fixed values (request-transform + response-transform)")
urls=("http://$PLAIN/plain" "http://$GW/plain" "http://$GW/chain" "http://$GW/wasm" "http://$GW/headers")
if [ -n "${TRAEFIK:-}" ]; then
	names+=("Traefik, no middlewares" "Traefik, rateLimit + headers (no request-id/key-auth equivalents)")
	urls+=("http://$TRAEFIK_ADDR/plain" "http://$TRAEFIK_ADDR/chain")
	for i in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$TRAEFIK_ADDR/chain")" = 200 ] && break; sleep 0.1; done
fi
if [ -z "${NO_NGINX:-}" ]; then
	names+=("nginx proxy_pass (upstream keep-alive)")
	urls+=("http://$NGINX_ADDR/plain")
	for i in $(seq 1 100); do [ "$(curl -s -o /dev/null -w '%{http_code}' "http://$NGINX_ADDR/plain")" = 200 ] && break; sleep 0.1; done
fi
for u in "${urls[@]}"; do
	code=$(curl -s -o /dev/null -w '%{http_code}' -H 'apikey: bench-key' "$u")
	[ "$code" = 200 ] || { echo "warm-up $u answered $code" >&2; cat "$work/gateway.log" "$work/traefik.log" "$work/nginx/error.log" >&2 2>/dev/null; exit 1; }
done

# CPU time (user+system, clock ticks) a process has used so far: the
# servers' CPU per request is much steadier than requests/s when anything
# else runs on the machine.
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)
# the process serving each URL (plain Caddy, the gateway, Traefik)
proxy_pid() {
	case "$1" in
	"http://$PLAIN/"*) echo "${pids[1]}" ;;
	"http://$GW/"*) echo "${pids[2]}" ;;
	"http://$TRAEFIK_ADDR/"*) echo "$traefik_pid" ;;
	"http://$NGINX_ADDR/"*) echo "$nginx_pid" ;;
	esac
}
run() { # name url [header]
	local out p0 u0 p1 u1 pid
	pid=$(proxy_pid "$2")
	p0=$(cpu "$pid") u0=$(cpu "${pids[0]}")
	out=$($PIN_CLIENT wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" --latency ${3:+-H "$3"} "$2")
	p1=$(cpu "$pid") u1=$(cpu "${pids[0]}")
	local rps p99 reqs
	reqs=$(awk '/requests in/ {print $1}' <<<"$out")
	rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
	p99=$(awk '$1=="99%" {print $2}' <<<"$out")
	local errs
	errs=$(awk '/Non-2xx|Socket errors/ {print}' <<<"$out" | tr '\n' ' ')
	# proxy and upstream CPU per request, in microseconds ("n/a" when wrk
	# counted no request: nothing to divide by)
	local pus=n/a uus=n/a
	if [[ "$reqs" =~ ^[0-9]+$ ]] && [ "$reqs" -gt 0 ]; then
		pus=$(awk -v t=$((p1 - p0)) -v n="$reqs" -v hz="$TICK" 'BEGIN{print t*1e6/hz/n}')
		uus=$(awk -v t=$((u1 - u0)) -v n="$reqs" -v hz="$TICK" 'BEGIN{print t*1e6/hz/n}')
	else
		echo "warning: wrk reported no requests for $1 ($2): CPU per request n/a" >&2
	fi
	echo "$1|$rps|$p99|${errs:-none}|$pus|$uus"
}
ROUNDS=${ROUNDS:-2}
echo "wrk -t$THREADS -c$CONNS -d$DURATION, $ROUNDS interleaved rounds, 2 cores shared by wrk, upstream and proxy" >&2
# figures taken on a loaded machine are not comparable: say how loaded
echo "load average before the run:$(awk '{print " "$1", "$2", "$3}' /proc/loadavg) (meaningful below 1)" >&2
# cpu_rounds: the rounds whose CPU per request is in sum_pcpu/sum_ucpu
# (not the profiled one, nor one where wrk counted no request)
# round_rps: each round's requests/s, for the per-round ratios at the end
declare -a sum_rps sum_p99 errs sum_pcpu sum_ucpu cpu_rounds round_rps
n=${#urls[@]}
for i in $(seq 0 $((n - 1))); do sum_rps[$i]=0; sum_p99[$i]=0; errs[$i]=""; sum_pcpu[$i]=0; sum_ucpu[$i]=0; cpu_rounds[$i]=0; round_rps[$i]=""; done
profiled=""
for round in $(seq 1 "$ROUNDS"); do
	for i in $(seq 0 $((n - 1))); do
		# PROFILE=chain, wasm or headers: a CPU profile of the gateway
		# serving that route, in /tmp/<route>.pprof. The capture costs the
		# gateway CPU too: that round is left out of the CPU figures.
		prof=""
		if [ -n "${PROFILE:-}" ] && [ "$round" = 1 ] && [ "${urls[$i]##*/}" = "$PROFILE" ] && [ "${urls[$i]}" != "${urls[$i]#http://$GW/}" ]; then
			(sleep 2; curl -s "http://127.0.0.1:19105/debug/pprof/profile?seconds=5" > "/tmp/$PROFILE.pprof") &
			prof=1 profiled="${names[$i]}"
		fi
		r=$(run "${names[$i]}" "${urls[$i]}" "apikey: bench-key")
		IFS='|' read -r _ rps p99 e pus uus <<<"$r"
		p99ms=$(awk -v v="$p99" 'BEGIN{ if (v ~ /ms$/) {sub(/ms/,"",v); print v} else if (v ~ /us$/) {sub(/us/,"",v); print v/1000} else {sub(/s/,"",v); print v*1000} }')
		sum_rps[$i]=$(awk -v a="${sum_rps[$i]}" -v b="$rps" 'BEGIN{print a+b}')
		round_rps[$i]="${round_rps[$i]} $rps"
		sum_p99[$i]=$(awk -v a="${sum_p99[$i]}" -v b="$p99ms" 'BEGIN{print a+b}')
		if [ -z "$prof" ] && [ "$pus" != n/a ]; then
			sum_pcpu[$i]=$(awk -v a="${sum_pcpu[$i]}" -v b="$pus" 'BEGIN{print a+b}')
			sum_ucpu[$i]=$(awk -v a="${sum_ucpu[$i]}" -v b="$uus" 'BEGIN{print a+b}')
			cpu_rounds[$i]=$((cpu_rounds[$i] + 1))
		fi
		[ "$e" = none ] || errs[$i]="${errs[$i]} $e"
	done
done
base=$(awk -v a="${sum_rps[0]}" -v n="$ROUNDS" 'BEGIN{print a/n}')
printf '| setup | requests/s | p99 | vs plain Caddy | proxy CPU/request | upstream CPU/request | errors |\n|---|---|---|---|---|---|---|\n'
for i in $(seq 0 $((n - 1))); do
	awk -v name="${names[$i]}" -v r="${sum_rps[$i]}" -v p="${sum_p99[$i]}" -v n="$ROUNDS" -v b="$base" -v e="${errs[$i]:-none}" \
		-v pc="${sum_pcpu[$i]}" -v uc="${sum_ucpu[$i]}" -v cn="${cpu_rounds[$i]}" \
		'BEGIN{pcs = uss = "n/a"; if (cn > 0) {pcs = sprintf("%.1f µs", pc/cn); uss = sprintf("%.1f µs", uc/cn)}
		printf "| %s | %.0f | %.2f ms | %.0f%% | %s | %s | %s |\n", name, r/n, p/n, 100*(r/n)/b, pcs, uss, e}'
done
# per_round A B: the ratio of variant A to variant B in each round and
# their median. The variants of a round run minutes apart at most, so a
# round's ratio is less moved by the machine's slow drifts than the sums.
per_round() {
	awk -v a="${round_rps[$1]}" -v b="${round_rps[$2]}" 'BEGIN{
		k = split(a, x, " "); split(b, y, " ")
		for (j = 1; j <= k; j++) { r[j] = (y[j] > 0) ? x[j] / y[j] : 0; out = out sprintf(" %.2f", r[j]) }
		for (j = 1; j <= k; j++) for (l = j + 1; l <= k; l++) if (r[l] < r[j]) { t = r[j]; r[j] = r[l]; r[l] = t }
		med = (k % 2) ? r[(k + 1) / 2] : (r[k / 2] + r[k / 2 + 1]) / 2
		printf "per round:%s (median %.2f)", out, med }'
}
awk -v a="${sum_rps[2]}" -v b="${sum_rps[1]}" -v pr="$(per_round 2 1)" 'BEGIN{printf "\nThe plugin chain serves %.2fx the no-plugin route'"'"'s throughput (goal: at least 0.93x); %s.\n", a/b, pr}'
# The servers share one core, so their CPU per request bounds the
# throughput: the same ratio from CPU time, steadier than requests/s.
awk -v a="${sum_pcpu[1]}" -v b="${sum_ucpu[1]}" -v c="${sum_pcpu[2]}" -v d="${sum_ucpu[2]}" -v na="${cpu_rounds[1]}" -v nc="${cpu_rounds[2]}" \
	'BEGIN{if (na == 0 || nc == 0 || c+d == 0) {print "By CPU per request on the servers'"'"' core: n/a (no round counted: wrk reported no requests, or the only round was profiled)."; exit}
	printf "By CPU per request on the servers'"'"' core (gateway + upstream): %.2fx (chain %.1f + %.1f µs, no plugins %.1f + %.1f µs).\n", (a/na+b/na)/(c/nc+d/nc), c/nc, d/nc, a/na, b/na}'
if [ -n "$profiled" ]; then
	echo "CPU per request leaves out round 1 of \"$profiled\" (profiled: the pprof capture's own CPU)."
fi
awk -v a="${sum_rps[4]}" -v b="${sum_rps[1]}" -v c="${sum_rps[2]}" -v pr="$(per_round 4 1)" 'BEGIN{printf "The control route (the chain'"'"'s headers with fixed values, no plugin logic) serves %.2fx the no-plugin route'"'"'s throughput, %s; the chain serves %.2fx the control'"'"'s.\n", a/b, pr, c/a}'
awk -v a="${sum_rps[3]}" -v b="${sum_rps[1]}" -v pr="$(per_round 3 1)" 'BEGIN{printf "The wasm filter route serves %.2fx the no-plugin route'"'"'s throughput (goal: at least 0.85x); %s.\n", a/b, pr}'
if [ -n "${TRAEFIK:-}" ]; then
	awk -v a="${sum_rps[1]}" -v b="${sum_rps[5]}" -v pr="$(per_round 1 5)" 'BEGIN{printf "The gateway'"'"'s no-plugin route serves %.2fx Traefik'"'"'s (goal: at least 1x); %s.\n", a/b, pr}'
fi
if [ -z "${NO_NGINX:-}" ]; then
	last=$((n - 1))
	awk -v a="${sum_rps[1]}" -v b="${sum_rps[$last]}" -v c="${sum_rps[0]}" 'BEGIN{printf "The gateway'"'"'s no-plugin route serves %.2fx nginx'"'"'s; plain Caddy %.2fx (baselines, no goal).\n", a/b, c/b}'
fi
