/**
 * The attack suite, agent and locality rows: what an AI agent driving `kerncap mcp` (source edits
 * and validate/tune/profile only) and a manifest that claims this host could make kerncap run.
 * Each test reproduces one attack and asserts exit 2 with its cause, and that the planted build.sh
 * never ran (it would create a marker file):
 *
 * - the agent writes `src/x/kerncap.json` (the capture's manifest, `host` removed,
 *   `process.hostname` this machine) and `src/x/build.sh`, then validates `<cap>/src/x`: edit_file
 *   refuses both names (E_NOT_SOURCE); planted there anyway, every verb and every MCP tool refuses
 *   the nested folder (E_NESTED_CAPTURE, naming the outer capture);
 * - a confined build runs only the build.sh kerncap wrote (E_NOT_RENDERED), before anything runs;
 * - a manifest without `host` whose `process.hostname` is this machine is received (E_UNTRUSTED
 *   without --trust); a machine without a machine-id receives everything; inspect says why.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { hostname, tmpdir } from "node:os";
import { join } from "node:path";
import { assertNotNested, outerCapture, readManifest } from "../../src/format/capture-dir.ts";
import { notRendered, requireRenderedBuild } from "../../src/format/rendered.ts";
import { finalizeCapture } from "../../src/capture/finalize.ts";
import { hostIdentity, notMadeHere, receivedReasons } from "../../src/format/received.ts";
import { notAnEditableSource } from "../../src/frontends/index.ts";
import { fakeTritonSite, makeCapture, recordRendered, stockBuildSh, tempDir, trustDigest, writeRawCapture, sandboxOffForMarkers } from "./fixtures.ts";
import { packCapture, unpackArchive } from "../../src/format/archive.ts";
import { connected, doc } from "./mcp-client.ts";
import { KerncapError } from "../../src/errors.ts";
import { resolveInputs } from "../../src/eval/eval.ts";
import { confineToolDir } from "../../src/mcp/server.ts";

let savedState: string | undefined;
beforeAll(() => {
  // trust records (validate --trust) go to a state folder of this file's own, which the MCP tools' children inherit
  savedState = process.env.XDG_STATE_HOME;
  process.env.XDG_STATE_HOME = tempDir("kerncap-state-");
});
afterAll(() => {
  if (savedState === undefined) delete process.env.XDG_STATE_HOME;
  else process.env.XDG_STATE_HOME = savedState;
});

const mcp = (trustBuilds = false): Promise<Client> => connected({ trust: { trustBuilds }, name: "attacker" });

const MAIN = join(import.meta.dir, "../../src/cli/main.ts");

/** `kerncap ARGV` as a process (its real exit status): the exit code, stdout, and the --json document it printed (`json`, default on). */
function cli(argv: string[], json = true): { code: number; doc: Record<string, any>; out: string } {
  const dd = argv.indexOf("--");
  const args = !json ? argv : dd < 0 ? [...argv, "--json"] : [...argv.slice(0, dd), "--json", ...argv.slice(dd)];
  // in a folder of its own: check writes its results (kerncap-check/) into the working folder
  const p = Bun.spawnSync([process.execPath, MAIN, ...args], {
    cwd: tempDir("kerncap-cwd-"),
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env },
    timeout: 120_000,
  });
  const out = p.stdout.toString();
  let doc: Record<string, any> = {};
  try {
    if (json && out.trim()) doc = JSON.parse(out);
  } catch {
    doc = { unparsed: out, stderr: p.stderr.toString() };
  }
  return { code: p.exitCode ?? -1, doc, out };
}

/** A script that leaves `marker` when it runs (what the attacker's build.sh does instead of harm), printing a module path as build.sh must. */
const planted = (marker: string) => `#!/usr/bin/env bash\ntouch ${JSON.stringify(marker)}\necho "$0"\n`;

/** A capture made here (this machine's id, this user's files) with src/kernel.cu and a build.sh standing for the one kerncap wrote (recorded in manifest.rendered) that fails without running anything. */
async function victim(): Promise<{ root: string; cap: string; marker: string }> {
  const root = tempDir("kerncap-attack-");
  const cap = join(root, "cap");
  await makeCapture(cap, { process: { pid: 4242, hostname: hostname(), cmdline: ["./app"] } });
  mkdirSync(join(cap, "src"));
  writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
  writeFileSync(join(cap, "build.sh"), `#!/usr/bin/env bash\necho "no compiler in this test" >&2\nexit 1\n`, { mode: 0o755 });
  recordRendered(cap);
  return { root, cap, marker: join(root, "PLANTED-BUILD-RAN") };
}

/** The agent's copy of the capture's manifest: `host` removed, `process.hostname` this machine (what once counted as made here). */
function forgedManifest(cap: string): string {
  const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
  delete m.host;
  delete m.rendered;
  m.process.hostname = hostname();
  return JSON.stringify(m, null, 2);
}

