/**
 * `@infer/hub/remote`: resolving a hub reference to the URL of its file, without Node (a web
 * page resolves `hf:org/repo[:quant]` with these; the hub sends CORS headers).
 */
export { fileUrl, listRepoFiles, type HubConnection, type RepoFile } from "./listing.js";
export { formatHubRef, parseHubRef, type HubRef } from "./ref.js";
export { GGUF_PREFERENCE, selectFiles, type Selection } from "./select.js";
