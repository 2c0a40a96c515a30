#!/usr/bin/env bash
# Rebuild the cubin of _Z5saxpyPK5Saxpy from the (edited) sources in src/.
#
# Flags: a default set (no compile_commands.json), with the project's include folders rewritten into src/.
# Arch: the captured device's (sm_90); the application's own arch flags are not used.
# Compiles the slice src/saxpy.kerncap-slice.cu (the TU up to the kernel's definition, without the other kernels' bodies) while it was made from the current
# src/saxpy.cu (the sha256 on its first line; `kerncap validate` remakes it after an edit), else
# the whole TU; when the slice does not build, the whole TU (and, once that builds, the slice is not
# tried again for that text of the TU; the slice's messages are in slice-build.log beside OUTPUT, build/ by
# default, and shown nowhere else when the whole TU fails too: its error is the one to read). A slice edited by hand (its body no
# longer the body= hash on its first line) is compiled as it is, its error the build's.
# Lines starting with "kerncap:" on stderr say which was compiled and why.
#
# Usage: ./build.sh [OUTPUT]   (default build/kernel.cubin; a relative OUTPUT is relative to this
# folder). Prints the cubin's path last
# (kerncap validate reads it). Environment: NVCC (default nvcc), EXTRA_FLAGS (appended).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# nvcc runs its steps through a shell, pasting in each path it is given, the source's real path (links
# resolved) and its temporary files' (under TMPDIR): each must be plain (letters, digits, ._+/-). Where
# this folder's path is not, the build runs in a temporary folder holding a copy of src/ and a link to
# build/ (the folder's own name never reaches a command line); an OUTPUT that is not is written there
# and moved; a TMPDIR holding what double quotes do not keep ($, `, ", \) is replaced by a folder of
# that temporary one
dir="$here"
mkdir -p -m 0755 "$dir/build" # no group write whatever the umask: a group-writable build/ makes the capture received
plain() { case "$1" in *[!A-Za-z0-9._+/-]*) return 1 ;; esac; }
quotable() { case "$1" in *[\$\`\"\\]* | *$'\n'*) return 1 ;; esac; }
tmp=""
scratch() {
  if [ -z "$tmp" ]; then
    if quotable "${TMPDIR:-/tmp}"; then tmp="$(mktemp -d)"; else tmp="$(mktemp -d /tmp/kerncap-build.XXXXXX)"; fi
    trap 'rm -rf "$tmp"' EXIT
  fi
}
if ! plain "$dir"; then
  scratch
  here="$tmp"
  cp -RLp "$dir/src" "$here/src" # links followed: nvcc would paste a link's real path
  ln -s "$dir/build" "$here/build"
fi
if ! quotable "${TMPDIR:-/tmp}"; then
  scratch
  mkdir -m 0700 "$tmp/tmp"
  export TMPDIR="$tmp/tmp"
fi
cd "$here"
out="${1:-$here/build/kernel.cubin}"
out="${out/#"$dir/"/"$here/"}" # an OUTPUT given in this folder: through the temporary one's link
final=""
if ! plain "$out"; then
  final="$out"
  out="$here/build/.kerncap-output-$$.cubin"
fi
top="$here"
# From here on the sources are named from this folder (src/<tu>, ./src/… in the flags): the path nvcc
# is given reaches the kernel as __builtin_FILE() and std::source_location (read from the compiler's
# line markers; -fmacro-prefix-map remaps only __FILE__ and __BASE_FILE__), so it reads the same in
# every folder this capture builds in: its own, a copy, kerncap's private build folder, the temporary one
here=.
mkdir -p "$(dirname "$out")"
# no earlier module left at OUTPUT by a build that fails (nu12 #7: replay --against timed the old kernel)
rm -f "$out" ${final:+"$final"}
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
# __FILE__ and __BASE_FILE__ read src/… (./src/… of an include folder mapped), in the whole TU and in the
# slice alike (the slice names itself after the TU: its #line, and its __BASE_FILE__ below)
prefixmap="-Xcompiler=-fmacro-prefix-map=./="
# __DATE__ and __TIME__ read the same whenever and wherever the capture builds (the preprocessor's
# reproducible-build clock: Jan  1 1970 00:00:00): a kernel that reads them cannot build one way when
# it is judged and another way later
export SOURCE_DATE_EPOCH=0
compile() { # compile SOURCE OUTPUT [NVCC WORD…]
  local source="$1" output="$2"
  shift 2
  # shellcheck disable=SC2086
  "$nvcc" -cubin -arch=sm_90 -x cu \
    -O3 -std=c++17 -I"$here/src" ${EXTRA_FLAGS:-} ${prefixmap:+"$prefixmap"} "$@" \
    "$source" -o "$output" >&2
}
cubin="$out"
tu="src/"saxpy.cu
slice="src/"saxpy.kerncap-slice.cu
failed="$(dirname "$out")/slice-failed.sha256"
have="$( (sha256sum <"$tu" || shasum -a 256 <"$tu") 2>/dev/null | cut -d' ' -f1 || true)"
made="$(sed -n '1s/.* sha256=\([0-9a-f]*\).*/\1/p' "$slice" 2>/dev/null || true)"
body="$(sed -n '1s/.* body=\([0-9a-f]*\)$/\1/p' "$slice" 2>/dev/null || true)"
edited=""
if [ -n "$body" ] && [ "$body" != "$( (tail -n +2 "$slice" | sha256sum || tail -n +2 "$slice" | shasum -a 256) 2>/dev/null | cut -d' ' -f1 || true)" ]; then
  edited=1
fi
src="$tu"
if [ ! -f "$slice" ] || [ "$made" = "" ]; then
  echo "kerncap: no usable slice (src/saxpy.kerncap-slice.cu): compiling the whole TU src/saxpy.cu" >&2
elif [ "$made" != "$have" ]; then
  echo "kerncap: src/saxpy.cu changed since the slice was made (kerncap validate remakes it): compiling the whole TU" >&2
elif [ -n "$edited" ]; then
  echo "kerncap: the slice src/saxpy.kerncap-slice.cu was edited by hand: compiling it as it is (it is generated from src/saxpy.cu: once that file changes, validate refuses to remake it over your edit; delete the slice to compile the whole TU)" >&2
  src="$slice"
elif [ -f "$failed" ] && [ "$(cat "$failed")" = "$have" ]; then
  echo "kerncap: the slice did not build for this text of src/saxpy.cu: compiling the whole TU" >&2
else
  src="$slice"
fi
if [ "$src" = "$slice" ]; then
  # the slice's messages go to a log, passed on when it builds (its warnings; nvcc --dryrun's steps,
  # which the pruned build reads); when it fails, the whole TU's own messages say the error once
  slicelog="$(dirname "$out")/slice-build.log"
  shown="${slicelog#"$top/"}"
  # 0600: the compiler's messages may quote a file it read (an #include of a private one)
  rm -f "$slicelog" && (umask 077 && : >"$slicelog")
  if compile "$slice" "$cubin" '-D__BASE_FILE__="src/saxpy.cu"' -Xcompiler=-Wno-builtin-macro-redefined 2>"$slicelog"; then
    cat "$slicelog" >&2
  elif [ -n "$edited" ]; then
    cat "$slicelog" >&2
    echo "kerncap: the slice src/saxpy.kerncap-slice.cu, edited by hand, does not build (its messages above); the whole TU is not compiled in its place" >&2
    exit 1
  else
    # the whole TU in its place; when that fails too, the error is in the edited source (or the
    # toolchain), not the slice: only the compiler's messages are said, the error last (nu12 #2: a
    # note blaming the slice came first); not marked as failed then: the next build tries the slice again
    compile "$tu" "$cubin" || exit 1
    echo "kerncap: the slice src/saxpy.kerncap-slice.cu does not build (nvcc failed on it: $shown): compiled the whole TU src/saxpy.cu in its place" >&2
    echo "$have" >"$failed"
  fi
else
  compile "$tu" "$cubin"
fi
if [ -n "$final" ]; then
  mv -f -- "$out" "$final"
  out="$final"
fi
# the module's path last (in this folder, not the temporary one), as every reproducer's build.sh prints it
echo "${out/#"$top"/"$dir"}"
