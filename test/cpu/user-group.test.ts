/**
 * src/user-group.ts: a group write bit counts as another user's write unless the group is the
 * user's private group (useradd's USERGROUPS_ENAB with umask 002 makes every folder 0775).
 */
import { describe, expect, test } from "bun:test";
import { othersMayWrite, privateGroupIn } from "../../src/user-group.ts";

const PASSWD = [
  "root:x:0:0:root:/root:/bin/bash",
  "ana:x:1000:1000::/home/ana:/bin/bash",
  "bob:x:1001:1001::/home/bob:/bin/bash",
  "eve:x:1002:100::/home/eve:/bin/bash",
].join("\n");
const GROUP = ["root:x:0:", "users:x:100:ana", "ana:x:1000:", "bob:x:1001:bob", "lab:x:2000:ana,bob", "shared:x:1003:eve"].join("\n");

describe("the user's private group", () => {
  test("a group of the user's own is private; one with another member, another user's primary group, or root's is not", () => {
    expect(privateGroupIn(1000, 1000, PASSWD, GROUP)).toBe(true); // ana's own group, no members listed
    expect(privateGroupIn(1001, 1001, PASSWD, GROUP)).toBe(true); // bob listed in his own group: still his alone
    expect(privateGroupIn(2000, 1000, PASSWD, GROUP)).toBe(false); // a lab group ana shares with bob
    expect(privateGroupIn(100, 1000, PASSWD, GROUP)).toBe(false); // eve's primary group
    expect(privateGroupIn(0, 0, PASSWD, GROUP)).toBe(false);
    // a group the table lacks (a directory service's): private only where its id is the user's
    expect(privateGroupIn(1005, 1005, PASSWD, GROUP)).toBe(true);
    expect(privateGroupIn(3000, 1000, PASSWD, GROUP)).toBe(false);
    expect(privateGroupIn(1003, 1000, PASSWD, GROUP)).toBe(false); // eve's group, ana not in it
  });

  test("other-write always counts; group-write counts unless the group is the process's private group", () => {
    expect(othersMayWrite({ mode: 0o40777, gid: 12345 })).toBe(true);
    expect(othersMayWrite({ mode: 0o40775, gid: 123456 })).toBe(true); // not the process's group
    expect(othersMayWrite({ mode: 0o40755, gid: 123456 })).toBe(false);
    expect(othersMayWrite({ mode: 0o40700, gid: 0 })).toBe(false);
  });
});

describe("a folder shared through a POSIX ACL", () => {
  test("its ACL is seen (lgetxattr), and a group-write bit then counts as others' whatever the group", async () => {
    const { hasAccessAcl } = await import("../../src/native/libc.ts");
    const { setAclProbe } = await import("../../src/user-group.ts");
    const { mkdtempSync, chmodSync } = await import("node:fs");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const d = mkdtempSync(join(tmpdir(), "kc-acl-"));
    chmodSync(d, 0o770);
    expect(hasAccessAcl(d)).toBe(false);
    // user::rwx user:1002:rwx group::rwx mask::rwx other::--- (acl_ea format, version 2), as setfacl -m u:1002:rwx writes it
    const set = Bun.spawnSync([
      "python3",
      "-c",
      "import os,struct,sys; e=[(1,7,0xffffffff),(2,7,1002),(4,7,0xffffffff),(0x10,7,0xffffffff),(0x20,0,0xffffffff)]; os.setxattr(sys.argv[1],'system.posix_acl_access',struct.pack('<I',2)+b''.join(struct.pack('<HHI',*x) for x in e))",
      d,
    ]);
    if (set.exitCode === 0) expect(hasAccessAcl(d)).toBe(true); // a file system without ACLs: nothing to see
    setAclProbe(() => true);
    expect(othersMayWrite({ mode: 0o40770, gid: process.getgid?.() ?? 0 }, d)).toBe(true);
    expect(othersMayWrite({ mode: 0o40750, gid: process.getgid?.() ?? 0 }, d)).toBe(false);
    setAclProbe(hasAccessAcl);
  });
});
