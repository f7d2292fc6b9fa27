#!/usr/bin/env bash
# The Lambda image's tooling, for the Makefile's image targets (docs/deploy.md, "The Lambda image"):
#
#   docker/image.sh tools           podman, buildah, runc, mmdebstrap from Debian's packages (root + apt; else say why)
#   docker/image.sh can-test        exit 0 if `make image-test` can run here, else print one line saying why not
#   docker/image.sh debian-base     localhost/debian-base:bookworm from Debian's packages (mmdebstrap), if missing
#   docker/image.sh build IMAGE     docker/Dockerfile built as IMAGE: buildah where installed, else docker where its
#                                   daemon answers; on the pinned debian:bookworm-slim if a registry serves it, else
#                                   on localhost/debian-base:bookworm
#   docker/image.sh pin-packages    the Dockerfile's Debian package pins set to the base's current candidates
#
# No registry is reachable from the development machines: there every base is made from Debian's packages. The
# built image is the same Debian 12 either way.
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the script too
cd "$(dirname "$0")/.."

DOCKERFILE=docker/Dockerfile
LOCAL_BASE=localhost/debian-base:bookworm
ROOTFS=.cache/image/debian-base.tar
TOOLS=(podman buildah runc mmdebstrap)
# Debian 12 and its updates, as debian:bookworm-slim has them. The dpkg options leave out what -slim leaves out.
SUITES=("deb http://deb.debian.org/debian bookworm main" "deb http://deb.debian.org/debian bookworm-updates main"
        "deb http://deb.debian.org/debian-security bookworm-security main")
