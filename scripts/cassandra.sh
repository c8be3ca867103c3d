#!/usr/bin/env bash
# scripts/cassandra.sh — a private single-node Apache Cassandra for the storage
# tests (internal/backend/cassandra).
#
#   scripts/cassandra.sh [start] [PORT]  resolve Apache Cassandra (default 5.0.6,
#                                        EXTENDDB_CASSANDRA_VERSION) from Maven
#                                        Central into the cache if missing, start
#                                        it on the machine's Java 17 with private
#                                        directories on 127.0.0.1:PORT (default
#                                        EXTENDDB_CASSANDRA_PORT or 19042; the next
#                                        free port when taken), wait until the
#                                        native port answers, print the contact
#                                        point (127.0.0.1:PORT).
#   scripts/cassandra.sh stop            stop the node started by "start" (by PID).
#   scripts/cassandra.sh hosts           print the contact point of a running node.
#
# Cache: $EXTENDDB_CACHE (default $HOME/.cache/extenddb), outside the
# repository: m2/ holds the jars (~85 MB, resolved once), cassandra/ the node
# (cassandra.yaml, data, commit log, pid, port, logs). Test data only: the
# commit log syncs every 10 s, schema changes skip the system keyspace's
# fsyncs (-Dcassandra.unsafesystem=true, the flag Cassandra's own tests
# use: `extenddb migrate` of a keyspace 2.9 s -> 1.1 s warm) and a DROP
# takes no snapshot (auto_snapshot: false).
# Start takes 4-8 s on 2 cores thanks to -XX:TieredStopAtLevel=1 (C1 only;
# ~20 s without); RSS ~800 MB with the default 1 GB heap (EXTENDDB_CASSANDRA_HEAP).
# Cassandra 4.1 does not run on Java 17; 5.0.x does.
#
# EXTENDDB_CASSANDRA_FRESH=1 start: remove the node's data first (make test-all).
# Use: export EXTENDDB_TEST_CASSANDRA_HOSTS=$(scripts/cassandra.sh start)
set -euo pipefail

CACHE="${EXTENDDB_CACHE:-$HOME/.cache/extenddb}"
VERSION="${EXTENDDB_CASSANDRA_VERSION:-5.0.6}"
M2="$CACHE/m2"
RUN="$CACHE/cassandra"
PIDFILE="$RUN/cassandra.pid"
PORTFILE="$RUN/port"
CPFILE="$CACHE/cassandra-$VERSION.classpath"
HEAP="${EXTENDDB_CASSANDRA_HEAP:-1G}"