describe("attack: an MCP agent plants a capture inside src/ and validates it", () => {
  test("edit_file of src/x/kerncap.json and src/x/build.sh is refused (E_NOT_SOURCE, naming the rule); validate of <cap>/src/x is refused (E_NESTED_CAPTURE, naming the outer capture); the planted build.sh never runs", async () => {
    const { cap, marker } = await victim();
    const c = await mcp();
    const x = join(cap, "src/x");
    for (const [path, content] of [
      ["src/x/kerncap.json", forgedManifest(cap)],
      ["src/x/build.sh", planted(marker)],
      ["src/x/Build.sh", planted(marker)],
      ["src/x/run.sh", planted(marker)],
      ["src/x/y/pinned.json", "{}"],
      ["src/repro.py", "import os\n"],
      ["src/x/notes.txt", "x"],
    ] as const) {
      const r = await c.callTool({ name: "edit_file", arguments: { dir: cap, path, content } });
      expect(r.isError, path).toBe(true);
      expect(doc(r).error.code, path).toBe("E_NOT_SOURCE");
      expect(doc(r).error.message, path).toMatch(
        path.endsWith("run.sh")
          ? /is a shell script, which no agent may write/
          : path.endsWith(".txt")
            ? /is not a cuda source file \(\.cu \.cuh/
            : /kerncap reads as configuration or runs, which no agent may write \(at any depth\)/,
      );
      expect(existsSync(join(cap, path)), path).toBe(false);
    }
    // a source of the frontend's set, at any depth under src/, is what an agent writes
    const ok = await c.callTool({ name: "edit_file", arguments: { dir: cap, path: "src/x/tile.cuh", content: "#define TILE 16\n" } });
    expect(ok.isError, JSON.stringify(ok)).toBe(false);
    // planted anyway (a kerncap before this rule, another tool): the nested folder is the outer capture's content
    mkdirSync(x, { recursive: true });
    writeFileSync(join(x, "kerncap.json"), forgedManifest(cap));
    writeFileSync(join(x, "build.sh"), planted(marker), { mode: 0o755 });
    const v = await c.callTool({ name: "validate", arguments: { dir: x } });
    expect(v.isError).toBe(true);
    expect(doc(v).error.code).toBe("E_NESTED_CAPTURE");
    expect(doc(v).error.message).toContain(`lies inside the capture ${cap}`);
    expect(existsSync(marker)).toBe(false);
    // every tool that takes a folder refuses it, the file tools too
    for (const [name, args] of [
      ["inspect", { dir: x }],
      ["replay", { dir: x }],
      ["tune", { dir: x, maxrregcount: [32] }],
      ["profile", { dir: x, build: true }],
      ["read_file", { dir: x, path: "build.sh" }],
      ["edit_file", { dir: x, path: "src/k.cu", content: "int k;\n" }],
      ["validate", { dir: `${x}/.` }],
    ] as const) {
      const r = await c.callTool({ name, arguments: args });
      expect(doc(r).error?.code, name).toBe("E_NESTED_CAPTURE");
    }
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(x, "src"))).toBe(false);
    await c.close();
  }, 60_000);

  test("the source set comes from the capture's frontend: Triton writes .py but never repro.py or Python's start-up files, HIP adds .hip, a frontend without sources writes nothing", () => {
    const fe = (frontend: string) => ({ kernel: { frontend } }) as Parameters<typeof notAnEditableSource>[0];
    expect(notAnEditableSource(fe("triton"), "src/kernels/matmul.py")).toBeUndefined();
    for (const p of ["src/repro.py", "src/x/sitecustomize.py", "src/usercustomize.py", "src/k.cu", "src/pinned.json"])
      expect(notAnEditableSource(fe("triton"), p), p).toBeDefined();
    expect(notAnEditableSource(fe("hip"), "src/k.hip")).toBeUndefined();
    expect(notAnEditableSource(fe("cuda"), "src/k.hip")).toContain("is not a cuda source file");
    expect(notAnEditableSource(fe("cuda"), "src/deep/er/k.cuh")).toBeUndefined();
    expect(notAnEditableSource(fe("cuda"), "src/deep/KERNCAP-received.JSON")).toContain("at any depth");
    expect(notAnEditableSource(fe("nosuch"), "src/k.cu")).toBe("a nosuch capture has no source files an agent may edit");
  });

  test("every verb refuses a capture nested in another with exit 2 and E_NESTED_CAPTURE; a folder of captures side by side is no capture", async () => {
    const { root, cap, marker } = await victim();
    const x = join(cap, "src/x");
    mkdirSync(x, { recursive: true });
    writeFileSync(join(x, "kerncap.json"), forgedManifest(cap));
    writeFileSync(join(x, "build.sh"), planted(marker), { mode: 0o755 });
    for (const argv of [
      ["inspect", x],
      ["replay", x],
      ["validate", x],
      ["validate", x, "--trust"],
      ["validate", x, "--confine", "--trust"],
      ["validate", "--watch", x],
      ["profile", x, "--build", "--trust"],
      ["tune", x, "--maxrregcount", "32", "--trust"],
      ["pack", x, "-o", join(root, "x.zip")],
    ]) {
      const r = cli(argv);
      expect(r.code, argv.join(" ")).toBe(2);
      // validate --watch --json is a stream of events: its error is one event, with the code at the top
      const e = r.doc.error ?? r.doc;
      expect(e.code, argv.join(" ")).toBe("E_NESTED_CAPTURE");
      expect(e.message, argv.join(" ")).toContain(cap);
    }
    // check: the nested capture is refused as its own case, never built
    const chk = cli(["check", x, "--rebuild", "--trust"]);
    expect(chk.code).not.toBe(0);
    expect(JSON.stringify(chk.doc)).toContain("E_NESTED_CAPTURE");
    // kerncap never writes a capture inside another one
    expect(cli(["demo", join(cap, "src/demo")]).doc.error?.code).toBe("E_NESTED_CAPTURE");
    expect(existsSync(join(cap, "src/demo"))).toBe(false);
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(root, "x.zip"))).toBe(false);
    // a deeper folder, and the same through a link to it, name the outer capture too
    mkdirSync(join(cap, "src/a/b"), { recursive: true });
    expect(outerCapture(join(cap, "src/a/b"))).toBe(cap);
    require("node:fs").symlinkSync(x, join(root, "link"));
    expect(outerCapture(join(root, "link"))).toBe(realpathSync(cap));
    // a folder of captures side by side (check's corpus): each is a capture of its own
    const corpus = join(root, "corpus");
    mkdirSync(corpus);
    await makeCapture(join(corpus, "a"));
    await makeCapture(join(corpus, "b"));
    expect(() => assertNotNested(join(corpus, "a"))).not.toThrow();
    expect(readManifest(join(corpus, "b")).kernel.name).toBe("_Z5scalePfi");
    // a kerncap.json of another format above is not a capture's
    writeFileSync(join(root, "kerncap.json"), JSON.stringify({ format: "something-else" }));
    expect(outerCapture(join(corpus, "a"))).toBeUndefined();
  }, 120_000);

  test("the captures of one run (a capture set: kerncap-captures.json, no kerncap.json) and a capture inside a folder unpack marked each open as captures of their own", async () => {
    const root = tempDir("kerncap-attack-");
    const set = join(root, "set");
    mkdirSync(set);
    await makeCapture(join(set, "k0"));
    await makeCapture(join(set, "k1"));
    writeFileSync(
      join(set, "kerncap-captures.json"),
      JSON.stringify({
        format: "kerncap-capture-set",
        version: 1,
        command: ["./app"],
        captures: [
          { dir: "k0", kernel: "_Z5scalePfi", launchIndex: 5 },
          { dir: "k1", kernel: "_Z5scalePfi", launchIndex: 5 },
        ],
      }),
    );
    for (const k of ["k0", "k1"]) expect(cli(["inspect", join(set, k)]).code).toBe(0);
    expect(cli(["inspect", set]).doc.error.code).toBe("E_NOT_CAPTURE"); // the set itself is no capture: it says which to give
    const got = join(root, "got");
    mkdirSync(got);
    writeFileSync(join(got, "kerncap-received.json"), "{}");
    await makeCapture(join(got, "a"));
    const r = cli(["inspect", join(got, "a")]);
    expect(r.code).toBe(0);
    expect(r.doc.received.reasons).toContain(`it lies inside ${realpathSync(got)}, which was unpacked from an archive`);
  }, 60_000);
});

