#!/usr/bin/env bash
# PostgreSQL for distributed `mopt tune` (several workers on one optuna study) and its tests:
# install Debian's server, start the cluster listening on loopback only, create a role and a
# database. Idempotent: an installed server, a running cluster, an existing role or database
# are left as they are. Needs root (apt-get, su postgres). Prints the storage URL at the end.
set -euo pipefail

PG_USER=${PG_USER:-mopt}
PG_PASSWORD=${PG_PASSWORD:-mopt}
PG_DB=${PG_DB:-mopt_test}
PG_PORT=${PG_PORT:-5432}

if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1; then
  echo "== installing PostgreSQL (Debian package)" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
fi
VERSION=$(ls /usr/lib/postgresql | sort -V | tail -n 1)

if ! pg_lsclusters -h | awk -v v="$VERSION" '$1 == v && $2 == "main"' | grep -q .; then
  pg_createcluster "$VERSION" main --port "$PG_PORT" >&2
fi
# Loopback only, whatever the cluster was configured with before.
pg_conftool "$VERSION" main set listen_addresses 'localhost' >&2
if ! pg_lsclusters -h | awk -v v="$VERSION" '$1 == v && $2 == "main" {print $4}' \
    | grep -q online; then
  echo "== starting PostgreSQL $VERSION" >&2
  # the server outlives this script: it must not hold what the caller holds open (a lock's
  # descriptor, a pipe), so descriptors 3-9 are closed for it
  pg_ctlcluster "$VERSION" main start >&2 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-
fi
PORT=$(pg_lsclusters -h | awk -v v="$VERSION" '$1 == v && $2 == "main" {print $3}')
for _ in $(seq 1 60); do
  pg_isready -q -h 127.0.0.1 -p "$PORT" && break
  sleep 0.5
done
pg_isready -h 127.0.0.1 -p "$PORT" >&2

as_postgres() { su postgres -c "psql -p $PORT -v ON_ERROR_STOP=1 -tAc \"$1\""; }
if [ "$(as_postgres "SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER'")" != 1 ]; then
  as_postgres "CREATE ROLE $PG_USER LOGIN PASSWORD '$PG_PASSWORD'" >&2
fi
if [ "$(as_postgres "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != 1 ]; then
  as_postgres "CREATE DATABASE $PG_DB OWNER $PG_USER" >&2
fi
echo "postgresql+psycopg2://$PG_USER:$PG_PASSWORD@127.0.0.1:$PORT/$PG_DB"
