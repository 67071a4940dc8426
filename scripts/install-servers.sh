#!/usr/bin/env bash
# Installs the real servers (and the headless chromium) the tests and the demo use, from Debian's
# packages, when they are missing. Needs root for apt-get; without root it
# only reports what is missing.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
have redis-server || need+=(redis-server)
have redis-cli || need+=(redis-tools)
have memcached || need+=(memcached)
have memcaslap || need+=(libmemcached-tools)
ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || need+=(postgresql)
# the peers the ring tests (ring/) check key placement against: Ruby's dalli
# and redis-rb, libmemcached (a C driver built by the test), twemproxy
have ruby || need+=(ruby)
if have ruby; then
  ruby -e "require 'dalli'" >/dev/null 2>&1 || need+=(ruby-dalli)
  ruby -e "require 'redis/distributed'" >/dev/null 2>&1 || need+=(ruby-redis)
else
  need+=(ruby-dalli ruby-redis)
fi
# the Ruby gem (rb/) and its tests: Debian's gems only (the gem registry is not reached);
# ffi binds Debian's libsnappy and libzstd instead of a compressor of our own
if have ruby; then
  for g in msgpack:ruby-msgpack ffi:ruby-ffi active_support:ruby-activesupport rails:ruby-rails \
           minitest:ruby-minitest connection_pool:ruby-connection-pool; do
    ruby -e "require '${g%%:*}'" >/dev/null 2>&1 || need+=("${g#*:}")
  done
else
  need+=(ruby-msgpack ruby-ffi ruby-activesupport ruby-rails ruby-minitest ruby-connection-pool)
fi
ls /usr/lib/x86_64-linux-gnu/libsnappy.so.1* >/dev/null 2>&1 || ls /usr/lib/*/libsnappy.so.1* >/dev/null 2>&1 || need+=(libsnappy1v5)
ls /usr/lib/*/libzstd.so.1* >/dev/null 2>&1 || need+=(libzstd1)
have cc || need+=(gcc)
[ -f /usr/include/libmemcached/memcached.h ] || need+=(libmemcached-dev)
have nutcracker || need+=(nutcracker)
# Kafka and Debezium for the change-event tests (internal/harness/kafka, cdc/debezium): Maven
# fetches the jars from Maven Central; Java 17 runs them
have java || need+=(openjdk-17-jdk-headless)
have mvn || need+=(maven)
# make soak also checks Debezium's MySQL connector against MariaDB (KURA_SOAK set)
if [ -n "${KURA_SOAK:-}" ]; then have mariadbd || need+=(mariadb-server); fi
# headless browser for the HTML tests (internal/harness/browsertest: kura ui, reports)
have chromium || have chromium-browser || need+=(chromium)

if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "missing: ${need[*]} (run as root, or: sudo apt-get install -y ${need[*]})" >&2
  if [ "${CI:-}" = true ]; then exit 1; fi
  exit 0
fi
echo "installing: ${need[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the packaged services; the tests run private instances, so
# stop the system ones to keep their ports and CPU free.
for svc in redis-server memcached postgresql nutcracker mariadb; do
  (command -v systemctl >/dev/null && systemctl stop "$svc" 2>/dev/null) || service "$svc" stop >/dev/null 2>&1 || true
done