describe("attack: an agent's edit past the file system's path limits makes the capture unpackable", () => {
  test("edit_file and evaluate's files refuse a source path over 1024 bytes, 32 parts or a 255-byte name (E_PACK_NAME); nothing is created", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    writeFileSync(join(cap, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
    const c = await mcp();
    const tooLong = [
      [`src/${"a/".repeat(2100)}x.cu`, "bytes long; a source path is at most 1024 bytes"],
      [`src/${"a/".repeat(32)}x.cu`, "parts deep; a source path has at most 32 parts"],
      [`src/${"n".repeat(256)}.cu`, "a file or folder name is at most 255 bytes"],
    ] as const;
    for (const [path, why] of tooLong) {
      const e = doc(await c.callTool({ name: "edit_file", arguments: { dir: cap, path, content: "int kc_x;" } })).error;
      expect(e?.code).toBe("E_PACK_NAME");
      expect(e.message).toContain(why);
      // evaluate: the candidate's own record (never written, never built)
      const ev = doc(await c.callTool({ name: "evaluate", arguments: { dir: cap, candidates: [{ name: "a", files: { [path]: "int kc_x;" } }] } }));
      expect(ev.error).toBeUndefined();
      expect(ev.records).toMatchObject([{ label: "a", verdict: "error", code: "E_PACK_NAME" }]);
      expect(ev.records[0].reason).toContain(why);
    }
    expect(readdirSync(join(cap, "src"))).toEqual(["kernel.cu"]);
    // within the limits: written
    const ok = `src/${"a/".repeat(30)}${"n".repeat(200)}.cu`;
    expect(doc(await c.callTool({ name: "edit_file", arguments: { dir: cap, path: ok, content: "int kc_x;" } })).error).toBeUndefined();
    expect(readFileSync(join(cap, ok), "utf8")).toBe("int kc_x;");
    await c.close();
  }, 60_000);

  test("a capture holding a path past PATH_MAX (made by hand): pack says it cannot *read* it, never write", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"));
    // one folder at a time from the one before (no path past PATH_MAX is ever passed to the kernel)
    const deep = Bun.spawnSync([
      "python3",
      "-c",
      "import os,sys\nos.chdir(sys.argv[1])\nfor i in range(2100): os.mkdir('a'); os.chdir('a')\nopen('x.cu','w').write('x')",
      join(cap, "src"),
    ]);
    expect(deep.exitCode).toBe(0);
    const r = cli(["pack", cap, "-o", join(root, "cap.zip")]);
    expect(r.code).toBe(2);
    expect(r.doc.error.code).toBe("E_IO");
    expect(r.doc.error.message).toStartWith(`cannot read ${cap}/src/a/a/`);
    expect(r.doc.error.message).toEndWith(": the name is too long");
    expect(r.doc.error.hint).toContain("longer than the system takes");
    rmSync(join(cap, "src/a"), { recursive: true }); // no 2100-deep folder left for other walkers of the temp folder
  }, 60_000);
});