log() { echo "cassandra.sh: $*" >&2; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() { [[ -f "$PIDFILE" ]] && kill -0 "$(cat "$PIDFILE")" 2>/dev/null; }

free_port() {
	local p=$1 tries=0
	while port_busy "$p"; do
		tries=$((tries + 1))
		[[ $tries -gt 100 ]] && { log "no free port from $1"; exit 1; }
		p=$((p + 1))
	done
	echo "$p"
}

install() {
	[[ -s "$CPFILE" ]] && return
	command -v java >/dev/null || { log "java not found (Cassandra $VERSION needs Java 17)"; exit 1; }
	if ! command -v mvn >/dev/null; then
		[[ $(id -u) -eq 0 ]] || { log "mvn not found: install maven"; exit 1; }
		log "installing maven (apt-get)"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven >&2
	fi
	log "resolving org.apache.cassandra:cassandra-all:$VERSION into $M2"
	local d
	d=$(mktemp -d)
	cat >"$d/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>local</groupId><artifactId>extenddb-cassandra</artifactId><version>1</version><packaging>pom</packaging>
<dependencies><dependency><groupId>org.apache.cassandra</groupId><artifactId>cassandra-all</artifactId>
<version>$VERSION</version></dependency></dependencies></project>
EOF
	(cd "$d" && MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.passthrough=true" mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$M2" dependency:build-classpath \
		-Dmdep.outputFile="$d/cp.txt" -Dmdep.includeScope=runtime >&2)
	mkdir -p "$CACHE"
	mv "$d/cp.txt" "$CPFILE"
	rm -rf "$d"
}

hosts() { echo "127.0.0.1:$(cat "$PORTFILE")"; }

start() {
	mkdir -p "$RUN"
	if running; then hosts; return; fi
	install
	local port sport
	# Defaults below Linux's ephemeral range (32768-60999): a port there
	# can be taken by an outgoing connection between the check and the bind.
	if [[ -n "${EXTENDDB_CASSANDRA_FRESH:-}" ]]; then
		# A fresh node: no keyspaces left by earlier runs.
		rm -rf "$RUN"/{data,commitlog,saved_caches,hints,cdc_raw}
	fi
	port=$(free_port "${1:-${EXTENDDB_CASSANDRA_PORT:-19042}}")
	sport=$(free_port "${EXTENDDB_CASSANDRA_STORAGE_PORT:-17000}")
	mkdir -p "$RUN"/{data,commitlog,saved_caches,hints,cdc_raw,logs}
	cat >"$RUN/cassandra.yaml" <<EOF
cluster_name: extenddb-test
num_tokens: 1
initial_token: 0
partitioner: org.apache.cassandra.dht.Murmur3Partitioner
auto_bootstrap: false
commitlog_sync: periodic
commitlog_sync_period: 10000ms
commitlog_directory: $RUN/commitlog
data_file_directories: [$RUN/data]
saved_caches_directory: $RUN/saved_caches
hints_directory: $RUN/hints
cdc_raw_directory: $RUN/cdc_raw
seed_provider: [{class_name: org.apache.cassandra.locator.SimpleSeedProvider, parameters: [{seeds: "127.0.0.1:$sport"}]}]
listen_address: 127.0.0.1
rpc_address: 127.0.0.1
storage_port: $sport
native_transport_port: $port
start_native_transport: true
endpoint_snitch: SimpleSnitch
authenticator: AllowAllAuthenticator
concurrent_compactors: 1
auto_snapshot: false
memtable_heap_space: 128MiB
memtable_offheap_space: 128MiB
EOF
	cat >"$RUN/logback.xml" <<'EOF'
<configuration><appender name="O" class="ch.qos.logback.core.ConsoleAppender"><encoder>
<pattern>%-5level %date{ISO8601} %logger{0} - %msg%n</pattern></encoder></appender>
<root level="INFO"><appender-ref ref="O"/></root></configuration>
EOF
	local cp jamm mods=() m
	cp=$(cat "$CPFILE")
	jamm=$(tr ':' '\n' <"$CPFILE" | grep /jamm- | head -1)
	# JPMS flags from Cassandra's conf/jvm17-server.options.
	for m in java.base/jdk.internal.misc java.management.rmi/com.sun.jmx.remote.internal.rmi java.rmi/sun.rmi.registry \
		java.rmi/sun.rmi.server java.sql/java.sql java.base/java.lang.ref jdk.unsupported/sun.misc \
		jdk.compiler/com.sun.tools.javac.file jdk.attach/sun.tools.attach; do mods+=(--add-exports "$m=ALL-UNNAMED"); done
	for m in java.base/java.lang.module java.base/jdk.internal.loader java.base/jdk.internal.ref java.base/jdk.internal.reflect \
		java.base/jdk.internal.math java.base/jdk.internal.module java.base/jdk.internal.util.jar \
		jdk.management/com.sun.management.internal java.base/sun.nio.ch java.base/java.io java.base/java.lang.reflect \
		jdk.compiler/com.sun.tools.javac java.base/java.lang java.base/java.util; do mods+=(--add-opens "$m=ALL-UNNAMED"); done
	echo "$port" >"$PORTFILE"
	log "starting Cassandra $VERSION on 127.0.0.1:$port (log $RUN/logs/stdout.log)"
	local t0=$SECONDS
	# -XX:TieredStopAtLevel=1 (C1 only): start ~20 s -> 4-8 s on 2 cores.
	nohup java -Xms256m -Xmx"$HEAP" -Xss512k -XX:+UseG1GC -XX:TieredStopAtLevel=1 -XX:+ExitOnOutOfMemoryError \
		-XX:MaxDirectMemorySize=512m -XX:ActiveProcessorCount=2 -javaagent:"$jamm" "${mods[@]}" \
		-Djdk.attach.allowAttachSelf=true -Dio.netty.tryReflectionSetAccessible=true \
		-Dcassandra-foreground=yes -Dcassandra.config="file://$RUN/cassandra.yaml" -Dcassandra.storagedir="$RUN" \
		-Dcassandra.logdir="$RUN/logs" -Dlogback.configurationFile="$RUN/logback.xml" \
		-Dcassandra.skip_wait_for_gossip_to_settle=0 -Dcassandra.ring_delay_ms=0 -Dcassandra.superuser_setup_delay_ms=0 \
		-Dcassandra.unsafesystem=true \
		-cp "$cp" org.apache.cassandra.service.CassandraDaemon >"$RUN/logs/stdout.log" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	until port_busy "$port"; do
		if ! running; then
			log "Cassandra exited; log follows"
			tail -n 40 "$RUN/logs/stdout.log" >&2
			rm -f "$PIDFILE"
			exit 1
		fi
		if ((SECONDS - t0 > ${EXTENDDB_CASSANDRA_WAIT:-180})); then
			log "Cassandra did not answer on 127.0.0.1:$port within ${EXTENDDB_CASSANDRA_WAIT:-180}s"
			exit 1
		fi
		sleep 0.25
	done
	log "Cassandra $VERSION up on 127.0.0.1:$port (pid $(cat "$PIDFILE")) after $((SECONDS - t0))s"
	hosts
}

stop() {
	[[ -f "$PIDFILE" ]] || return 0
	local pid
	pid=$(cat "$PIDFILE")
	kill "$pid" 2>/dev/null || true
	for _ in $(seq 1 120); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
	if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
	rm -f "$PIDFILE"
	log "stopped Cassandra (pid $pid)"
}

case "${1:-start}" in
start) shift || true; start "${1:-}" ;;
stop) stop ;;
hosts) running && hosts || { log "not running"; exit 1; } ;;
[0-9]*) start "$1" ;;
*) echo "usage: $0 [start [PORT]|stop|hosts]" >&2; exit 2 ;;
esac
