/**
 * kerncap mcp's stdio transport: the SDK's (@modelcontextprotocol/sdk StdioServerTransport), each
 * message written as kerncap writes every JSON document (src/escape.ts jsonText: C1 controls, bidi
 * overrides, line separators as \uNNNN) instead of JSON.stringify's raw characters: a received
 * capture's names and sources travel in results and read_file's text, and a client that logs or
 * shows the stream shows them as escapes (adversary 74). The same JSON values either way.
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { Readable, Writable } from "node:stream";
import { jsonText } from "../escape.ts";

export class EscapedStdioTransport extends StdioServerTransport {
  constructor(
    stdin: Readable,
    private readonly out: Writable,
    options?: ConstructorParameters<typeof StdioServerTransport>[2],
  ) {
    super(stdin, out, options);
  }

  /** One message, one line; resolves once stdout took it (after 'drain' when its buffer was full), as the SDK's send. */
  override send(message: JSONRPCMessage): Promise<void> {
    return new Promise((resolve) => {
      if (this.out.write(`${jsonText(message)}\n`)) resolve();
      else this.out.once("drain", resolve);
    });
  }
}