describe("attack: an MCP --root escaped through a capture set's member that links outside", () => {
  test("a set under the root holding a link to a capture outside: refused (E_NOT_CAPTURE) as naming the member is; eval's inputs refuse the link (E_UNSAFE_PATH)", async () => {
    const base = tempDir("kerncap-attack-");
    const root = join(base, "root");
    const set = join(root, "s");
    mkdirSync(set, { recursive: true });
    await makeCapture(join(base, "outside"));
    await makeCapture(join(root, "real"));
    await makeCapture(join(set, "c0"));
    symlinkSync(join(base, "outside"), join(set, "c1"));
    const index = (dirs: string[]) =>
      writeFileSync(
        join(set, "kerncap-captures.json"),
        JSON.stringify({
          format: "kerncap-capture-set",
          version: 1,
          command: ["x"],
          captures: dirs.map((dir) => ({ dir, kernel: "_Z5scalePfi", launchIndex: 0 })),
        }),
      );
    index(["c0", "c1"]);
    const c = await connected({ trust: { roots: [root] }, name: "attacker" });
    const args = (inputs: string[]) => ({ dir: join(root, "real"), inputs, candidates: [{ name: "a", files: { "src/kernel.cu": "int x;" } }] });
    const direct = doc(await c.callTool({ name: "evaluate", arguments: args([join(set, "c1")]) })).error;
    const viaSet = doc(await c.callTool({ name: "evaluate", arguments: args([set]) })).error;
    expect(direct.code).toBe("E_NOT_CAPTURE");
    expect(viaSet?.code).toBe("E_NOT_CAPTURE");
    expect(() => confineToolDir(set, [root])).toThrow(/names no capture folder under the folders/);
    // a link that stays under the root is refused too: a set's members are real folders inside it
    rmSync(join(set, "c1"));
    symlinkSync(join(root, "real"), join(set, "c1"));
    expect(() => confineToolDir(set, [root])).toThrow(/names no capture folder under the folders/);
    const e = (() => {
      try {
        resolveInputs([set]);
      } catch (x) {
        return x as KerncapError;
      }
    })();
    expect(e?.code).toBe("E_UNSAFE_PATH");
    expect(e?.message).toContain("c1 in");
    expect(e?.message).toContain("is a symbolic link, not a folder");
    // members that are real folders under the root pass
    index(["c0"]);
    expect(() => confineToolDir(set, [root])).not.toThrow();
    expect(resolveInputs([set]).map((i) => i.id)).toEqual(["s/c0"]);
    await c.close();
  }, 60_000);
});

describe("attack: an MCP --root another user can write: a capture's name swapped for a link between the check and the tool", () => {
  // adversary 34: in a 1777 root, the attacker flipped their capture `cap` and a link to the user's home; read_file
  // returned the home's files and edit_file rewrote a project's source. The name is now refused where others could change it.
  test("a capture in a root others may write (0777, not sticky) is E_UNSAFE_PATH saying why, for the file tools and the verbs; in a folder only the user writes it passes", async () => {
    const base = realpathSync(tempDir("kerncap-shared-root-"));
    const root = join(base, "shared");
    mkdirSync(root);
    await makeCapture(join(root, "cap"));
    chmodSync(root, 0o777);
    expect(() => confineToolDir(join(root, "cap"), [root])).toThrow(/writable by other users \(mode 0777\) and not sticky/);
    const c = await connected({ trust: { roots: [root] }, name: "attacker" });
    for (const [name, args] of [
      ["read_file", { dir: join(root, "cap"), path: "kerncap.json" }],
      ["list_files", { dir: join(root, "cap") }],
      ["edit_file", { dir: join(root, "cap"), path: "src/kernel.cu", content: "int x;" }],
      ["inspect", { dir: join(root, "cap") }],
    ] as const) {
      const e = doc(await c.callTool({ name, arguments: args })).error;
      expect(e?.code, name).toBe("E_UNSAFE_PATH");
      expect(e?.message, name).toContain("so a tool could reach another folder by this name than the one checked");
    }
    chmodSync(root, 0o755);
    expect(() => confineToolDir(join(root, "cap"), [root])).not.toThrow();
    expect(doc(await c.callTool({ name: "read_file", arguments: { dir: join(root, "cap"), path: "kerncap.json" } })).error).toBeUndefined();
    await c.close();
  }, 60_000);

  test.skipIf(process.geteuid?.() !== 0)(
    "a capture another user owns in a sticky root others write (1777): refused, its owner may rename it; the user's own capture there passes",
    async () => {
      const root = join(realpathSync(tempDir("kerncap-sticky-root-")), "shared");
      mkdirSync(root);
      await makeCapture(join(root, "theirs"));
      await makeCapture(join(root, "mine"));
      Bun.spawnSync(["chown", "-R", "65534", join(root, "theirs")]);
      chmodSync(root, 0o1777);
      expect(() => confineToolDir(join(root, "theirs"), [root])).toThrow(
        /belongs to another user \(uid 65534\) and lies in .*which others may write \(mode 1777\): its owner may rename it/,
      );
      expect(() => confineToolDir(join(root, "mine"), [root])).not.toThrow();
    },
    60_000,
  );
});

