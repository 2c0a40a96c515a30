/** The toy frontend's one template (./build.sh.hbs), embedded as text like a real frontend's. */
import build from "./build.sh.hbs" with { type: "text" };
import type { TemplateFile } from "../../../src/frontends/templates.ts";

export const TOY_TEMPLATES: readonly TemplateFile[] = [{ path: "build.sh.hbs", text: build, mode: 0o755 }];
