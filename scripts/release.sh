#!/usr/bin/env bash
# The release artifacts, in dist/release/ (or $RELEASE_DIR):
#   kerncap-VERSION-py3-none-manylinux_2_17_ARCH.manylinux2014_ARCH.whl  pip/uv/pipx install it: `kerncap` on PATH (scripts/build-wheel.py)
#   kerncap-VERSION-linux-ARCH.tar.xz                 the executable, its man page, README.md, docs/*.md and LICENSE, in a folder of that name
#   SHA256SUMS                                        `sha256sum -c SHA256SUMS` checks both
# Builds dist/kerncap first (scripts/build.sh) unless KERNCAP_BINARY names an executable to ship.
# Arguments go to scripts/build-wheel.py (--project-url LABEL=URL, beside package.json's URLs).
# Offline: nothing is downloaded (test/cpu/release.test.ts runs it and installs the wheel with
# pip --no-index into a fresh venv).
# XZ_OPT (xz's own, default -6 -T0) and WHEEL_COMPRESSLEVEL (0-9, default 9) trade size for time.
set -euo pipefail
cd "$(dirname "$0")/.."
# the arguments are build-wheel.py's: checked before anything is built (--help prints this header)
for a in "$@"; do
  case "$a" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  esac
done
python3 scripts/build-wheel.py --check-args "$@" || exit 2
out="${RELEASE_DIR:-dist/release}"
bin="${KERNCAP_BINARY:-}"
if [ -z "$bin" ]; then
  bash scripts/build.sh
  bin=dist/kerncap
fi
[ -x "$bin" ] || { echo "release: $bin is not an executable" >&2; exit 2; }
version="$(python3 -c 'import json; print(json.load(open("package.json"))["version"])')"
# the executable's own architecture (the ELF header), not the build machine's name for it
case "$(od -An -tu2 -j18 -N2 "$bin" | tr -d ' ')" in
  62) arch=x86_64 ;;
  183) arch=aarch64 ;;
  *) echo "release: $bin is not an x86_64 or aarch64 ELF executable" >&2; exit 2 ;;
esac
rm -rf "$out"
mkdir -p "$out"
echo "release: the wheel (zip level ${WHEEL_COMPRESSLEVEL:-9}) of $bin ($(du -m "$bin" | cut -f1) MiB)…" >&2
python3 scripts/build-wheel.py --binary "$bin" --out "$out" --version "$version" --compresslevel "${WHEEL_COMPRESSLEVEL:-9}" "$@" >/dev/null
name="kerncap-$version-linux-$arch"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
cp "$bin" "$stage/$name/kerncap"
chmod 755 "$stage/$name/kerncap"
cp docs/kerncap.1 LICENSE README.md "$stage/$name/"
# the docs the man page and the messages point at (docs/*.md), beside it: a release without a checkout has them too
mkdir "$stage/$name/docs"
cp docs/*.md "$stage/$name/docs/"
chmod 644 "$stage/$name/kerncap.1" "$stage/$name/LICENSE" "$stage/$name/README.md" "$stage/$name/docs/"*.md
chmod 755 "$stage/$name/docs"
echo "release: $name.tar.xz (xz ${XZ_OPT:--6 -T0}: a minute or more on two cores)…" >&2
XZ_OPT="${XZ_OPT:--6 -T0}" tar -C "$stage" --owner=0 --group=0 --numeric-owner -cJf "$out/$name.tar.xz" "$name"
(cd "$out" && sha256sum -- *.whl *.tar.xz > SHA256SUMS)
echo "release: $out"
ls -l "$out" | tail -n +2
