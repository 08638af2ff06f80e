#!/usr/bin/env bash
# Configuration size versus the cost of a change and memory, on the built
# binary: for each size, a fresh gateway imports a document with that many
# routes (bench/scalegen: 100 services, exact and wildcard hosts, prefixes,
# one in ten regex paths) in one POST /api/v1/import, then changes one
# route, one plugin and one consumer CHANGES times each. Prints the import
# time, the p50 of each change until answered (persisted and live), and the
# gateway's RSS with one route and after the changes.
#
#   bash bench/scale.sh                  (make bench-scale)
#   SIZES="1 10000" CHANGES=50 bash bench/scale.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-1 10000 50000}
CHANGES=${CHANGES:-30}
BIN=./bin/caddy
[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }

work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

GW=127.0.0.1:19203 GWADMIN=127.0.0.1:19204 CADMIN=127.0.0.1:19205
api() { curl -fsS -o /dev/null -w '%{time_total}\n' -X "$1" "http://$GWADMIN$2" -H 'Content-Type: application/json' ${3:+--data-binary "$3"}; }
rss_mb() { awk '/VmRSS/ {printf "%.0f", $2/1024}' "/proc/$1/status"; }
p50() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]*1000}'; }

printf '| routes | import | route change p50 | plugin change p50 | consumer change p50 | RSS, 1 route | RSS after | RSS per route |\n'
printf '|---|---|---|---|---|---|---|---|\n'
base_rss=""
for n in $SIZES; do
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
		caddy_admin $CADMIN
	}
}
CF
	go run ./bench/scalegen -routes "$n" > "$work/doc.json"
	(cd "$work/gw" && exec "$OLDPWD/$BIN" run --config Caddyfile --adapter caddyfile >"$work/gw/log" 2>&1) &
	pid=$!
	for i in $(seq 1 100); do curl -fsS "http://$GWADMIN/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
	sleep 1
	rss1=$(rss_mb "$pid")
	import_s=$(api POST /api/v1/import "@$work/doc.json")
	route=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/routes/1 "{\"name\":\"r0\",\"service_id\":1,\"hosts\":[\"h0.example.com\"],\"paths\":[\"/\",\"/api/0\"],\"priority\":$i}"; done | p50)
	plugin=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/plugins/1 "{\"type\":\"key-auth\",\"scope\":\"route\",\"route_id\":1,\"ordering\":$((1000 + i))}"; done | p50)
	consumer=$(for i in $(seq 1 "$CHANGES"); do api PUT /api/v1/consumers/1 "{\"username\":\"bench\",\"custom_id\":\"c$i\"}"; done | p50)
	sleep 2
	rss=$(rss_mb "$pid")
	[ -z "$base_rss" ] && base_rss=$rss1
	per=$(awk -v a="$rss" -v b="$base_rss" -v n="$n" 'BEGIN { if (n > 1) printf "%.2f KB", (a-b)*1024/n; else print "-" }')
	printf '| %s | %.2f s | %s ms | %s ms | %s ms | %s MB | %s MB | %s |\n' "$n" "$import_s" "$route" "$plugin" "$consumer" "$rss1" "$rss" "$per"
	kill "$pid" && wait "$pid" 2>/dev/null || true
	pid=""
done
