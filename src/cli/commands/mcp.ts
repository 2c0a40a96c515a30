/** `kerncap mcp`: an MCP server on stdin/stdout (src/mcp/server.ts); logs stay on stderr. */
import { defineCommand } from "citty";
import { resolve } from "node:path";
import { realpathSync } from "node:fs";
import { EscapedStdioTransport } from "../../mcp/stdio.ts";
import { log } from "../../log.ts";
import { endedByOversizedMessage, MCP_MESSAGE_MAX, serve, TOOL_NAMES } from "../../mcp/server.ts";
import { KerncapError } from "../../errors.ts";
import { verboseArg } from "../args.ts";
import { selfCommand } from "../../util/self-exec.ts";
import { CLIENT_NAMES, clientConfig } from "../../mcp/clients.ts";
import { MCP_DEFAULT_JOBS } from "../../mcp/children.ts";
import { oneLine, printable } from "../format.ts";
import { assertRootFolders, pinnedRoots } from "../../mcp/roots.ts";
import { escapeForTerminal } from "../../escape.ts";

/** The real path of `p`, or `p` when it cannot be resolved. */
function realOr(p: string): string {
  try {
    return realpathSync(p);
  } catch {
    return p;
  }
}

export default defineCommand({
  meta: { name: "mcp", description: `Serve kerncap's verbs as MCP tools over stdio (${TOOL_NAMES.join(", ")})` },
  args: {
    "print-config": {
      type: "string",
      valueHint: "CLIENT",
      description: `Print how to register this kerncap with an MCP client (${CLIENT_NAMES.join(", ")}) and where that goes; serve nothing`,
    },
    "trust-builds": {
      type: "boolean",
      description:
        "Let validate, tune, profile --build and evaluate run the build.sh of a received capture (unpacked, made on another machine, or in a folder another user owns or may write) and a Triton capture's compile of src/; without it such a build is refused (a received capture trusted on the command line, kerncap validate DIR --trust=DIGEST, builds without it; docs/security.md)",
      default: false,
    },
    "agent-judging": {
      type: "boolean",
      description:
        "Let the agent choose how its calls are judged (the tools' atol, rtol, dtype and multiset); without it those arguments are refused and the capture's judging settings apply (kerncap judge DIR, set by you)",
      default: false,
    },
    root: {
      type: "string",
      valueHint: "DIR",
      description:
        "A folder the tools' capture folders must lie under (repeatable; default: the working folder); any other dir is refused with one message that says nothing of what is there",
    },
    jobs: {
      type: "string",
      valueHint: "N",
      description: `How many tool calls run their kerncap child at once; the others wait their turn, with progress notifications (default ${MCP_DEFAULT_JOBS}: half the cores, 2 to 8)`,
    },
    ...verboseArg,
  },
  async run({ args }) {
    const given = (args as Record<string, unknown>).root;
    const raw = (Array.isArray(given) ? given : given === undefined ? [] : [given]).map(String);
    // an empty --root (`--root "$UNSET"`) is no folder: resolved, it would be the working folder, / under many clients (trial 26)
    if (raw.some((r) => r.trim() === ""))
      throw new KerncapError("E_USAGE", "--root is empty: give the folder the agent may work in", { hint: "kerncap mcp --root DIR (repeatable)." });
    const roots = raw.map((r) => resolve(r));
    assertRootFolders(roots, printable); // before serving: a missing root would make every call E_NOT_CAPTURE
    // the roots the server will serve: a client starts it in a folder of its own choosing (often / or
    // the home folder), so the printed command names them (--root), the working folder by default
    const served = roots.length ? roots : [process.cwd()];
    // / as a root (given, or the working folder by default) would let the agent reach every capture on the machine
    if (served.some((r) => realOr(r) === "/"))
      throw new KerncapError(
        "E_USAGE",
        roots.length
          ? "--root / would let the agent reach every capture on the machine"
          : "kerncap mcp started in / with no --root: every capture on the machine would be the agent's to reach",
        {
          hint: "Give the folders the agent may work in: kerncap mcp --root DIR (kerncap mcp --root DIR --print-config CLIENT prints the client's configuration with it).",
        },
      );
    // each root by its real path, taken once: no one else re-points it while the server runs (a root they could is refused)
    const pinned = pinnedRoots(served, printable);
    if (args["print-config"] !== undefined) {
      // the snippet is pasted into a shell or a client's file as it is: a folder or a kerncap path holding a control,
      // bidi or line-separator character would reach both raw (adversary 29); such a name is refused, never printed
      const odd = [...served, ...selfCommand()].find((p) => escapeForTerminal(p, { oneLine: true }) !== p);
      if (odd !== undefined)
        throw new KerncapError("E_USAGE", `${printable(odd)} holds a control, bidi or line-separator character: no configuration is printed with it`, {
          hint: "Rename the folder (or give another --root), then print the configuration again.",
        });
      const c = clientConfig(String(args["print-config"]), selfCommand(), served);
      process.stdout.write(c.snippet);
      log.info(c.where);
      log.info(`the server serves the capture folders under ${served.map((r) => printable(r)).join(", ")} (--root; give other --root DIR to change it)`);
      return 0;
    }
    const jobs = args.jobs === undefined ? undefined : Number(args.jobs);
    if (jobs !== undefined && (!Number.isInteger(jobs) || jobs < 1 || jobs > 1024))
      throw new KerncapError("E_USAGE", `--jobs ${oneLine(String(args.jobs))} is not a whole number from 1 to 1024`, { hint: "Give --jobs N, e.g. --jobs 4." });
    log.info(`MCP server on stdio (tools: ${TOOL_NAMES.join(", ")}); end with Ctrl-D`);
    // the client closing stdin ends the session (the SDK's transport does not watch for it)
    const transport = new EscapedStdioTransport(process.stdin, process.stdout, { maxBufferSize: MCP_MESSAGE_MAX });
    const trust = { trustBuilds: Boolean(args["trust-builds"]), agentJudging: Boolean(args["agent-judging"]), roots: pinned };
    // held calls' arguments past half MCP_INFLIGHT_MAX: the client's next messages wait in the pipe, unread
    const done = serve(transport, trust, jobs, {
      pause: () => process.stdin.pause(),
      // the transport, once closed, reads no more (its data listener gone): stdin left paused, so the process can end
      resume: () => void (process.stdin.listenerCount("data") > 0 && process.stdin.resume()),
    });
    const end = () => void transport.close();
    process.stdin.once("end", end).once("close", end);
    await done;
    if (endedByOversizedMessage(transport)) {
      throw new KerncapError("E_USAGE", `the MCP session ended: a message was larger than ${MCP_MESSAGE_MAX >> 20} MiB`, {
        hint: "Send smaller messages; file contents go through read_file/edit_file (at most 4 MiB each).",
      });
    }
    return 0;
  },
});
