#!/usr/bin/env bash
# dist.sh: the release files, into DIST (make dist runs it):
#
#   lockd-VERSION-linux-amd64.tar.gz    lockd and lockctl (static), shell
#   lockd-VERSION-linux-arm64.tar.gz    completions, the systemd unit, the
#                                       Prometheus rules and the Grafana
#                                       dashboard, laid out as a prefix
#   lockd-PYVERSION-py3-none-any.whl    the Python client (pip install)
#   lockd-PYVERSION.tar.gz              its source distribution
#   lockd-io-client-NPMVERSION.tgz      the TypeScript client (npm install)
#   SHA256SUMS                          sha256sum -c SHA256SUMS checks them
#
# An archive unpacks into lockd-VERSION-linux-ARCH/: bin/, share/
# (completions for bash, zsh and fish; share/lockd: rules, dashboard),
# lib/systemd/system/lockd.service, README.md; tar -C /usr/local
# --strip-components=1 -xzf ARCHIVE installs it where the unit expects.
#
# The clients take VERSION when it is a release tag (v1.2.3: 1.2.3);
# other builds keep the version their package declares, marked as a
# development build of it (0.1.0.dev0+g15e7d05, 0.1.0-dev.g15e7d05).
#
# Needs Go, Python 3.11 or later (the wheel is built with its standard
# library: no setuptools, no package index) and npm (npm ci fetches the
# TypeScript compiler from package-lock.json, as make test does).
#
# Environment: VERSION (required), DIST [dist], GO [go], TAGS (the
# Makefile's), PYTHON [python3], ARCHES [amd64 arm64]: the archives'
# Linux architectures, SOURCE_DATE_EPOCH [the last commit's time]: the
# files' times in the archives, so that the same commit gives the same
# bytes.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=${VERSION:?set VERSION, e.g. VERSION=v1.2.3}
out=${DIST:-dist}
go=${GO:-go}
python=${PYTHON:-python3}
tags=${TAGS:-urfave_cli_no_docs,netgo,osusergo}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || echo 0)
fi
export SOURCE_DATE_EPOCH

case "$version" in
*[!A-Za-z0-9._+-]* | "")
	echo "dist.sh: VERSION $version: use letters, digits and . _ + - (a tag like v1.2.3)" >&2
	exit 2
	;;
esac

mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/lockd-* "$out"/SHA256SUMS
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Client versions: a release tag, or the package's own version marked
# as a development build of it.
release=
if [[ $version =~ ^v?([0-9]+\.[0-9]+\.[0-9]+)$ ]]; then
	release=${BASH_REMATCH[1]}
fi
local_part=$(printf '%s' "$version" | tr -c 'A-Za-z0-9\n' '.' | sed 's/^\.*//; s/\.*$//')

arches=${ARCHES:-amd64 arm64}
for arch in $arches; do
	case $arch in
	amd64 | arm64) ;;
	*) echo "dist.sh: ARCHES has $arch; the release archives are for amd64 and arm64" >&2; exit 2 ;;
	esac
done
for arch in $arches; do
	name=lockd-$version-linux-$arch
	stage=$work/$name
	mkdir -p "$stage/bin" "$stage/lib/systemd/system" "$stage/share/lockd/prometheus" "$stage/share/lockd/grafana" \
		"$stage/share/bash-completion/completions" "$stage/share/zsh/site-functions" "$stage/share/fish/vendor_completions.d"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch "$go" build -trimpath -tags "$tags" \
		-ldflags "-s -w -X main.version=$version" -o "$stage/bin/" ./cmd/lockd ./cmd/lockctl
	install -m 0644 completions/lockd.bash "$stage/share/bash-completion/completions/lockd"
	install -m 0644 completions/lockctl.bash "$stage/share/bash-completion/completions/lockctl"
	install -m 0644 completions/_lockd completions/_lockctl "$stage/share/zsh/site-functions/"
	install -m 0644 completions/lockd.fish completions/lockctl.fish "$stage/share/fish/vendor_completions.d/"
	install -m 0644 deploy/systemd/lockd.service "$stage/lib/systemd/system/"
	install -m 0644 deploy/prometheus/lockd.rules.yml deploy/prometheus/lockd.rules.test.yml "$stage/share/lockd/prometheus/"
	install -m 0644 deploy/grafana/lockd.json "$stage/share/lockd/grafana/"
	install -m 0644 README.md "$stage/"
	tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime="@$SOURCE_DATE_EPOCH" \
		-czf "$out/$name.tar.gz" "$name"
	echo "dist: $name.tar.gz"
done

# Python: a wheel and an sdist, built with the standard library.
pyversion=${release:-}
if [ -z "$pyversion" ]; then
	own=$("$python" -c 'import tomllib,sys; print(tomllib.load(open(sys.argv[1],"rb"))["project"]["version"])' clients/python/pyproject.toml)
	pyversion="$own.dev0+$local_part"
fi
"$python" scripts/pydist.py clients/python "$pyversion" "$out"

# TypeScript: npm pack of a copy whose package.json carries the version,
# compiled by prepack with the compiler npm ci installs.
(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
ts=$work/typescript
mkdir -p "$ts"
# The whole client but what a build leaves, so that what builds it in
# the tree (both tsconfigs, the CommonJS step) builds it here too.
tar -C clients/typescript --exclude=./node_modules --exclude=./dist -cf - . | tar -C "$ts" -xf -
ln -s "$root/clients/typescript/node_modules" "$ts/node_modules"
npmversion=${release:-}
if [ -z "$npmversion" ]; then
	own=$(node -p 'require(process.argv[1]).version' "$ts/package.json")
	npmversion="$own-dev.$(printf '%s' "$local_part" | tr '.' '-')"
fi
(cd "$ts" && npm version --no-git-tag-version --allow-same-version "$npmversion" >/dev/null &&
	npm pack --pack-destination "$out" --loglevel=error >/dev/null)
echo "dist: $(cd "$out" && ls lockd-io-client-*.tgz)"

(cd "$out" && sha256sum lockd-* >SHA256SUMS)
echo "dist: SHA256SUMS"
