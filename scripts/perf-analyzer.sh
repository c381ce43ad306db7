#!/usr/bin/env bash
# Runs NVIDIA's perf_analyzer (the Triton inference benchmark, PyPI `perf-analyzer`) on this
# machine, installing it first if needed:
#   scripts/perf-analyzer.sh --install          install only (idempotent; what test.sh runs)
#   scripts/perf-analyzer.sh --path             print the command prefix that runs it, one word a line
#   scripts/perf-analyzer.sh -m iris -u 127.0.0.1:8080 -b 8 ...   run it with these arguments
#
# The wheel's binary needs glibc 2.38 and libstdc++ from GCC 13+ (GLIBCXX_3.4.32); Debian 12 has
# glibc 2.36 and GCC 12's libstdc++. So the script takes Debian 13's libc6, libstdc++6 and
# libgcc-s1 packages (downloaded with apt from the mirror this machine's apt sources name, into a
# private apt state: nothing is added to the system's sources or installed system-wide), unpacks
# them into .bench/glibc, and starts perf_analyzer through that glibc's own loader:
#   .bench/glibc/lib/ld-linux-x86-64.so.2 --library-path .bench/glibc/lib .bench/perf-analyzer/perf_analyzer/bin/perf_analyzer ...
# zlib, libssl and libcrypto still come from the system (older libraries run on a newer glibc).
# On a machine whose glibc is already 2.38 or newer, the system's loader runs it directly.
# The wheel itself is installed with pip into .bench/perf-analyzer (pip --target with the wheel's
# platform tag, since pip refuses a manylinux_2_38 wheel on an older glibc otherwise).
#
# Paths are relative to the repository root; run from anywhere. A stamp records what was
# installed; a matching stamp and a binary that answers --version mean nothing is done again.
# Env: PYTHON (default python3).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=${PYTHON:-python3}
version=2.60.0
bench=$root/.bench
wheel_dir=$bench/perf-analyzer
glibc_dir=$bench/glibc
binary=$wheel_dir/perf_analyzer/bin/perf_analyzer
# Debian's release whose glibc (2.41) and libstdc++ (GCC 14) are new enough.
suite=trixie

say() { echo "perf-analyzer.sh: $*" >&2; }

# Whether the system's glibc is at least 2.38.
system_glibc_is_new_enough() {
  local v
  v=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
  [ -n "$v" ] && [ "$(printf '%s\n2.38\n' "$v" | sort -V | head -1)" = 2.38 ]
}

# The command prefix that runs the binary, one word a line.
launcher() {
  if [ -x "$glibc_dir/lib/ld-linux-x86-64.so.2" ]; then
    printf '%s\n' "$glibc_dir/lib/ld-linux-x86-64.so.2" --library-path "$glibc_dir/lib" "$binary"
  else
    printf '%s\n' "$binary"
  fi
}

runs() {
  local cmd
  mapfile -t cmd < <(launcher)
  "${cmd[@]}" --version >/dev/null 2>&1
}

install_wheel() {
  local stamp="perf-analyzer==$version"
  if [ -x "$binary" ] && [ "$(cat "$wheel_dir/.skiff-stamp" 2>/dev/null)" = "$stamp" ]; then
    return 0
  fi
  say "installing perf-analyzer $version into $wheel_dir"
  rm -rf "$wheel_dir"
  "$python" -m pip install --disable-pip-version-check --root-user-action=ignore -q --no-deps --only-binary=:all: \
    --platform manylinux_2_38_x86_64 --target "$wheel_dir" "perf-analyzer==$version"
  chmod +x "$binary"
  echo "$stamp" >"$wheel_dir/.skiff-stamp"
}

# The mirror this machine's apt uses for Debian (the first URI of its Debian sources).
debian_mirror() {
  local uri
  uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1)
  if [ -z "$uri" ]; then
    uri=$(grep -hsE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list \
      | grep -v security | sed -E 's/^deb (\[[^]]*\] )?//' | awk '{print $1}' | head -1)
  fi
  [ -n "$uri" ] || { say "no Debian mirror found in /etc/apt sources"; return 1; }
  echo "$uri"
}

install_glibc() {
  local stamp_want="$suite libc6 libstdc++6 libgcc-s1"
  if [ -x "$glibc_dir/lib/ld-linux-x86-64.so.2" ] \
    && [ "$(head -1 "$glibc_dir/.skiff-stamp" 2>/dev/null)" = "$stamp_want" ]; then
    return 0
  fi
  local mirror apt_dir keys opts
  mirror=$(debian_mirror)
  apt_dir=$bench/apt-$suite
  keys=/usr/share/keyrings/debian-archive-$suite-stable.gpg,/usr/share/keyrings/debian-archive-$suite-automatic.gpg
  [ -f "/usr/share/keyrings/debian-archive-$suite-stable.gpg" ] \
    || { say "Debian's $suite archive key is missing (package debian-archive-keyring)"; return 1; }
  say "downloading Debian $suite's libc6, libstdc++6 and libgcc-s1 from $mirror into $glibc_dir"
  rm -rf "$apt_dir" "$glibc_dir"
  mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/debs" "$glibc_dir/root"
  echo "deb [signed-by=$keys] $mirror $suite main" >"$apt_dir/sources.list"
  opts=(-o "Dir::Etc::SourceList=$apt_dir/sources.list" -o Dir::Etc::SourceParts=/nonexistent
    -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache" -o Dir::State::status=/dev/null
    -o Debug::NoLocking=1 -o APT::Architecture=amd64 -o APT::Sandbox::User=root
    -o Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false
    -o Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false
    -o Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false
    -o Acquire::Languages=none)
  apt-get -q "${opts[@]}" update >/dev/null
  (cd "$apt_dir/debs" && apt-get -q "${opts[@]}" download libc6 libstdc++6 libgcc-s1 >/dev/null)
  local deb
  for deb in "$apt_dir"/debs/*.deb; do
    dpkg-deb -x "$deb" "$glibc_dir/root"
  done
  ln -s root/usr/lib/x86_64-linux-gnu "$glibc_dir/lib"
  { echo "$stamp_want"; (cd "$apt_dir/debs" && ls); } >"$glibc_dir/.skiff-stamp"
  rm -rf "$apt_dir"
}

install() {
  install_wheel
  if ! system_glibc_is_new_enough; then
    install_glibc
  fi
  if ! runs; then
    local cmd
    mapfile -t cmd < <(launcher)
    say "perf_analyzer does not start: ${cmd[*]} --version:"
    "${cmd[@]}" --version >&2 || true
    return 1
  fi
}

case "${1:-}" in
  --install)
    install
    say "ready: $(launcher | tr '\n' ' ')"
    ;;
  --path)
    install
    launcher
    ;;
  *)
    install
    mapfile -t cmd < <(launcher)
    exec "${cmd[@]}" "$@"
    ;;
esac
