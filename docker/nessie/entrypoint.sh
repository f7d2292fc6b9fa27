#!/bin/bash
# The Nessie container's entry point: read the database password from SSM, give it to Nessie alone, start Nessie.
#
# A Lightsail container has no IAM role. The deployment's environment holds only the parameter's name
# (WAP_DB_PASSWORD_PARAMETER) and the access key of an IAM user that may read that one parameter
# (WAP_SECRETS_ACCESS_KEY_ID / WAP_SECRETS_SECRET_ACCESS_KEY). FetchParameter (plain JDK, SigV4) reads the
# SecureString; this script exports it as QUARKUS_DATASOURCE_POSTGRESQL_PASSWORD into its own environment only,
# drops the key, and execs the image's command (run-java.sh, which starts Nessie). The value is never printed.
#
# WAP_SSM_ENDPOINT overrides the SSM endpoint and WAP_FETCHER_CLASSPATH the class's folder (tests).
set -euo pipefail
set +x

die() {
    echo "nessie entrypoint: $*" >&2
    exit 1
}

parameter="${WAP_DB_PASSWORD_PARAMETER:-}"
[ -n "$parameter" ] || die "WAP_DB_PASSWORD_PARAMETER is not set (the SSM parameter that holds the database password)"
[ "$#" -gt 0 ] || die "no command to start (the image's CMD starts the Nessie server)"

classpath="${WAP_FETCHER_CLASSPATH:-/opt/wap/fetcher}"
# A small heap and no JIT tiers beyond C1: this JVM lives for one request.
if ! password="$(java -Xmx64m -XX:TieredStopAtLevel=1 -cp "$classpath" FetchParameter)"; then
    die "could not read the database password from SSM parameter $parameter (see the FetchParameter line above);" \
        "Nessie was not started"
fi
[ -n "$password" ] || die "SSM parameter $parameter is empty; Nessie was not started"

export QUARKUS_DATASOURCE_POSTGRESQL_PASSWORD="$password"
unset password WAP_SECRETS_ACCESS_KEY_ID WAP_SECRETS_SECRET_ACCESS_KEY WAP_SECRETS_SESSION_TOKEN
echo "nessie entrypoint: read the database password from SSM parameter $parameter; starting $1" >&2
exec "$@"
