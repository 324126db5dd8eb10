#!/usr/bin/env bash
# Prerequisite of the Spark tests (tests/test_monitor_spark.py): a Java runtime for PySpark's
# local mode, Debian's `default-jre-headless` (OpenJDK 17 on Debian 12) from apt-get. Skipped
# when `java` is already on the PATH (or JAVA_HOME points at one).
#
# Best effort by design, like scripts/setup-browser.sh: what cannot be installed here (no root,
# no apt-get) is reported on stderr and the Spark tests are then skipped with that reason; this
# script always exits 0 so the test command goes on to run every other test.
set -uo pipefail

say() { echo "setup-java: $*" >&2; }

if { [ -n "${JAVA_HOME:-}" ] && [ -x "${JAVA_HOME}/bin/java" ]; } || command -v java >/dev/null 2>&1; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  say "java is missing and apt-get is not available; the Spark tests will be skipped"
  exit 0
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  as_root=(sudo -n)
else
  say "java is missing and apt-get needs root; the Spark tests will be skipped"
  exit 0
fi
if "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
  && "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jre-headless >/dev/null; then
  say "installed $(java -version 2>&1 | head -1)"
else
  say "apt-get install default-jre-headless failed; the Spark tests will be skipped"
fi
exit 0
