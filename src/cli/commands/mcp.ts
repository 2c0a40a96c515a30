/** `kerncap mcp`: an MCP server on stdin/stdout (src/mcp/server.ts); logs stay on stderr. */
import { defineCommand } from "citty";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { log } from "../../log.ts";
import { serve } from "../../mcp/server.ts";
import { verboseArg } from "../args.ts";

export default defineCommand({
  meta: { name: "mcp", description: "Serve kerncap's verbs as MCP tools over stdio (list, run, inspect, replay, validate, read_file, edit_file)" },
  args: { ...verboseArg },
  async run() {
    log.info("MCP server on stdio (tools: list, run, inspect, replay, validate, read_file, edit_file); end with Ctrl-D");
    await serve(new StdioServerTransport());
    return 0;
  },
});
