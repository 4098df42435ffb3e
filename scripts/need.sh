#!/usr/bin/env bash
# need.sh TOOL...: make sure each TOOL is on PATH, installing the Debian
# package that carries it when it is not. make test and the tests that
# drive real Prometheus and Chromium call it, so that a clean CI machine
# with only Go, Python 3 and Node.js gets what they need once, and a
# machine that has them pays one `command -v` each.
#
#   promtool, prometheus   Debian's prometheus (the server and promtool)
#   chromium               Debian's chromium (headless, for the drill report)
#   hyperfine              Debian's hyperfine (start-up measurements)
#
# A tool that cannot be had is an error with what to do, never a silent
# skip: the test that asked for it fails. Installing needs apt-get and
# root (or sudo without a password); elsewhere, install the package by
# hand and run again. NEED_NO_INSTALL=1 only checks.
set -euo pipefail

package_of() {
	case "$1" in
	promtool | prometheus) echo prometheus ;;
	chromium) echo chromium ;;
	hyperfine) echo hyperfine ;;
	*) return 1 ;;
	esac
}

missing=()
for tool in "$@"; do
	command -v "$tool" >/dev/null 2>&1 && continue
	pkg=$(package_of "$tool") || {
		echo "need.sh: no package known for $tool: add it to scripts/need.sh" >&2
		exit 2
	}
	case " ${missing[*]-} " in *" $pkg "*) ;; *) missing+=("$pkg") ;; esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "${NEED_NO_INSTALL:-}" = 1 ]; then
	echo "need.sh: missing ${missing[*]}; install with: apt-get install ${missing[*]}" >&2
	exit 1
fi
sudo=
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
		sudo="sudo -n"
	else
		echo "need.sh: ${missing[*]} missing, and installing needs root: run sudo apt-get install ${missing[*]}, then again" >&2
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
	echo "need.sh: ${missing[*]} missing and this machine has no apt-get: install them with its package manager, then run again" >&2
	exit 1
fi

echo "need.sh: installing ${missing[*]} (once; later runs find them)" >&2
# The lock wait covers another make test installing at the same time.
# Package scripts must not start daemons: Debian's prometheus would
# start a server on :9090 where systemd or a policy-rc.d allow it.
export DEBIAN_FRONTEND=noninteractive
apt_install() {
	$sudo apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "${missing[@]}"
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! apt_install >"$log" 2>&1; then
	# A fresh machine's package lists may be empty or stale.
	$sudo apt-get -o DPkg::Lock::Timeout=300 update >>"$log" 2>&1 || true
	if ! apt_install >>"$log" 2>&1; then
		tail -n 20 "$log" >&2
		echo "need.sh: apt-get install ${missing[*]} failed (above); install them by hand, then run again" >&2
		exit 1
	fi
fi
for tool in "$@"; do
	command -v "$tool" >/dev/null 2>&1 || {
		echo "need.sh: $(package_of "$tool") is installed but $tool is not on PATH" >&2
		exit 1
	}
done
