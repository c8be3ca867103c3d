#!/usr/bin/env bash
# The full test run (make test-all, CI). Every server the tests need is
# installed if missing and started once, privately on 127.0.0.1, by its own
# script (scripts/moto.sh, postgres.sh, mongodb.sh, cassandra.sh); these
# set-up steps run concurrently, in the background. The layers run in four
# concurrent lanes started at once, each lane waiting only for the set-up
# steps its next layer needs, each layer's output in its own log under
# $EXTENDDB_CI_LOGS (default: a fresh temporary directory; the set-up
# steps' logs are its setup-*.log):
#
#   go     the Go tests under the race detector (SQLite, PostgreSQL,
#          every store), the streams soak and crash tests, the
#          aws-sdk-go-v2 tests on two servers sharing one PostgreSQL
#          database, the CI-sized scale benchmark (scripts/bench-scale.sh
#          --ci), the script tests
#   wire   the wire suite on --memory and SQLite (as soon as the binary and
#          moto are there), then on PostgreSQL; the browser tests (the
#          JavaScript SDK v3, the web console), then the fuzz targets
#   mongo  the MongoDB backend's Go tests, the wire suite and the sdk tests
#          on two servers sharing one database (FerretDB on its
#          PostgreSQL handler unless EXTENDDB_TEST_MONGODB_URI names a
#          server)
#   cass   lint (gofmt, go vet, staticcheck) while the set-up runs, then
#          scripts/test-cassandra.sh on a fresh node started at the
#          beginning (EXTENDDB_TEST_ALL_CASSANDRA=0 leaves it out)
#
# and then, alone on a quiet machine once every server is stopped, the
# abuse test (it compares p99 under attack with the idle p99). The end is
# one line per layer with its wall time and counts, and a total
# "N passed, N failed, N skipped"; the exit status is non-zero when any
# layer failed, and the tail of each failed layer's log is printed.
#
# Adding a layer is one line in a lane: `layer NAME KIND command...`
# (KIND: go for `go test -v` output, gosum for scripts/go-test.sh's, pytest,
# cass for the summary lines of
# scripts/test-cassandra.sh, one for a command that passes or fails as a
# whole).
set -uo pipefail
cd "$(dirname "$0")/.."
export EXTENDDB_CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
mkdir -p "$EXTENDDB_CACHE"
LOGS="${EXTENDDB_CI_LOGS:-$(mktemp -d -t extenddb-ci.XXXXXX)}"
mkdir -p "$LOGS"
export EXTENDDB_BIN="$PWD/bin/extenddb"
T0=$SECONDS
CASS="${EXTENDDB_TEST_ALL_CASSANDRA:-1}"

stop_servers() {
	scripts/moto.sh stop >/dev/null 2>&1 || true
	scripts/postgres.sh stop >/dev/null 2>&1 || true
	scripts/mongodb.sh stop >/dev/null 2>&1 || true
	[[ "$CASS" == 1 ]] && { scripts/cassandra.sh stop >/dev/null 2>&1 || true; }
}
cleanup() {
	# Servers the lanes started (extenddb serve) are children of the lanes.
	pkill -P $$ >/dev/null 2>&1 || true
	stop_servers
}
trap cleanup EXIT