describe("attack: a confined build runs a build.sh kerncap did not write", () => {
  sandboxOffForMarkers(); // build.sh writes markers outside the capture
  test("build.sh changed after capture: kerncap mcp's validate, tune and profile refuse before anything runs (E_NOT_RENDERED), --trust-builds too; the user's validate --trust on the command line is what lets it run", async () => {
    const { cap, marker } = await victim();
    writeFileSync(join(cap, "build.sh"), planted(marker), { mode: 0o755 });
    expect(notRendered(cap, readManifest(cap))[0]).toContain("build.sh was changed since kerncap wrote it");
    for (const trustBuilds of [false, true]) {
      const c = await mcp(trustBuilds);
      for (const [name, args] of [
        ["validate", { dir: cap }],
        ["tune", { dir: cap, maxrregcount: [32] }],
        ["profile", { dir: cap, build: true }],
      ] as const) {
        const r = await c.callTool({ name, arguments: args });
        expect(doc(r).error?.code, `${name} ${trustBuilds}`).toBe("E_NOT_RENDERED");
        expect(doc(r).error.message).toContain("build.sh was changed since kerncap wrote it");
        expect(doc(r).error.hint).toContain(`kerncap validate ${cap} --trust`);
      }
      await c.close();
    }
    expect(existsSync(marker)).toBe(false);
    // the user reads it and trusts it on the command line: recorded, and kerncap mcp then runs those bytes
    cli(["validate", cap, `--trust=${trustDigest(cap)}`]);
    expect(existsSync(marker)).toBe(true);
    rmMarker(marker);
    const c = await mcp();
    const again = await c.callTool({ name: "validate", arguments: { dir: cap } });
    expect(doc(again).error?.code).not.toBe("E_NOT_RENDERED");
    expect(existsSync(marker)).toBe(true);
    // a change after that asks again
    rmMarker(marker);
    writeFileSync(join(cap, "build.sh"), planted(marker) + "# more\n", { mode: 0o755 });
    expect(doc(await c.callTool({ name: "validate", arguments: { dir: cap } })).error?.code).toBe("E_NOT_RENDERED");
    expect(existsSync(marker)).toBe(false);
    await c.close();
  }, 120_000);

  test("finalize records what the templates wrote (build.sh, pinned.json) in manifest.rendered; the capture passes the confined gate as written", async () => {
    const root = tempDir("kerncap-attack-");
    const cap = join(root, "cap");
    const tmp = `${cap}.tmp-${process.pid}`;
    const raw = writeRawCapture(tmp);
    await finalizeCapture(raw, {
      tmpDir: tmp,
      finalDir: cap,
      force: false,
      command: ["./app"],
      match: "scale",
      beforeRename: (d) => {
        writeFileSync(join(d, "build.sh"), "#!/usr/bin/env bash\nexit 1\n", { mode: 0o755 });
        writeFileSync(join(d, "pinned.json"), "{}\n");
      },
    });
    const m = readManifest(cap);
    const sha = (t: string) => new Bun.CryptoHasher("sha256").update(t).digest("hex");
    expect(m.rendered).toEqual([
      { path: "build.sh", sha256: sha("#!/usr/bin/env bash\nexit 1\n") },
      { path: "pinned.json", sha256: sha("{}\n") },
    ]);
    expect(notRendered(cap, m)).toEqual([]);
    expect(() => requireRenderedBuild(cap, m)).not.toThrow();
    writeFileSync(join(cap, "repro.py"), "import os\n");
    expect(notRendered(cap, m)).toEqual([expect.stringContaining("repro.py (sha256 ")]);
  });

  test("a capture whose manifest records no rendered build (an older kerncap's): refused the same way, naming why", async () => {
    const { cap, marker } = await victim();
    const m = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    delete m.rendered;
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify(m));
    writeFileSync(join(cap, "build.sh"), planted(marker), { mode: 0o755 });
    const r = cli(["validate", cap, "--confine"]);
    expect(r.code).toBe(2);
    expect(r.doc.error.code).toBe("E_NOT_RENDERED");
    expect(r.doc.error.message).toContain("kerncap.json records no digest of it (a capture made before kerncap recorded them)");
    expect(existsSync(marker)).toBe(false);
  }, 60_000);

  // trial adv23 (finding 5), with the real nvcc: the flag makes gcc read src/kc.h as options, and the agent writes src/kc.h
  test.skipIf(!existsSync("/usr/local/bin/nvcc") && !Bun.which("nvcc"))(
    "a received capture whose flags hold -isystem=@src/kc.h (build.sh recorded as rendered), served with --trust-builds: the agent's `-wrapper /bin/sh,-c,CMD` in src/kc.h never runs; validate refuses (E_UNSAFE_PATH) before anything runs",
    async () => {
      const root = tempDir("kerncap-attack-");
      const made = join(root, "made");
      const marker = join(root, "PWNED");
      await makeCapture(made);
      mkdirSync(join(made, "src"));
      writeFileSync(join(made, "src/kernel.cu"), "__global__ void scale(float* x, int n) { x[0] *= 2.0f; }\n");
      writeFileSync(join(made, "src/kc.h"), "/nonexistent\n");
      writeFileSync(join(made, "build.sh"), stockBuildSh("-O2 -isystem=@src/kc.h"), { mode: 0o755 });
      recordRendered(made);
      const cap = (await unpackArchive((await packCapture(made, join(root, "cap.zip"))).archive, join(root, "got"))).dir;
      const nvcc = process.env.NVCC;
      delete process.env.NVCC;
      try {
        const c = await mcp(true);
        const edit = await c.callTool({
          name: "edit_file",
          arguments: { dir: cap, path: "src/kc.h", content: `nonexistent -wrapper '/bin/sh,-c,touch ${marker};exec "$0" "$@"'\n` },
        });
        expect(edit.isError).toBeFalsy();
        const r = await c.callTool({ name: "validate", arguments: { dir: cap } });
        expect(existsSync(marker)).toBe(false);
        expect(doc(r).error?.code).toBe("E_UNSAFE_PATH");
        expect(doc(r).error.message).toContain("(@file)");
        await c.close();
      } finally {
        if (nvcc !== undefined) process.env.NVCC = nvcc;
      }
    },
    120_000,
  );
});