SLIM=(--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
      --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/locale/locale.alias')
PACKAGE_ARGS=(PYTHON3_VERSION:python3 OPENJDK_VERSION:openjdk-17-jre-headless)

say() { echo "image: $*" >&2; }

pinned_base() { sed -n -E 's/^ARG BASE=(.*)$/\1/p' "$DOCKERFILE"; }

missing_tools() {
    local tool
    for tool in "${TOOLS[@]}"; do command -v "$tool" >/dev/null || echo "$tool"; done
}

# Why the container tools cannot be had here ("" when they are, or can be installed).
tools_blocker() {
    local missing
    missing=$(missing_tools | tr '\n' ' ')
    [ -z "$missing" ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "needs root to install ${missing% } with apt-get (or install them yourself)"
        return 0
    fi
    command -v apt-get >/dev/null || { echo "${missing% } missing and no apt-get to install them"; return 0; }
}

cmd_tools() {
    local blocker missing
    blocker=$(tools_blocker)
    [ -z "$blocker" ] || { say "$blocker"; return 1; }
    missing=$(missing_tools | tr '\n' ' ')
    [ -z "$missing" ] && return 0
    say "installing ${missing% } from Debian's packages"
    apt-get update -qq
    # shellcheck disable=SC2086 # one word per package
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null
}

cmd_can_test() {
    local blocker
    if [ "$(id -u)" != 0 ]; then
        echo "image-test skipped: the image runs under rootful podman with runc here, which needs root (docs/deploy.md)"
        return 1
    fi
    blocker=$(tools_blocker)
    if [ -n "$blocker" ]; then
        echo "image-test skipped: $blocker (docs/deploy.md)"
        return 1
    fi
}

docker_works() { command -v docker >/dev/null && docker info >/dev/null 2>&1; }

# buildah where installed, docker where its daemon answers, else buildah installed from Debian's packages.
builder() {
    if command -v buildah >/dev/null; then echo buildah
    elif docker_works; then echo docker
    else cmd_tools && echo buildah
    fi
}

# The engine whose image store the builder reads (podman and buildah share one).
engine_for() { [ "$1" = docker ] && echo docker || echo podman; }

cmd_debian_base() {
    local engine=${1:-podman}
    if "$engine" image inspect "$LOCAL_BASE" >/dev/null 2>&1; then
        say "$LOCAL_BASE exists (delete it to make a new one: $engine rmi $LOCAL_BASE)"
        return 0
    fi
    cmd_tools  # mmdebstrap, and podman for the import
    mkdir -p "$(dirname "$ROOTFS")"
    say "making $LOCAL_BASE from Debian's packages (mmdebstrap --variant=minbase bookworm)"
    mmdebstrap --quiet --variant=minbase "${SLIM[@]}" bookworm "${ROOTFS%.tar}.partial.tar" "${SUITES[@]}"
    mv "${ROOTFS%.tar}.partial.tar" "$ROOTFS"
    "$engine" import --change 'CMD ["bash"]' "$ROOTFS" "$LOCAL_BASE" >/dev/null
    rm -f "$ROOTFS"
}

# The base to build on: the pinned digest if the engine has it or can pull it, else the local Debian base.
# (x86_64 only, as serverless.yml's `architecture` and the wheels `make image-context` fetches.)
choose_base() {
    local engine=$1 pinned
    pinned=$(pinned_base)
    if "$engine" image inspect "$pinned" >/dev/null 2>&1 || timeout 300 "$engine" pull -q "$pinned" >/dev/null 2>&1
    then
        echo "$pinned"
        return 0
    fi
    say "no registry serves $pinned here: building on $LOCAL_BASE, made from Debian's packages"
    cmd_debian_base "$engine"
    echo "$LOCAL_BASE"
}

cmd_build() {
    local image=${1:?usage: docker/image.sh build IMAGE} tool engine base started
    tool=$(builder)
    engine=$(engine_for "$tool")
    base=$(choose_base "$engine")
    say "building $image with $tool on $base"
    started=$(date +%s)
    if [ "$tool" = buildah ]; then
        # --isolation chroot: the RUN steps need no OCI runtime (crun refuses this machine kind's cgroups).
        # --force-rm: a failed step leaves no working container behind.
        buildah bud --isolation chroot --layers --force-rm --platform linux/amd64 --build-arg "BASE=$base" \
            -f "$DOCKERFILE" -t "$image" .
    else
        # BuildKit would attach a provenance attestation (an image index), which Lambda refuses.
        local plain=()
        docker buildx version >/dev/null 2>&1 && plain=(--provenance=false)
        docker build "${plain[@]}" --platform linux/amd64 --build-arg "BASE=$base" -f "$DOCKERFILE" -t "$image" .
    fi
    say "built $image in $(( $(date +%s) - started )) s: $("$engine" image inspect --format '{{.Size}}' "$image") bytes"
}

# `ENGINE run` as it works here: podman with runc (crun refuses this machine kind's cgroups), given the limits runc
# must be given, on the host's network.
engine_run() {
    local engine=$1
    shift
    if [ "$engine" = podman ]; then
        podman --runtime runc run --ulimit nofile=20000:20000 --ulimit nproc=4096:4096 --network=host "$@"
    else
        docker run --network=host "$@"
    fi
}

cmd_pin_packages() {
    local tool engine base pairs versions arg package version
    tool=$(builder)
    engine=$(engine_for "$tool")
    base=$(choose_base "$engine")
    pairs=$(for pair in "${PACKAGE_ARGS[@]}"; do echo "${pair#*:}"; done | tr '\n' ' ')
    versions=$(engine_run "$engine" --rm "$base" sh -c \
        "apt-get update -qq >/dev/null && apt-cache policy $pairs" | awk '/^[^ ]/ {p=$1} /Candidate:/ {print p, $2}')
    for pair in "${PACKAGE_ARGS[@]}"; do
        arg=${pair%%:*}
        package=${pair#*:}
        version=$(awk -v p="$package:" '$1 == p {print $2}' <<<"$versions")
        [ -n "$version" ] && [ "$version" != "(none)" ] || { say "no candidate for $package in $base"; return 1; }
        sed -i -E "s|^ARG $arg=.*|ARG $arg=$version|" "$DOCKERFILE"
        echo "$DOCKERFILE: $arg=$version"
    done
}

case "${1:-}" in
    tools) cmd_tools ;;
    can-test) cmd_can_test ;;
    debian-base) cmd_debian_base "$(engine_for "$(builder)")" ;;
    build) shift; cmd_build "$@" ;;
    pin-packages) cmd_pin_packages ;;
    *) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
