#!/usr/bin/env bash
# Sourced by the other scripts: makes sure the tools seckill needs are here.
# Installs redis-server with apt-get when missing (as root, or with sudo).

need_apt() {
  local pkg=$1
  local sudo=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null; then sudo="sudo"; else
      echo "error: $pkg is missing; install it: apt-get install -y $pkg" >&2
      exit 1
    fi
  fi
  echo "installing $pkg with apt-get ..." >&2
  $sudo apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$pkg" >&2
}

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
  need_apt redis-server
fi
if ! command -v cargo >/dev/null; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "error: cargo is missing; install Rust (https://rustup.rs), e.g.:" >&2
    echo "  curl -sSf https://sh.rustup.rs | sh -s -- -y && . \$HOME/.cargo/env" >&2
    exit 1
  fi
fi
