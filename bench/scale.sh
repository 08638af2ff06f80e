#!/usr/bin/env bash
# Configuration size versus the cost of a change, memory, and throughput,
# on the built binary. For each case a fresh gateway imports a generated
# document (bench/scalegen: exact and wildcard hosts, prefixes, one in ten
# regex paths) in one POST /api/v1/import, then changes one route, one
# plugin, one consumer, one credential (created and deleted) and one
# target CHANGES times each, and serves route 1 with wrk. Cases:
#
#   - SIZES routes over 100 services with one target each;
#   - SERVICES services with two targets each and one route per service.
#
# Prints the import time, the p50 of each change until answered (persisted
# and live), the gateway's RSS with one route and after the changes, the
# requests/s on route 1 (its key-auth plugin included), then the goals'
# ratios: requests/s at the largest size against 1 route, and the route
# match at 50,000 routes against 10 (go test -bench Match).
#
#   bash bench/scale.sh                  (make bench-scale)
#   SIZES="1 10000" SERVICES= CHANGES=50 THROUGHPUT=0 bash bench/scale.sh
#   SIZES= HEALTH_INTERVAL=1h bash bench/scale.sh   (active checks of the
#                                        targets every hour, not every 10 s)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1 10000 50000}
SERVICES=${SERVICES-5000}
CHANGES=${CHANGES:-30}
THROUGHPUT=${THROUGHPUT:-1}
HEALTH_INTERVAL=${HEALTH_INTERVAL:-}
DURATION=${DURATION:-5s}
BIN=./bin/caddy
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
if [ "$THROUGHPUT" = 1 ] && ! command -v wrk >/dev/null; then
	echo "wrk is missing (make bench-proxy installs it); THROUGHPUT=0 skips the req/s column" >&2
	exit 1
fi

work=$(mktemp -d)
pid="" upid=""
cleanup() {
	for p in $pid $upid; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

UP1=127.0.0.1:19201 UP2=127.0.0.1:19202
GW=127.0.0.1:19203 GWADMIN=127.0.0.1:19204 CADMIN=127.0.0.1:19205
cat > "$work/upstream.caddyfile" <<CF
{
	admin off
	auto_https off
}
http://$UP1, http://$UP2 {
	respond "hello from the upstream, a small body of about sixty bytes." 200
}
CF
(cd "$work" && exec "$OLDPWD/$BIN" run --config upstream.caddyfile --adapter caddyfile >"$work/upstream.log" 2>&1) &
upid=$!

api() { curl -fsS -o /dev/null -w '%{time_total}\n' -X "$1" "http://$GWADMIN$2" -H 'Content-Type: application/json' ${3:+--data-binary "$3"}; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
p50() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1000}'; }
reqs() {
	wrk -t 2 -c 32 -d "$DURATION" -H 'Host: h0.example.com' -H 'apikey: bench-key' "http://$GW/api/0" 2>/dev/null |
		awk '/Requests\/sec/ {printf "%.0f", $2} /Non-2xx/ {print "non-2xx answers" > "/dev/stderr"; exit 1}'
}

