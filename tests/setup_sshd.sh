#!/usr/bin/env bash
# openssh-server for the SSH tests: their fixture starts its own sshd on loopback, so only the
# binary must be here. Installs it with apt-get when /usr/sbin/sshd is missing and we are root;
# otherwise fails with the fix (a missing sshd is a failure, not a skip). Used by `make test`
# (its `sshd` step) and so by .ci/run.
set -euo pipefail
SSHD=/usr/sbin/sshd
[ -x "$SSHD" ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
  echo "== installing openssh-server ($SSHD is missing)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq openssh-server >/dev/null
  [ -x "$SSHD" ] && exit 0
fi
echo "setup_sshd: $SSHD is missing and cannot be installed here (needs root and apt-get);" \
     "install openssh-server, e.g. 'sudo apt-get install openssh-server'" >&2
exit 1
