/**
 * `kerncap mcp --print-config CLIENT`: how to register this kerncap's MCP server (stdio, `kerncap
 * mcp`) with a client, as each client's documentation gives it: the command line or the JSON/TOML
 * to merge into its configuration file, with the executable's real path, and where that file is.
 * Sources: Claude Code `claude mcp add` (docs.anthropic.com, "Connect Claude Code to tools via
 * MCP"); Claude Desktop claude_desktop_config.json `mcpServers` (modelcontextprotocol.io, "Connect
 * to local MCP servers"); Cursor mcp.json `mcpServers` (docs.cursor.com, "Model Context
 * Protocol"); VS Code mcp.json `servers` with `type: "stdio"` (code.visualstudio.com, "Use MCP
 * servers in VS Code"); Codex config.toml `[mcp_servers.NAME]` (github.com/openai/codex/blob/main/docs/config.md).
 */
import { realpathSync } from "node:fs";
import { KerncapError } from "../errors.ts";
import { shellQuote } from "../util/shell-quote.ts";

/** A client's registration: the text to run or merge (stdout), and where it goes (said on stderr). */
export interface ClientConfig {
  /** The command to run, or the configuration to merge into the file named in `where`. */
  snippet: string;
  /** Where the snippet goes, in words. */
  where: string;
}

const CLIENTS = {
  "claude-code": (cmd: string[]): ClientConfig => ({
    snippet: `claude mcp add --scope user kerncap -- ${cmd.map(shellQuote).join(" ")}\n`,
    where: "run it in a shell; --scope user registers kerncap for every project (--scope project writes .mcp.json in this project instead)",
  }),
  "claude-desktop": (cmd: string[]): ClientConfig => ({
    snippet: json({ mcpServers: { kerncap: stdio(cmd) } }),
    where:
      "merge it into claude_desktop_config.json: ~/Library/Application Support/Claude/ (macOS), %APPDATA%\\Claude\\ (Windows), ~/.config/Claude/ (Linux); then restart Claude Desktop",
  }),
  cursor: (cmd: string[]): ClientConfig => ({
    snippet: json({ mcpServers: { kerncap: stdio(cmd) } }),
    where: "merge it into ~/.cursor/mcp.json (every project) or .cursor/mcp.json (this project)",
  }),
  vscode: (cmd: string[]): ClientConfig => ({
    snippet: json({ servers: { kerncap: { type: "stdio", ...stdio(cmd) } } }),
    where: "merge it into .vscode/mcp.json (this workspace), or into the user mcp.json that the command 'MCP: Open User Configuration' opens",
  }),
  codex: (cmd: string[]): ClientConfig => ({
    snippet: `[mcp_servers.kerncap]\ncommand = ${JSON.stringify(cmd[0])}\nargs = [${cmd
      .slice(1)
      .map((a) => JSON.stringify(a))
      .join(", ")}]\n`,
    where: "append it to ~/.codex/config.toml",
  }),
} as const;

export type ClientName = keyof typeof CLIENTS;
export const CLIENT_NAMES = Object.keys(CLIENTS) as ClientName[];

const stdio = (cmd: string[]) => ({ command: cmd[0]!, args: cmd.slice(1) });
const json = (o: object) => JSON.stringify(o, null, 2) + "\n";

/**
 * The registration of `kerncap mcp` with `client`; `self`: the command line that runs this kerncap
 * (src/util/self-exec.ts selfCommand), its executable resolved through symbolic links: clients start a
 * server with their own environment (Claude Desktop's PATH is not the shell's), so a bare
 * `kerncap` may not be found; `roots`: the server's --root folders, named on its command line (a
 * client starts the server in a folder of its own choosing, which would be the default root).
 * @throws KerncapError E_USAGE for a client this kerncap knows no configuration of (naming those it knows).
 */
export function clientConfig(client: string, self: string[], roots: readonly string[] = []): ClientConfig {
  if (!Object.hasOwn(CLIENTS, client)) {
    throw new KerncapError("E_USAGE", `no MCP configuration for ${JSON.stringify(client)}`, {
      hint: `Clients: ${CLIENT_NAMES.join(", ")}. Any other client: command ${[...self, "mcp"].map(shellQuote).join(" ")}, transport stdio.`,
    });
  }
  let exe = self[0]!;
  try {
    exe = realpathSync(exe);
  } catch {
    /* the path as given */
  }
  return CLIENTS[client as ClientName]([exe, ...self.slice(1), "mcp", ...roots.flatMap((r) => ["--root", r])]);
}