# run ROUTES SERVICES TARGETS: one case, one table row.
base_rss="" rps_first="" rps_last="" last_n=""
run() {
	local n=$1 nsvc=$2 ntg=$3
	rm -rf "$work/gw" && mkdir -p "$work/gw"
	cat > "$work/gw/Caddyfile" <<CF
{
	admin $CADMIN
	auto_https off
	gateway {
		admin_listen $GWADMIN
		database sqlite $work/gw/gw.db
		http_listen $GW
		https_listen 127.0.0.1:19206
		caddy_admin $CADMIN${HEALTH_INTERVAL:+
		health_interval $HEALTH_INTERVAL}
	}
}
CF
	go run ./bench/scalegen -routes "$n" -services "$nsvc" -targets "$ntg" -upstream "$UP1" > "$work/doc.json"
	(cd "$work/gw" && exec "$OLDPWD/$BIN" run --config Caddyfile --adapter caddyfile >"$work/gw/log" 2>&1) &
	pid=$!
	for i in $(seq 1 100); do curl -fsS "http://$GWADMIN/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
	sleep 1
	local rss1 import_s route plugin consumer cred target rss per rps="-"
	rss1=$(rss_mb "$pid")
	import_s=$(api POST /api/v1/import "@$work/doc.json")
	route=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/routes/1 "{\"name\":\"r0\",\"service_id\":1,\"hosts\":[\"h0.example.com\"],\"paths\":[\"/\",\"/api/0\"],\"priority\":$i}"; done | p50)
	plugin=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/plugins/1 "{\"type\":\"key-auth\",\"scope\":\"route\",\"route_id\":1,\"ordering\":$((1000 + i))}"; done | p50)
	consumer=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/consumers/1 "{\"username\":\"bench\",\"custom_id\":\"c$i\"}"; done | p50)
	cred=$(for i in $(seq 1 "$CHANGES"); do
		# The answer's id, then the time: the store may reuse ids.
		out=$(curl -fsS -w '\n%{time_total}' -X POST "http://$GWADMIN/api/v1/consumers/1/credentials" \
			-H 'Content-Type: application/json' --data-binary "{\"type\":\"key-auth\",\"key\":\"bench-key-$i\"}")
		echo "${out##*$'\n'}"
		id=$(printf '%s' "${out%$'\n'*}" | sed -E 's/.*"id":([0-9]+).*/\1/')
		api DELETE "/api/v1/credentials/$id"
	done | p50)
	target=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/targets/1 "{\"host\":\"${UP1%:*}\",\"port\":${UP1##*:},\"weight\":$((100 + i))}"; done | p50)
	sleep 2
	rss=$(rss_mb "$pid")
	[ -z "$base_rss" ] && base_rss=$rss1
	per=$(awk -v a="$rss" -v b="$base_rss" -v n="$n" -v s="$nsvc" 'BEGIN { if (n > 1 && s == 100) printf "%.2f KB", (a-b)*1024/n; else print "-" }')
	if [ "$THROUGHPUT" = 1 ]; then
		rps=$(reqs)
		if [ "$nsvc" = 100 ]; then
			[ -z "$rps_first" ] && rps_first=$rps
			rps_last=$rps last_n=$n
		fi
	fi
	printf '| %s | %s x %s | %.2f s | %s ms | %s ms | %s ms | %s ms | %s ms | %s MB | %s MB | %s | %s |\n' \
		"$n" "$nsvc" "$ntg" "$import_s" "$route" "$plugin" "$consumer" "$cred" "$target" "$rss1" "$rss" "$per" "$rps"
	kill "$pid" && wait "$pid" 2>/dev/null || true
	pid=""
}

echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| routes | services x targets | import | route change p50 | plugin change p50 | consumer change p50 | credential change p50 | target change p50 | RSS, 1 route | RSS after | RSS per route | req/s route 1 |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
for n in $SIZES; do
	run "$n" 100 1
done
[ -n "$SERVICES" ] && run "$SERVICES" "$SERVICES" 2

if [ -n "$rps_first" ] && [ -n "$last_n" ]; then
	awk -v a="$rps_last" -v b="$rps_first" -v n="$last_n" 'BEGIN { printf "req/s at %s routes / 1 route: %.3f (goal: at least 0.95)\n", n, a/b }'
fi
# The route match at 50,000 routes against 10 (goal: within 2x), best of
# three runs each.
go test -run '^$' -bench '^BenchmarkMatch$/routes=(10|50000)$' -count 3 ./modules/router/ |
	awk '/BenchmarkMatch\/routes=10-/ { if (!a || $3 < a) a = $3 }
	     /BenchmarkMatch\/routes=50000-/ { if (!b || $3 < b) b = $3 }
	     END { if (a && b) printf "route match at 50,000 routes / 10 routes: %.0f / %.0f ns = %.2fx (goal: within 2x)\n", b, a, b/a }'