# count KIND LOG RC: "passed failed skipped" of a layer's log.
count() {
	local kind=$1 log=$2 rc=$3 p=0 f=0 s=0 last num
	if [[ $kind == gosum ]]; then
		# scripts/go-test.sh's own summary line.
		read -r p f s < <(grep -E '^go: [0-9]+ passed' "$log" | tail -1 | sed -E 's/^go: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped.*/\1 \2 \3/')
		p=${p:-0} f=${f:-0} s=${s:-0}
	fi
	if [[ $kind == go ]]; then
		p=$(grep -cE '^\s*--- PASS' "$log")
		f=$(grep -cE '^\s*--- FAIL' "$log")
		s=$(grep -cE '^\s*--- SKIP' "$log")
	fi
	if [[ $kind == pytest ]]; then
		while read -r last; do
			num() { grep -oE "[0-9]+ $1" <<<"$last" | grep -oE '^[0-9]+' || echo 0; }
			p=$((p + $(num passed)))
			f=$((f + $(num failed) + $(num error) + $(num errors)))
			s=$((s + $(num skipped)))
		done < <(grep -E '^=*\s*[0-9]+ (passed|failed|error)' "$log" | sed 's/=//g')
	fi
	if [[ $kind == cass ]]; then
		# scripts/test-cassandra.sh ends with one summary line per layer.
		while read -r last; do
			num() { grep -oE "[0-9]+ $1" <<<"$last" | grep -oE '^[0-9]+' || echo 0; }
			p=$((p + $(num passed))); f=$((f + $(num failed) + $(num error) + $(num errors))); s=$((s + $(num skipped)))
		done < <(grep -E '^(go on cassandra|wire on cassandra|sdk on two cassandra servers):' "$log")
	fi
	if [[ $kind == one ]]; then
		if [[ $rc -eq 0 ]]; then p=1; else f=1; fi
	fi
	if [[ $rc -ne 0 && $f -eq 0 ]]; then f=1; fi
	echo "$p $f $s"
}

