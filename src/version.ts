/** Tool version, from package.json (bundled into the executable at build time). */
import pkg from "../package.json" with { type: "json" };
export const TOOL_VERSION: string = pkg.version;