describe("attack: made here means this machine's id", () => {
  test("a manifest with no host whose process.hostname is this machine is received: build.sh does not run without --trust (exit 2, E_UNTRUSTED naming why)", async () => {
    const { cap, marker } = await victim();
    writeFileSync(join(cap, "kerncap.json"), forgedManifest(cap));
    writeFileSync(join(cap, "build.sh"), planted(marker), { mode: 0o755 });
    const m = readManifest(cap);
    expect(m.process?.hostname).toBe(hostname());
    expect(receivedReasons(cap, m)).toEqual([
      `its manifest records no host machine-id (the capturing process's host name ${JSON.stringify(hostname())} is not enough)`,
    ]);
    const r = cli(["validate", cap]);
    expect(r.code).toBe(2);
    expect(r.doc.error.code).toBe("E_UNTRUSTED");
    expect(r.doc.error.message).toContain("the capturing process's host name");
    expect(existsSync(marker)).toBe(false);
    // a host name alone (this machine's, without its machine-id) is not enough either
    const named = { ...m, host: { name: hostname(), machineId: null } };
    expect(notMadeHere(named)).toBe(
      `its manifest names host ${JSON.stringify(hostname())} but no machine-id (an archive and an export carry none: pack leaves it out)`,
    );
    // another machine's id with this host's name: said without printing either id (the id is what makes a capture local)
    const other = notMadeHere(
      { ...m, host: { name: hostname(), machineId: "0123456789abcdef0123456789abcdef" } },
      { name: hostname(), machineId: "fedcba9876543210fedcba9876543210" },
    );
    expect(other).toContain("under another machine-id than this machine's");
    expect(other).not.toMatch(/0123456789abcdef|fedcba9876543210/);
    // inspect --json: the manifest with host.machineId null; whether it was made here is `received`
    const own = join(tempDir(), "own");
    await makeCapture(own);
    const here = hostIdentity().machineId;
    expect(readManifest(own).host?.machineId).toBe(here);
    const i = cli(["inspect", own]);
    expect(i.code).toBe(0);
    expect(i.doc.manifest.host.machineId).toBeNull();
    expect(i.doc.received.received).toBe(here === null);
    if (here) expect(i.out).not.toContain(here);
  }, 60_000);

  test("without /etc/machine-id (a container), kerncap's own id for this user: made once in the user's state folder (0600, O_EXCL), the same on every call; none in a state folder others can write", async () => {
    const { kerncapMachineId } = await import("../../src/format/received.ts");
    const saved = process.env.XDG_STATE_HOME;
    const state = mkdtempSync(join(tmpdir(), "kc-mid-"));
    process.env.XDG_STATE_HOME = state;
    try {
      const a = kerncapMachineId();
      expect(a).toMatch(/^[0-9a-f]{32}$/);
      expect(kerncapMachineId()).toBe(a);
      expect(statSync(join(state, "kerncap/machine-id")).mode & 0o777).toBe(0o600);
      // another state folder (another user's, or a fresh machine): another id, so a copied manifest of it is not made here
      process.env.XDG_STATE_HOME = mkdtempSync(join(tmpdir(), "kc-mid-"));
      expect(kerncapMachineId()).not.toBe(a);
      // a state folder every user can write: no id (nothing there can be trusted)
      const open = mkdtempSync(join(tmpdir(), "kc-mid-"));
      mkdirSync(join(open, "kerncap"), { mode: 0o777 });
      chmodSync(join(open, "kerncap"), 0o777);
      process.env.XDG_STATE_HOME = open;
      expect(kerncapMachineId()).toBeNull();
    } finally {
      if (saved === undefined) delete process.env.XDG_STATE_HOME;
      else process.env.XDG_STATE_HOME = saved;
    }
  });

  test("on a machine without a machine-id, every capture is received, even one that names this host", async () => {
    const { cap } = await victim();
    const m = readManifest(cap);
    const here = hostIdentity();
    if (here.machineId) expect(receivedReasons(cap, m)).toEqual([]); // made here, by this user, on this machine
    const none = { name: here.name, machineId: null };
    expect(notMadeHere({ host: { name: here.name, machineId: null } }, none)).toBe(
      "this machine has no machine-id (/etc/machine-id) and kerncap keeps none for you (no state folder of your own), so no capture counts as made here",
    );
    expect(receivedReasons(cap, m, none)).toEqual([
      "this machine has no machine-id (/etc/machine-id) and kerncap keeps none for you (no state folder of your own), so no capture counts as made here",
    ]);
  });

  test("inspect says whether a capture counts as received and why, in text and in --json", async () => {
    const { cap } = await victim();
    const own = cli(["inspect", cap]);
    expect(own.code).toBe(0);
    expect(own.doc.received).toEqual(
      hostIdentity().machineId
        ? { received: false, reasons: [], trusted: true } // made here by this user: its build runs without --trust
        : {
            received: true,
            reasons: [
              "this machine has no machine-id (/etc/machine-id) and kerncap keeps none for you (no state folder of your own), so no capture counts as made here",
            ],
            trusted: false,
          },
    );
    writeFileSync(join(cap, "kerncap.json"), forgedManifest(cap));
    const forged = cli(["inspect", cap]);
    expect(forged.doc.received.received).toBe(true);
    expect(forged.doc.received.reasons[0]).toContain("records no host machine-id");
    expect(forged.doc.received.trusted).toBe(false);
    const text = cli(["inspect", cap], false);
    expect(text.code).toBe(0);
    expect(text.out).toContain("trust      received: a rebuild runs its build.sh only after --trust, because\n  - its manifest records no host machine-id");
    // once the user trusted it (validate --trust; here its build fails at once), inspect says so
    cli(["validate", cap, `--trust=${trustDigest(cap)}`]);
    expect(cli(["inspect", cap]).doc.received.trusted).toBe(true);
    expect(cli(["inspect", cap], false).out).toContain(
      "trust      received (not shown to be made here by you), its build trusted as it is now: a rebuild runs its build.sh without --trust until build.sh changes. Received because\n  - its manifest records no host machine-id",
    );
  }, 60_000);
});

function rmMarker(marker: string): void {
  require("node:fs").rmSync(marker, { force: true });
}

describe("the server's roots and a process's working folder (adversary 81)", () => {
  test("run's and list's cwd inside a capture (a received src/ holding libdl.so.2) is refused before any process starts (#04, #16)", async () => {
    const { confineCwd } = await import("../../src/mcp/roots.ts");
    const root = tempDir();
    const cap = join(root, "recv");
    await makeCapture(cap);
    mkdirSync(join(cap, "src"), { recursive: true });
    mkdirSync(join(root, "app"));
    for (const cwd of [cap, join(cap, "src")]) {
      let err: unknown;
      try {
        confineCwd(cwd, [root]);
      } catch (e) {
        err = e;
      }
      expect((err as KerncapError).code, cwd).toBe("E_UNSAFE_PATH");
      expect((err as KerncapError).message).toContain(`lies in the capture ${realpathSync(cap)}`);
    }
    expect(() => confineCwd(join(root, "app"), [root])).not.toThrow(); // the application's own folder
  });

  test.skipIf(process.getuid?.() !== 0)(
    "a root named through another user's link in a sticky folder is refused at startup, its real path pinned otherwise (#18)",
    async () => {
      const { pinnedRoots } = await import("../../src/mcp/roots.ts");
      const { lchownSync } = await import("node:fs");
      const d = tempDir();
      const sticky = join(d, "shared");
      mkdirSync(sticky);
      chmodSync(sticky, 0o1777);
      mkdirSync(join(d, "theirs"));
      symlinkSync(join(d, "theirs"), join(sticky, "root"));
      lchownSync(join(sticky, "root"), 65534, 65534);
      let err: unknown;
      try {
        pinnedRoots([join(sticky, "root")]);
      } catch (e) {
        err = e;
      }
      expect((err as KerncapError).code).toBe("E_UNSAFE_PATH");
      // the user's own link: served by the folder's real path, not the link's name
      symlinkSync(join(d, "theirs"), join(d, "mine"));
      expect(pinnedRoots([join(d, "mine")])).toEqual([realpathSync(join(d, "theirs"))]);
    },
  );
});