# child_ticks: sets CHILD_TICKS to the CPU (user + system, in clock
# ticks) of this shell's finished children, their own finished children
# included. It reads /proc rather than `times`, which a command
# substitution would run in a subshell of its own.
child_ticks() {
	local stat
	read -r stat <"/proc/$BASHPID/stat"
	stat=${stat##*) }
	# shellcheck disable=SC2086
	set -- $stat
	CHILD_TICKS=$((${14} + ${15}))
}

# proc_cpu PATTERN: CPU seconds of the processes whose command line
# matches PATTERN, with their finished children (PostgreSQL's backends).
proc_cpu() {
	local pid tck total=0
	tck=$(getconf CLK_TCK)
	for pid in $(pgrep -f "$1"); do
		[[ -r /proc/$pid/stat ]] || continue
		total=$((total + $(awk '{ sub(/^.*\) /, ""); print $12 + $13 + $14 + $15 }' "/proc/$pid/stat")))
	done
	echo $((total / tck))
}

# layer NAME KIND COMMAND...: runs one layer into $LOGS/NAME.log and
# records "rc seconds passed failed skipped cpu-seconds" in
# $LOGS/NAME.result (the CPU of the layer's own processes, not of the
# shared servers).
layer() {
	local name=$1 kind=$2 t=$SECONDS rc cpu0
	shift 2
	echo "== $(date -u +%T) start $name"
	child_ticks
	cpu0=$CHILD_TICKS
	"$@" >"$LOGS/$name.log" 2>&1
	rc=$?
	local c
	c=$(count "$kind" "$LOGS/$name.log" "$rc")
	child_ticks
	echo "$rc $((SECONDS - t)) $c $(((CHILD_TICKS - cpu0) / $(getconf CLK_TCK)))" >"$LOGS/$name.result"
	echo "== $(date -u +%T) end   $name: exit $rc after $((SECONDS - t))s ($c passed/failed/skipped)"
}

wait_ready() { # PORT...
	local port
	for port in "$@"; do
		for _ in $(seq 1 150); do curl -sf "http://127.0.0.1:$port/ready" >/dev/null && break; sleep 0.1; done
	done
}

# sdk_two NAME PORT1 PORT2 SERVE_ARGS [ENV=VALUE...]: the aws-sdk-go-v2
# tests with their clients split across two servers on one database.
sdk_two() {
	local name=$1 p1=$2 p2=$3 args=$4 spids=() rc
	shift 4
	for port in $p1 $p2; do
		# shellcheck disable=SC2086
		bin/extenddb serve $args --listen 127.0.0.1:$port >"$LOGS/$name-serve-$port.log" 2>&1 &
		spids+=($!)
	done
	wait_ready "$p1" "$p2"
	env "$@" EXTENDDB_ENDPOINTS="http://127.0.0.1:$p1,http://127.0.0.1:$p2" go test -count=1 -v ./tests/sdk/
	rc=$?
	kill "${spids[@]}" 2>/dev/null
	wait "${spids[@]}" 2>/dev/null
	return $rc
}

lint() {
	local out rc=0
	out=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.venv/*'))
	if [[ -n "$out" ]]; then echo "gofmt needed:"; echo "$out"; rc=1; fi
	go vet ./... || rc=1
	"$(scripts/staticcheck.sh)" ./... || rc=1
	return $rc
}

scripts_tests() {
	local t rc=0
	for t in tests/scripts/*.sh; do "$t" || { echo "FAILED: $t"; rc=1; }; done
	return $rc
}

# ---- set-up, concurrently ---------------------------------------------------
# On a fresh machine the set-up is mostly waiting on the network (apt,
# pip, the Go module proxy, Maven Central) and two compilations (extenddb,
# FerretDB): its steps run concurrently, each in the background, and the
# layer that needs no server (lint) starts at once. A lane waits only for
# the steps its next layer needs (`need`).
echo "== extenddb test-all: $(date -u +%FT%TZ), $(nproc) cores, logs in $LOGS"

# step NAME COMMAND...: runs a set-up step in the background: its stdout
# in $LOGS/setup-NAME.out, its stderr in $LOGS/setup-NAME.log, its exit
# status in $LOGS/setup-NAME.rc once it ends.
step() {
	local name=$1
	shift
	(
		"$@" >"$LOGS/setup-$name.out" 2>"$LOGS/setup-$name.log"
		echo $? >"$LOGS/setup-$name.rc.tmp"
		child_ticks
		mv "$LOGS/setup-$name.rc.tmp" "$LOGS/setup-$name.rc"
		echo "== $(date -u +%T) set-up $name done after $((SECONDS - T0))s, cpu $((CHILD_TICKS / $(getconf CLK_TCK)))s (exit $(cat "$LOGS/setup-$name.rc"))"
	) &
}

# need NAME...: waits for set-up steps to end; returns non-zero, with the
# tail of the step's log, when one of them failed.
need() {
	local name
	for name in "$@"; do
		while [[ ! -f "$LOGS/setup-$name.rc" ]]; do sleep 1; done
		if [[ $(cat "$LOGS/setup-$name.rc") != 0 ]]; then
			echo "set-up step $name failed; the end of its log:"
			tail -30 "$LOGS/setup-$name.log"
			return 1
		fi
	done
}

# servers: the databases the lanes share, once their servers are up;
# writes the lanes' environment to $LOGS/setup-servers.out.
servers() {
	need build moto postgres ferretdb || return 1
	local moto_endpoint pg_dsn mongo_uri db wire_dsn sdk_dsn mongo_db
	moto_endpoint=$(cat "$LOGS/setup-moto.out")
	pg_dsn=$(cat "$LOGS/setup-postgres.out")
	mongo_uri="${EXTENDDB_TEST_MONGODB_URI:-}"
	if [[ -z "$mongo_uri" ]]; then
		# FerretDB keeps its data in a database of this PostgreSQL server
		# (a third of the CPU per operation of its SQLite handler).
		psql "$pg_dsn" -qc "CREATE DATABASE extenddb_ferret_$$" >/dev/null || return 1
		mongo_uri=$(EXTENDDB_MONGO_POSTGRES_URL="${pg_dsn%/*}/extenddb_ferret_$$?sslmode=disable" scripts/mongodb.sh start) || return 1
	fi
	db="extenddb_wire_$$"
	psql "$pg_dsn" -qc "CREATE DATABASE $db" >/dev/null || return 1
	wire_dsn="${pg_dsn%/*}/$db?sslmode=disable"
	bin/extenddb migrate --backend postgres --dsn "$wire_dsn" >/dev/null || return 1
	psql "$pg_dsn" -qc "CREATE DATABASE ${db}_sdk" >/dev/null || return 1
	sdk_dsn="${pg_dsn%/*}/${db}_sdk?sslmode=disable"
	bin/extenddb migrate --backend postgres --dsn "$sdk_dsn" >/dev/null || return 1
	mongo_db="extenddb_wire_$$"
	bin/extenddb migrate --backend mongodb --mongodb-uri "$mongo_uri" --mongodb-database "$mongo_db" >/dev/null || return 1
	echo "moto $moto_endpoint; postgres $pg_dsn; mongodb $mongo_uri" >&2
	printf 'export EXTENDDB_TEST_MOTO_ENDPOINT=%q EXTENDDB_TEST_POSTGRES_DSN=%q EXTENDDB_TEST_MONGODB_URI=%q\n' \
		"$moto_endpoint" "$pg_dsn" "$mongo_uri"
	printf 'wire_dsn=%q sdk_dsn=%q mongo_args=%q\n' "$wire_dsn" "$sdk_dsn" \
		"--backend mongodb --mongodb-uri $mongo_uri --mongodb-database $mongo_db"
}

# use_servers: waits for the servers and takes their environment.
use_servers() {
	need servers || return 1
	# shellcheck disable=SC1091
	source "$LOGS/setup-servers.out"
}

# browser_deps: Chromium from Debian, after PostgreSQL's apt-get (one
# dpkg at a time).
browser_deps() {
	need postgres || return 1
	scripts/chromium.sh
}

export EXTENDDB_TEST_STORES="fs,gofakes3,moto"
[[ "$CASS" == 1 ]] && step cassandra env EXTENDDB_CASSANDRA_FRESH=1 scripts/cassandra.sh start
step build make -s build
step moto scripts/moto.sh start
step postgres scripts/postgres.sh start
if [[ -z "${EXTENDDB_TEST_MONGODB_URI:-}" ]]; then
	step ferretdb env EXTENDDB_MONGO_HANDLER=postgresql scripts/mongodb.sh build
else
	step ferretdb true
fi
step wire-venv tests/wire/run.sh --setup-only
step browser-deps browser_deps
step servers servers

# ---- lanes -----------------------------------------------------------------
lane_go() {
	use_servers || return
	# Every package under the race detector, on SQLite and PostgreSQL and
	# every store (the MongoDB and Cassandra packages run in their lanes).
	# -race also turns on the compiler's checkptr instrumentation; it is
	# turned off for modernc.org/sqlite's machine-translated C alone (still
	# race-instrumented), where checking every unsafe.Pointer conversion
	# was more than half of the SQLite tests' CPU. Our packages keep it.
	layer go-race gosum env EXTENDDB_TEST_BACKENDS=sqlite,postgres scripts/go-test.sh -race \
		-gcflags=modernc.org/...=-d=checkptr=0
	# DynamoDB Streams, the long form: 8 writers for 20 s while a consumer
	# follows every shard (replay equals the table), and the same load with
	# the server SIGKILLed and restarted, on SQLite and on PostgreSQL.
	layer streams go env EXTENDDB_STREAM_CONSUMER_SECONDS=20 go test -count=1 -v -run 'TestStreamConsumer$|TestStreamCrash$' ./tests/sdk/
	layer streams-postgres go env EXTENDDB_STREAM_CRASH_POSTGRES_DSN="$sdk_dsn" EXTENDDB_STREAM_CONSUMER_SECONDS=20 \
		go test -count=1 -v -run 'TestStreamCrash$' ./tests/sdk/
	# Every sdk test on two servers sharing a PostgreSQL database, the
	# same database as streams-postgres's, after it in this lane.
	layer sdk-postgres go sdk_two sdk-postgres 18101 18102 "--backend postgres --dsn $sdk_dsn"
	# The CI-sized scale benchmark (10k and 100k items, 1,000 tables,
	# loose ratio checks; about a minute).
	layer scale one env EXTENDDB_BIN=bin/extenddb scripts/bench-scale.sh --ci --out "$LOGS/scale"
	layer scripts one scripts_tests
}

lane_wire() {
	# wire-memory and wire-sqlite need no database, only moto (the stores
	# and buckets of a few tests).
	need build moto wire-venv || return
	local moto
	moto=$(cat "$LOGS/setup-moto.out")
	layer wire-memory pytest env EXTENDDB_TEST_MOTO_ENDPOINT="$moto" tests/wire/run.sh -q -n 2
	layer wire-sqlite pytest env EXTENDDB_TEST_MOTO_ENDPOINT="$moto" EXTENDDB_TEST_BACKEND=sqlite EXTENDDB__STORAGE__MEMORY_ENGINE=sqlite \
		EXTENDDB_SERVE_ARGS="--memory" tests/wire/run.sh -q -n 2
	use_servers || return
	# One server per worker on one database: two servers share it.
	layer wire-postgres pytest env EXTENDDB_TEST_BACKEND=postgres \
		EXTENDDB_SERVE_ARGS="--backend postgres --dsn $wire_dsn" tests/wire/run.sh -q -n 2
	# Without Chromium the two browser layers do not run (and fail the run
	# as "did not run"); the fuzz targets still do.
	if need browser-deps; then
		# Headless Chromium runs the JavaScript SDK v3 from another origin.
		layer browser one tests/browser/run.sh
		# Headless Chromium drives the web console (tables, items, queries,
		# backups, hostile names, signing in with keys).
		layer console one tests/console/run.sh
	fi
	# The fuzz targets, whose time is fixed (60 s each) whatever the load:
	# this lane ends first. One fuzzing process per target: a second would
	# take its core from the other lanes, which are CPU-bound.
	layer fuzz one env EXTENDDB_FUZZ_WORKERS=1 scripts/fuzz.sh 60s
}

# The MongoDB backend's own tests (backendtest, the ledger, snapshots,
# catalogs) and the served backend.
go_mongodb() {
	local rc=0
	# The ledger's transfer soak runs later, on a quiet machine (ledger-mongodb).
	# go test's default parallelism (GOMAXPROCS): more parallel subtests
	# load FerretDB until a catalog claim outlives its lease, and finish no
	# sooner, since FerretDB's CPU is what they wait on.
	EXTENDDB_TEST_BACKENDS=mongodb go test -count=1 -v -timeout 20m -skip 'TestLedger/ConcurrentTransfers' ./internal/backend/mongodb/ || rc=1
	EXTENDDB_TEST_BACKENDS=mongodb go test -count=1 -v -timeout 10m -run Mongo ./internal/server/ || rc=1
	return $rc
}

# The mongo lane: the MongoDB backend on FerretDB, in Go, on the wire
# and in the sdk tests.
lane_mongo() {
	use_servers || return
	layer go-mongodb go go_mongodb
	layer wire-mongodb pytest env EXTENDDB_TEST_BACKEND=mongodb EXTENDDB_SERVE_ARGS="$mongo_args" tests/wire/run.sh -q -n 2
	# Every sdk test, the streams consumer included (writers on both servers).
	layer sdk-mongodb go sdk_two sdk-mongodb 18103 18104 "$mongo_args"
}

cassandra_layer() {
	if ! need cassandra >"$LOGS/cassandra.log" 2>&1; then
		echo "1 0 0 1 0" >"$LOGS/cassandra.result"
		return
	fi
	use_servers || return
	layer cassandra cass env -u EXTENDDB_TEST_BACKENDS EXTENDDB_TEST_CASSANDRA_HOSTS="$(cat "$LOGS/setup-cassandra.out")" scripts/test-cassandra.sh
}

# The cass lane: the layers that need no server while the set-up runs
# and the node boots (lint), then Cassandra alone (its Go tests, the wire
# suite and the sdk tests on two servers sharing a keyspace).
lane_cass() {
	layer lint one lint
	[[ "$CASS" == 1 ]] && cassandra_layer
}

layers=(lint go-race fuzz scripts wire-memory wire-sqlite wire-postgres browser console scale go-mongodb wire-mongodb sdk-mongodb
	sdk-postgres streams streams-postgres)
[[ "$CASS" == 1 ]] && layers+=(cassandra)
# The lanes' files exist before the progress tail below names them.
touch "$LOGS"/lane-{go,wire,mongo,cass}.out
lane_go >"$LOGS/lane-go.out" 2>&1 &
lane_wire >"$LOGS/lane-wire.out" 2>&1 &
lane_mongo >"$LOGS/lane-mongo.out" 2>&1 &
lane_cass >"$LOGS/lane-cass.out" 2>&1 &
# Progress as the lanes go.
tail -q -n +1 -F "$LOGS"/lane-*.out 2>/dev/null &
tailpid=$!
wait $(jobs -p | grep -v "^$tailpid$") 2>/dev/null
sleep 1
kill $tailpid 2>/dev/null

# The servers' environment, for the layers after the lanes (a failed
# set-up has failed the lanes already).
use_servers >/dev/null 2>&1 || true

# The transaction ledger's soak on FerretDB (four coordinators, a fifth
# of them dying, readers, a plain writer, a sweeper) after the lanes: on
# a FerretDB loaded by the lanes its requests pass the client's timeout.
layers+=(ledger-mongodb)
layer ledger-mongodb go env EXTENDDB_TEST_BACKENDS=mongodb go test -count=1 -v -timeout 5m -run 'TestLedger/ConcurrentTransfers' ./internal/backend/mongodb/

# The abuse test last and alone: every server is stopped first, so that
# nothing else loads the two cores while its p99 is compared with the
# idle p99. Before that, the servers' own CPU.
server_cpu="postgres $(proc_cpu '^(/usr/lib/postgresql/.*/bin/postgres|postgres: )') s, ferretdb $(proc_cpu ferretdb-v) s, cassandra $(proc_cpu CassandraDaemon) s, moto $(proc_cpu moto) s"
stop_servers
layers+=(abuse)
layer abuse go env EXTENDDB_TEST_ABUSE=1 go test -count=1 -v -run 'TestAbuse$' ./tests/abuse/

# ---- summary -----------------------------------------------------------------
tp=0 tf=0 ts=0 failed=()
echo "== layers (wall time, counts)"
for l in "${layers[@]}"; do
	if [[ ! -f "$LOGS/$l.result" ]]; then
		printf '%-18s did not run\n' "$l:"
		failed+=("$l"); tf=$((tf + 1)); continue
	fi
	read -r rc secs p f s cpu <"$LOGS/$l.result"
	printf '%-18s %4ss  cpu %5ss  %s passed, %s failed, %s skipped\n' "$l:" "$secs" "${cpu:-?}" "$p" "$f" "$s"
	tp=$((tp + p)); tf=$((tf + f)); ts=$((ts + s))
	[[ $rc -ne 0 || $f -ne 0 ]] && failed+=("$l")
done
for l in "${failed[@]:-}"; do
	[[ -z "$l" || ! -f "$LOGS/$l.log" ]] && continue
	echo "== FAILED layer $l: the end of $LOGS/$l.log"
	grep -E -B2 -A25 '^\s*--- FAIL|^panic:|^FAIL|FAILED|Error|error:' "$LOGS/$l.log" | tail -80
	tail -20 "$LOGS/$l.log"
done
cass_note=""
[[ "$CASS" == 1 ]] || cass_note=" (cassandra NOT run: EXTENDDB_TEST_ALL_CASSANDRA=0)"
echo "== test-all: $((SECONDS - T0))s wall; backends sqlite, postgres, mongodb$([[ "$CASS" == 1 ]] && echo ", cassandra"), memory; stores fs, gofakes3, moto$cass_note"
echo "== servers' CPU: $server_cpu"
echo "$tp passed, $tf failed, $ts skipped"
[[ ${#failed[@]} -eq 0 || -z "${failed[*]}" ]]
