// @infer/hub/browser: what works without a file system. Hub references resolve to URLs that
// @infer/wasm loads from (and keeps in the browser's own cache); aliases and file selection as in Node.
export { registerAlias, resolveAlias, listAliases } from "./aliases.js";
export { fileUrl, listRepoFiles, type HubConnection, type RepoFile } from "./listing.js";
export { hubRefOf, resolveModelUrl } from "./model-url.js";
export { formatHubRef, parseHubRef, type HubRef } from "./ref.js";
export { GGUF_PREFERENCE, selectFiles, type Selection } from "./select.js";