describe("bypasses of the load-path and working-folder rules (adversary 82)", () => {
  test("a load path resolved per process (/proc/self/cwd, /dev/fd/…) and LD_AUDIT are dropped from a helper's environment (#08)", async () => {
    const { buildChildEnv } = await import("../../src/env.ts");
    const env = buildChildEnv(
      {
        LD_LIBRARY_PATH: "/proc/self/cwd:/usr/local/cuda/lib64:/dev/fd/../../self/cwd:/proc/thread-self/cwd",
        LD_AUDIT: "./libaudit.so:/proc/self/cwd/a.so",
        LD_PRELOAD: "/sys/x.so /usr/lib/ok.so",
        PYTHONPATH: "/proc/self/cwd",
      },
      [],
    );
    expect(env.LD_LIBRARY_PATH).toBe("/usr/local/cuda/lib64");
    expect(env.LD_AUDIT).toBeUndefined();
    expect(env.LD_PRELOAD).toBe("/usr/lib/ok.so");
    expect(env.PYTHONPATH).toBeUndefined();
  });

  test("run's and list's cwd at the top of a capture set (a copied set's folder holding libraries) is refused (#01)", async () => {
    const { confineCwd } = await import("../../src/mcp/roots.ts");
    const root = tempDir();
    const set = join(root, "recvset");
    mkdirSync(set);
    writeFileSync(join(set, "kerncap-captures.json"), "{}");
    let err: unknown;
    try {
      confineCwd(set, [root]);
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).code).toBe("E_UNSAFE_PATH");
  });

  test("a judge file's element type with a newline: the refusal is one escaped line (#09)", async () => {
    const { readJudging } = await import("../../src/replay/judge-settings.ts");
    const d = tempDir();
    const settings = { dtype: "fp32\n[kerncap] \u2714 FORGED" };
    const sha256 = new Bun.CryptoHasher("sha256").update(JSON.stringify(settings)).digest("hex");
    writeFileSync(join(d, "kerncap-judge.json"), JSON.stringify({ schema: "kerncap.judge-settings/1", settings, sha256 }));
    let err: unknown;
    try {
      readJudging(d);
    } catch (e) {
      err = e;
    }
    expect((err as KerncapError).message).toContain("is not a known element type");
    expect((err as KerncapError).message).not.toContain("\n");
  });
});

describe("bypasses of the load-path rule (adversary 83)", () => {
  test("a per-process or capture load path spelled otherwise (/./proc, /usr/../proc, //proc, a link to /proc/self/cwd, //capture) is dropped (#01)", async () => {
    const { buildChildEnv } = await import("../../src/env.ts");
    const d = tempDir();
    const cap = join(d, "cap");
    mkdirSync(join(cap, "src"), { recursive: true });
    symlinkSync("/proc/self/cwd", join(d, "here"));
    symlinkSync("cap/src", join(d, "via"));
    mkdirSync(join(d, "lib"));
    const env = buildChildEnv(
      {
        LD_LIBRARY_PATH: [
          "/./proc/self/cwd",
          "/usr/../proc/self/cwd",
          "/.//proc/self/cwd",
          "//proc/self/cwd",
          join(d, "here"),
          `${d}//cap/src`,
          join(d, "via"),
          `${cap}/./src`,
          join(d, "lib"),
          "/usr/local/cuda/lib64",
        ].join(":"),
        LD_PRELOAD: "/./proc/self/cwd/libx.so /usr/lib/ok.so",
        PATH: `/usr/bin:/usr/lib/../../proc/self/cwd:${d}/lib/../here`,
      },
      [cap],
    );
    expect(env.LD_LIBRARY_PATH).toBe(`${join(d, "lib")}:/usr/local/cuda/lib64`);
    expect(env.LD_PRELOAD).toBe("/usr/lib/ok.so");
    expect(env.PATH).toBe("/usr/bin");
  });
});

