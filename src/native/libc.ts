/**
 * The one owner of libc.so.6 in the kerncap process (bun:ffi): POSIX regular expressions
 * (regcomp/regexec, the calls the capture library makes for --kernel: src/util/posix-regex.ts),
 * lseek's SEEK_DATA/SEEK_HOLE (sparse files: src/format/sparse-extents.ts), dup/dup2, fflush and
 * memfd_create (stdout kept for the data channel, device output set aside: src/native/stdout-aside.ts), lgetxattr (a folder's POSIX ACL: src/user-group.ts)
 * and flock (a capture's build lock: src/util/build-lock.ts).
 * Loaded at the first call, once.
 */
import { dlopen, FFIType, type Library } from "bun:ffi";

const { ptr, i32, i64, u64 } = FFIType;

const SYMBOLS = {
  regcomp: { args: [ptr, ptr, i32], returns: i32 },
  regexec: { args: [ptr, ptr, u64, ptr, i32], returns: i32 },
  regerror: { args: [i32, ptr, ptr, u64], returns: u64 },
  regfree: { args: [ptr], returns: FFIType.void },
  lseek: { args: [i32, i64, i32], returns: i64 },
  dup: { args: [i32], returns: i32 },
  dup2: { args: [i32, i32], returns: i32 },
  lgetxattr: { args: [ptr, ptr, ptr, u64], returns: i64 },
  flock: { args: [i32, i32], returns: i32 },
  fflush: { args: [ptr], returns: i32 },
  memfd_create: { args: [ptr, FFIType.u32], returns: i32 },
} as const;

let symbols: Library<typeof SYMBOLS>["symbols"] | undefined;

/**
 * libc's symbols, loaded once.
 * @throws the loader's error where libc.so.6 cannot be loaded (not glibc): each caller decides what that means
 */
export function libc(): NonNullable<typeof symbols> {
  return (symbols ??= dlopen("libc.so.6", SYMBOLS).symbols);
}

/**
 * Whether `path` (not followed when a link) carries an extended POSIX access ACL (the
 * system.posix_acl_access attribute: named users or groups; a plain mode has none). Then its mode's
 * group bits are the ACL's mask, which covers other users named in it. False where it cannot be
 * told (no libc, a file system without extended attributes).
 * Source: lgetxattr(2) with a zero-size buffer (the attribute's size, or -1: ENODATA when none).
 */
export function hasAccessAcl(path: string): boolean {
  try {
    const enc = new TextEncoder();
    const p = enc.encode(`${path}\0`);
    const n = enc.encode("system.posix_acl_access\0");
    return Number(libc().lgetxattr(p, n, null, 0)) > 0;
  } catch {
    return false;
  }
}
