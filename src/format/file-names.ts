/**
 * Names of the files kerncap writes beside a capture's own: a leaf module (no package imports), so
 * the GPU suite, which runs on a node without node_modules, can import them.
 */

/** Left in a folder by `kerncap unpack` (src/format/trust.ts): the capture came from someone else. */
export const RECEIVED_MARK = "kerncap-received.json";
