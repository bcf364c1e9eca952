#!/usr/bin/env bash
# One-command setup for vkattn: installs the toolchain, the Vulkan SDK parts and
# a CPU Vulkan driver, builds the library, then runs its main job on the default
# device: a short serving loop (every layer's write_kv_cache and paged_attention
# per step, each step checked against the float64 reference). Idempotent: a
# second run only checks and rebuilds what changed.
#
# Supported: Debian 12 (SDK parts unpacked from Debian 13 into .deps/, the CPU
# driver from bookworm-backports), Debian 13+, Ubuntu whose own packages are new
# enough (glslang >= 15, Vulkan headers >= 1.4.309, Mesa >= 25).
#
# Options:  --no-demo   skip the run on the default device at the end
#           --no-build  install only
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
deps="$repo/.deps"            # everything this script unpacks lives here (git-ignored)
build="${VKATTN_BUILD_DIR:-$repo/build}"
demo=1; do_build=1
for a in "$@"; do
  case "$a" in
    --no-demo) demo=0 ;;
    --no-build) do_build=0 ;;
    *) echo "setup.sh: unknown option '$a' (expected --no-demo or --no-build)" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || die "run as root or install sudo: apt-get needs root"
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive

. /etc/os-release
distro="${ID:-unknown}"; version="${VERSION_ID:-0}"

# The Debian archive this machine's own apt sources use (the URI that serves
# its release's main component), so that no archive's address is written here.
debian_archive() {
  local uri
  uri=$(apt-get indextargets --format '$(REPO_URI)' 'Component: main' 2>/dev/null |
        grep -v -e security -e updates | head -n 1)
  [ -n "$uri" ] || die "no Debian archive in this machine's apt sources (/etc/apt/sources.list*): add one first"
  printf '%s\n' "${uri%/}"
}

# True when every named Debian package is installed.
have_pkgs() { for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || return 1; done; }
apt_updated=0
apt_update() { [ $apt_updated = 1 ] || { say "apt-get update"; $SUDO apt-get update -qq; apt_updated=1; }; }
apt_install() {
  if ! have_pkgs "$@"; then apt_update; say "installing $*"; $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; fi
}
# dpkg --compare-versions wrapper: version_ge INSTALLED_PKG MIN_VERSION
version_ge() { local v; v=$(dpkg-query -W -f='${Version}' "$1" 2>/dev/null) || return 1; dpkg --compare-versions "$v" ge "$2"; }

base_pkgs=(g++ cmake ninja-build libgtest-dev pkg-config ca-certificates vulkan-validationlayers)

mkdir -p "$deps/bin"
case "$distro:$version" in
  debian:12)
    apt_install "${base_pkgs[@]}"
    # Mesa >= 25 (lavapipe, Vulkan 1.4) comes from bookworm-backports.
    if ! version_ge mesa-vulkan-drivers 25; then
      src=/etc/apt/sources.list.d/vkattn-bookworm-backports.sources
      if [ ! -f "$src" ]; then
        say "adding bookworm-backports for mesa-vulkan-drivers >= 25"
        printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
          "$(debian_archive)" | $SUDO tee "$src" >/dev/null
      fi
      apt_updated=0; apt_update
      $SUDO apt-get install -y -qq -t bookworm-backports mesa-vulkan-drivers >/dev/null
    fi
    # Debian 12's glslang and Vulkan headers are too old for cooperative matrices.
    # Take Debian 13's, unpacked under .deps/root (never installed into the system):
    # a private apt configuration downloads them, and trixie's own dynamic loader
    # runs its binaries (they need glibc >= 2.38).
    root="$deps/root"
    trixie_pkgs=(glslang-tools spirv-tools libvulkan-dev libvulkan-volk-dev libc6 libstdc++6 libgcc-s1)
    stamp="$deps/trixie.stamp"
    if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "${trixie_pkgs[*]}" ]; then
      say "downloading Debian 13 SDK parts into $deps"
      apt="$deps/apt"; rm -rf "$apt" "$root"; mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/debs" "$root"
      printf 'Types: deb\nURIs: %s\nSuites: trixie\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
        "$(debian_archive)" > "$apt/trixie.sources"
      o=(-o "Dir::Etc::SourceList=$apt/trixie.sources" -o Dir::Etc::SourceParts=/dev/null
         -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o Dir::State::Status=/dev/null
         -o APT::Sandbox::User=root -o Debug::NoLocking=1)
      apt-get "${o[@]}" update -qq
      (cd "$apt/debs" && apt-get "${o[@]}" download "${trixie_pkgs[@]}" >/dev/null)
      for f in "$apt"/debs/*.deb; do dpkg-deb -x "$f" "$root"; done
      rm -rf "$apt/lists" "$apt/cache"
      echo "${trixie_pkgs[*]}" > "$stamp"
    fi
    lib="$root/usr/lib/x86_64-linux-gnu"
    for tool in glslangValidator spirv-val spirv-dis; do
      printf '#!/bin/sh\n# Runs Debian 13'"'"'s %s through its own glibc (generated by tools/setup.sh)\nexec "%s/ld-linux-x86-64.so.2" --library-path "%s" "%s/usr/bin/%s" "$@"\n' \
        "$tool" "$lib" "$lib" "$root" "$tool" > "$deps/bin/$tool"
      chmod +x "$deps/bin/$tool"
    done
    sdk_include="$root/usr/include"
    ;;
  debian:*|ubuntu:*)
    apt_install "${base_pkgs[@]}" glslang-tools spirv-tools libvulkan-dev libvulkan-volk-dev mesa-vulkan-drivers
    version_ge glslang-tools 15 || die "glslang-tools >= 15 is needed for cooperative matrices; $PRETTY_NAME has $(dpkg-query -W -f='${Version}' glslang-tools)"
    version_ge libvulkan-dev 1.4.309 || die "Vulkan headers >= 1.4.309 are needed; $PRETTY_NAME has libvulkan-dev $(dpkg-query -W -f='${Version}' libvulkan-dev)"
    version_ge mesa-vulkan-drivers 25 || say "warning: mesa-vulkan-drivers < 25: the CPU device may lack Vulkan 1.3 features"
    for tool in glslangValidator spirv-val spirv-dis; do ln -sf "$(command -v $tool)" "$deps/bin/$tool"; done
    sdk_include=/usr/include
    ;;
  *) die "unsupported system '$PRETTY_NAME': expected Debian 12, Debian 13+ or a recent Ubuntu" ;;
esac

"$deps/bin/glslangValidator" --version | head -1 | sed 's/^/[setup] /' >&2

[ $do_build = 1 ] || exit 0
gen=()
[ -f "$build/CMakeCache.txt" ] || gen=(-G Ninja -DCMAKE_BUILD_TYPE=Release)
cmake -S "$repo" -B "$build" "${gen[@]}" -DVKATTN_SDK_INCLUDE_DIR="$sdk_include" -DVKATTN_TOOL_DIR="$deps/bin" >/dev/null
say "building in $build"
cmake --build "$build" -j"$(nproc)"

[ $demo = 1 ] || exit 0
say "vkattn info (default device)"
"$build/tools/vkattn" info
say "vkattn run serve (a short serving loop, every step verified against the CPU reference)"
"$build/tools/vkattn" run serve