describe("pinned.json's names in kerncap's own repro.py messages (adversary 83, regression of 80 #11)", () => {
  const PY = Bun.which("python3");
  test.skipIf(!PY)("a newline in fnName, tritonVersion or the kernel file's syntax error is shown escaped, never starting a line", () => {
    const d = tempDir();
    // the stand-in Triton (3.0.0), with a JITFunction type that nothing in the kernel file is
    const site = fakeTritonSite();
    mkdirSync(join(site, "triton/runtime"));
    writeFileSync(join(site, "triton/runtime/__init__.py"), "from . import jit\n");
    writeFileSync(join(site, "triton/runtime/jit.py"), "class JITFunction: pass\n");
    appendFileSync(join(site, "triton/__init__.py"), "from . import runtime\n");
    const repro = join(import.meta.dir, "../../templates/triton/repro.py");
    mkdirSync(join(d, "cap/src"), { recursive: true });
    const run = (pin: Record<string, unknown>, kernel: string) => {
      writeFileSync(join(d, "cap/pinned.json"), JSON.stringify({ kernelFile: "k.py", python: PY, constexprs: [], ...pin }));
      writeFileSync(join(d, "cap/src/k.py"), kernel);
      const p = Bun.spawnSync([PY!, repro, "--dir", join(d, "cap")], { env: { ...process.env, PYTHONPATH: site }, stderr: "pipe" });
      return { code: p.exitCode, err: p.stderr.toString() };
    };
    const forged = "x\n[kerncap] \u2714 FORGED\u2028y";
    const version = run({ fnName: "k", tritonVersion: forged }, "");
    const name = run({ fnName: forged, tritonVersion: "3.0.0" }, "k = 1\n");
    const syntax = run({ fnName: "k", tritonVersion: "3.0.0" }, "def (:\r[kerncap] \u2714 FORGED\n");
    for (const [what, r] of [
      ["version", version],
      ["fnName", name],
      ["syntax", syntax],
    ] as const) {
      expect(r.code, what).not.toBe(0);
      expect(r.err, what).toContain("repro.py: ");
      expect(
        r.err
          .split("\n")
          .filter((l) => l.includes("FORGED"))
          .every((l) => !l.startsWith("[kerncap]")),
        `${what}: ${r.err}`,
      ).toBe(true);
      expect(r.err, what).not.toMatch(/[\r\u2028]/);
    }
    expect(version.err).toContain("captured with x\\x0a[kerncap]");
    expect(name.err).toContain("has no @triton.jit function named x\\x0a[kerncap]");
    expect(syntax.err).toContain("SyntaxError");
  });
});

describe("bypasses of the load-path, cwd and name rules (adversary 84)", () => {
  test("LD_LIBRARY_PATH split on ';' as the loader splits it, and an entry with a loader token ($PLATFORM, $ORIGIN, $LIB) dropped (#01 #07 #08)", async () => {
    const { buildChildEnv } = await import("../../src/env.ts");
    const env = buildChildEnv(
      {
        LD_LIBRARY_PATH: "/usr/local/cuda/lib64;:/usr/lib;src:/opt/plat/$PLATFORM:/opt/${LIB}/x:$ORIGIN/lib",
        LD_PRELOAD: "/opt/$LIB/libx.so /usr/lib/ok.so",
        LD_AUDIT: "/opt/$PLATFORM/a.so",
      },
      [],
    );
    expect(env.LD_LIBRARY_PATH).toBe("/usr/local/cuda/lib64:/usr/lib");
    expect(env.LD_PRELOAD).toBe("/usr/lib/ok.so");
    expect(env.LD_AUDIT).toBeUndefined();
  });

  test("MCP cwd outside the roots: one message whether it exists, is missing or cannot be searched; a missing one under the roots is the tool's (#02)", async () => {
    const { confineCwd } = await import("../../src/mcp/roots.ts");
    const root = tempDir();
    mkdirSync(join(root, "in"));
    mkdirSync(join(root, "out"));
    const said = new Set<string>();
    for (const cwd of [join(root, "out"), join(root, "missing"), "/root/x/y", join(root, "in/../out2")]) {
      let err: unknown;
      try {
        confineCwd(cwd, [join(root, "in")]);
      } catch (e) {
        err = e;
      }
      expect((err as KerncapError).code, cwd).toBe("E_UNSAFE_PATH");
      said.add((err as KerncapError).message.replace(JSON.stringify(cwd), "CWD"));
    }
    expect(said.size).toBe(1);
    expect(() => confineCwd(join(root, "in/not-yet"), [join(root, "in")])).not.toThrow();
  });

  test("a capture folder whose path holds a newline, a control or an invisible character is refused by every reader, the name shown escaped (#06)", async () => {
    const root = tempDir();
    for (const name of ["n\n[kerncap] \u2714 FORGED", "a\u202eb", "c\u001b[2Jd"]) {
      const dir = join(root, name);
      await makeCapture(dir);
      let err: unknown;
      try {
        readManifest(dir);
      } catch (e) {
        err = e;
      }
      expect((err as KerncapError).code, JSON.stringify(name)).toBe("E_UNSAFE_PATH");
      expect((err as KerncapError).message).not.toMatch(/[\n\u001b\u202e]/);
      expect((err as KerncapError).hint).toContain("mv ");
    }
  });
});

describe("bounded work on untrusted files (adversary 85)", () => {
  test("a manifest, a capture set, a candidate list of a million empty entries are refused at their first bad entry, in bounded time (#12: 4 KB of issues per entry, 4 GB for 3 MB)", async () => {
    const { readCaptureSet } = await import("../../src/format/capture-set.ts");
    const { listedCandidates } = await import("../../src/eval/candidates.ts");
    const d = tempDir();
    const many = Array.from({ length: 1_000_000 }, () => ({}));
    const cap = join(d, "cap");
    await makeCapture(cap);
    const real = JSON.parse(readFileSync(join(cap, "kerncap.json"), "utf8"));
    writeFileSync(join(cap, "kerncap.json"), JSON.stringify({ ...real, regions: [...many, ...real.regions] }));
    const set = join(d, "set");
    mkdirSync(set);
    writeFileSync(join(set, "kerncap-captures.json"), JSON.stringify({ schema: "kerncap.capture-set/1", captures: many }));
    const list = join(d, "list.json");
    writeFileSync(list, JSON.stringify({ candidates: many }));
    for (const [what, read] of [
      ["manifest", () => readManifest(cap)],
      ["capture set", () => readCaptureSet(set)],
      ["candidate list", () => listedCandidates(list)],
    ] as const) {
      const before = process.memoryUsage().rss;
      const t0 = performance.now();
      expect(read, what).toThrow();
      expect(performance.now() - t0, what).toBeLessThan(5000);
      expect(process.memoryUsage().rss - before, what).toBeLessThan(1 << 30);
    }
  }, 60_000);
});
